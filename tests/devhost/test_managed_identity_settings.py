"""devhost with its emulator gives the app a managed identity as Azure's host does: ``IDENTITY_ENDPOINT`` and
``IDENTITY_HEADER`` in its settings (environment), naming the emulator's token endpoint, unless the app's own
settings or the environment set them; and its banner prints what code outside the app exports to sign in
the same way (the SDK's samples)."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.identity import ManagedIdentityCredential

from devhost.__main__ import effective_settings, identity_banner, identity_settings, parse_args
from emulator.testing import running_emulator


def test_the_app_gets_the_emulators_identity_endpoint_and_header_that_issue_it_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_emulator() as handle:
        settings = effective_settings({}, {}, identity_settings(handle.emulator, {}, {}))
        # What the Functions worker's code sees: the settings as environment variables.
        monkeypatch.setenv("IDENTITY_ENDPOINT", settings["IDENTITY_ENDPOINT"])
        monkeypatch.setenv("IDENTITY_HEADER", settings["IDENTITY_HEADER"])
        token = ManagedIdentityCredential().get_token("https://servicebus.azure.net//.default")
        grant = handle.emulator.identity.check(
            token.token, "https://servicebus.azure.net", token.expires_on - 60
        )
        assert grant.expires_at == token.expires_on


@pytest.mark.parametrize("configured", ["IDENTITY_ENDPOINT", "IDENTITY_HEADER"])
def test_app_settings_that_name_an_identity_keep_it_whole(configured: str) -> None:
    with running_emulator() as handle:
        from_file = identity_settings(handle.emulator, {configured: "the app's own"}, {})
        from_environment = identity_settings(handle.emulator, {}, {configured: "the shell's own"})
    # Neither half of the emulator's pair: an endpoint from one place and a header from another never match.
    assert from_file == {} and from_environment == {}


def test_the_banner_names_the_namespace_the_identity_and_the_certifi_trust(tmp_path: Path) -> None:
    with running_emulator(
        data_dir=tmp_path, management_tls=True, management_tls_port=0, amqps_port=0
    ) as handle:
        lines = identity_banner(handle.emulator)
        emulator = handle.emulator
        assert f"SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=localhost:{emulator.amqps_port}" in lines
        assert f"IDENTITY_ENDPOINT={emulator.identity_endpoint}" in lines
        assert f"IDENTITY_HEADER={emulator.identity_header}" in lines
        assert f"PYTHONPATH={tmp_path / 'python-trust'}" in lines
        assert (
            (tmp_path / "python-trust" / "certifi" / "cacert.pem")
            .read_text()
            .endswith((tmp_path / "management-ca.pem").read_text())
        )


def test_devhost_serves_the_namespace_tls_port_on_5671_by_default() -> None:
    # 5671: where ServiceBusClient opens AMQP over TLS for any fully qualified namespace.
    assert parse_args(["--with-emulator"]).amqps_port == 5671
