"""The HTTPS management port's CA is kept under the data dir: a client told once to trust the CA file keeps
trusting the emulator across restarts; a broken or mismatched pair is replaced, never half-used."""

from __future__ import annotations

import asyncio
import ssl
import stat
from datetime import timedelta
from pathlib import Path

import pytest

from emulator.arm import tls
from emulator.arm.tls import CA_FILE_NAME, CA_KEY_FILE_NAME, create_tls


def handshake(server_context: ssl.SSLContext, ca_file: Path) -> str:
    """A TLS handshake with a client trusting only ``ca_file``, for ``localhost``; the peer's common name."""

    async def scenario() -> str:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        client = ssl.create_default_context(cafile=str(ca_file))
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="localhost"
            )
            subject = dict(pair[0] for pair in writer.get_extra_info("peercert")["subject"])
            writer.close()
            return str(subject["commonName"])
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(scenario())


def test_a_restart_keeps_the_ca_so_its_file_stays_trusted(tmp_path: Path) -> None:
    ca_file = tmp_path / CA_FILE_NAME
    first = create_tls(ca_file)
    trusted = ca_file.read_bytes()

    second = create_tls(ca_file)

    assert ca_file.read_bytes() == trusted
    assert handshake(first.context, ca_file) == "localhost"
    assert handshake(second.context, ca_file) == "localhost"


def test_the_ca_private_key_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    create_tls(tmp_path / CA_FILE_NAME)

    mode = stat.S_IMODE((tmp_path / CA_KEY_FILE_NAME).stat().st_mode)
    assert mode == 0o600


def test_a_key_that_does_not_match_the_certificate_is_replaced_by_a_new_ca(tmp_path: Path) -> None:
    ca_file = tmp_path / CA_FILE_NAME
    create_tls(ca_file)
    stale = ca_file.read_bytes()
    other = tmp_path / "other"
    create_tls(other / CA_FILE_NAME)
    (tmp_path / CA_KEY_FILE_NAME).write_bytes((other / CA_KEY_FILE_NAME).read_bytes())

    material = create_tls(ca_file)

    assert ca_file.read_bytes() != stale
    assert handshake(material.context, ca_file) == "localhost"


def test_an_unreadable_key_file_is_replaced_by_a_new_ca(tmp_path: Path) -> None:
    ca_file = tmp_path / CA_FILE_NAME
    create_tls(ca_file)
    stale = ca_file.read_bytes()
    (tmp_path / CA_KEY_FILE_NAME).write_text("not a key", encoding="utf-8")

    material = create_tls(ca_file)

    assert ca_file.read_bytes() != stale
    assert handshake(material.context, ca_file) == "localhost"


def test_a_ca_close_to_expiry_is_replaced_by_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca_file = tmp_path / CA_FILE_NAME
    create_tls(ca_file)
    stale = ca_file.read_bytes()
    # Renewing a year ahead: the kept CA (valid a year) is inside the renewal window.
    monkeypatch.setattr(tls, "CA_RENEW_BEFORE", tls.CA_LIFETIME + timedelta(days=1))

    material = create_tls(ca_file)

    assert ca_file.read_bytes() != stale
    assert handshake(material.context, ca_file) == "localhost"
