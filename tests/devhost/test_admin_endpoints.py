"""What devhost tells about the emulator's admin API (banner and endpoints record): where
``ServiceBusAdministrationClient`` reaches it over HTTPS and the CA file it trusts, or that it is off."""

from __future__ import annotations

from pathlib import Path

from azure.servicebus.management import ServiceBusAdministrationClient

from devhost.__main__ import admin_banner, emulator_admin_endpoints, parse_args, start_emulator
from emulator.testing import running_emulator


def test_the_admin_endpoints_name_a_connection_string_the_admin_client_reaches_trusting_the_ca(
    tmp_path: Path,
) -> None:
    with running_emulator(data_dir=tmp_path, management_tls=True, management_tls_port=0) as handle:
        admin = emulator_admin_endpoints(handle.emulator)
        ca_file = admin["managementCaFile"]
        assert Path(ca_file).is_absolute() and Path(ca_file) == (tmp_path / "management-ca.pem").resolve()
        assert admin["managementTls"] == f"https://localhost:{handle.emulator.management_tls_port}"
        with ServiceBusAdministrationClient.from_connection_string(
            admin["adminConnectionString"], connection_verify=ca_file
        ) as client:
            assert client.get_namespace_properties().name == handle.emulator.namespace.name
        banner = "\n".join(admin_banner(admin))
        assert f"Service Bus admin connection string: {admin['adminConnectionString']}" in banner
        assert f"REQUESTS_CA_BUNDLE={ca_file}" in banner and f"SSL_CERT_FILE={ca_file}" in banner


def test_without_https_there_is_no_admin_connection_string_and_the_banner_says_how_to_get_one() -> None:
    with running_emulator() as handle:
        admin = emulator_admin_endpoints(handle.emulator)
    assert admin == {}
    assert admin_banner(admin) == ["Service Bus admin connection string: none (start with --management-tls)"]


def test_devhost_serves_the_admin_api_over_https_by_default_on_5301() -> None:
    default = parse_args(["--with-emulator"])
    assert default.management_tls is True and default.management_tls_port == 5301
    assert parse_args(["--with-emulator", "--no-management-tls"]).management_tls is False


def test_devhost_runs_a_standard_namespace_unless_told_premium(tmp_path: Path) -> None:
    assert parse_args(["--with-emulator"]).emulator_sku == "Standard"
    ports = ["--amqp-port", "0", "--management-port", "0", "--management-tls-port", "0", "--amqps-port", "0"]
    args = parse_args(
        ["--with-emulator", "--emulator-sku", "Premium", *ports, "--emulator-data-dir", str(tmp_path)]
    )
    thread = start_emulator(args, None)
    try:
        admin = emulator_admin_endpoints(thread.emulator)
        with ServiceBusAdministrationClient.from_connection_string(
            admin["adminConnectionString"], connection_verify=admin["managementCaFile"]
        ) as client:
            sku = client.get_namespace_properties().messaging_sku
    finally:
        thread.stop()

    assert sku == "Premium"
