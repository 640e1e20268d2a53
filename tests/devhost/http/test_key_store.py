"""HTTP keys persist across restarts in the app's data, as the Functions host keeps them in storage, unless
local.settings.json fixes them (devhost.http.key_store); the endpoints record of a running devhost
(devhost.endpoints_record)."""

from __future__ import annotations

import itertools
import json
import os
import stat
from pathlib import Path

import pytest

from devhost.endpoints_record import remove_record, write_record
from devhost.http.key_store import KeyStore, KeyStoreError
from devhost.local_settings import ConfiguredKeys


def counter() -> itertools.count[int]:
    return itertools.count(1)


def keys_from(numbers: itertools.count[int]) -> str:
    return f"generated-{next(numbers)}"


def test_keys_are_created_on_first_start_and_the_same_after_a_restart(tmp_path: Path) -> None:
    numbers = counter()
    first = KeyStore(tmp_path / "secrets").resolve(
        ConfiguredKeys(), ["subscribe", "ops"], lambda: keys_from(numbers)
    )
    again = KeyStore(tmp_path / "secrets").resolve(
        ConfiguredKeys(), ["subscribe", "ops"], lambda: keys_from(numbers)
    )

    assert first == again
    assert len({first.master, first.host, *first.functions.values()}) == 4


def test_keys_are_kept_in_the_hosts_secrets_file_layout_readable_by_the_owner_only(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path).resolve(ConfiguredKeys(), ["Subscribe"], lambda: "k")

    host = json.loads((tmp_path / "host.json").read_text())
    function = json.loads((tmp_path / "subscribe.json").read_text())
    assert host["masterKey"] == {"name": "master", "value": keys.master, "encrypted": False}
    assert host["functionKeys"] == [{"name": "default", "value": keys.host, "encrypted": False}]
    assert function["keys"] == [{"name": "default", "value": keys.functions["Subscribe"], "encrypted": False}]
    assert stat.S_IMODE((tmp_path / "host.json").stat().st_mode) == 0o600


def test_keys_fixed_in_local_settings_win_and_are_not_stored(tmp_path: Path) -> None:
    numbers = counter()
    stored = KeyStore(tmp_path).resolve(ConfiguredKeys(), ["subscribe"], lambda: keys_from(numbers))
    fixed = ConfiguredKeys(host="fixed-host", functions={"subscribe": "fixed-fn"})

    with_fixed = KeyStore(tmp_path).resolve(fixed, ["subscribe"], lambda: keys_from(numbers))
    without = KeyStore(tmp_path).resolve(ConfiguredKeys(), ["subscribe"], lambda: keys_from(numbers))

    assert with_fixed == ConfiguredKeys(
        master=stored.master, host="fixed-host", functions={"subscribe": "fixed-fn"}
    )
    assert without == stored  # the fixed keys were never written over the stored ones


def test_a_function_added_later_gets_a_key_and_the_others_keep_theirs(tmp_path: Path) -> None:
    numbers = counter()
    before = KeyStore(tmp_path).resolve(ConfiguredKeys(), ["a"], lambda: keys_from(numbers))
    after = KeyStore(tmp_path).resolve(ConfiguredKeys(), ["a", "b"], lambda: keys_from(numbers))

    assert after.functions["a"] == before.functions["a"] and after.master == before.master
    assert after.functions["b"] not in (before.master, before.host, before.functions["a"])


@pytest.mark.parametrize(
    "document",
    ["{not json", "[]", '{"masterKey": {"name": "master", "value": "x", "encrypted": true}}'],
)
def test_a_damaged_secrets_file_is_refused_with_its_path_and_left_as_it_was(
    tmp_path: Path, document: str
) -> None:
    (tmp_path / "host.json").write_text(document)

    with pytest.raises(KeyStoreError, match=r"host\.json"):
        KeyStore(tmp_path).resolve(ConfiguredKeys(), [], lambda: "k")
    assert (tmp_path / "host.json").read_text() == document


def test_the_endpoints_record_is_removed_only_by_the_devhost_that_wrote_it(tmp_path: Path) -> None:
    admin = {"adminConnectionString": "Endpoint=sb://localhost:5301;...", "managementCaFile": "/ca.pem"}
    storage = {"table": "http://127.0.0.1:10002/devstoreaccount1"}
    path = write_record(
        tmp_path, "http://127.0.0.1:40999", {"ServiceBusConnection": "Endpoint=sb://x"}, admin, storage
    )
    assert json.loads(path.read_text()) == {
        "pid": os.getpid(),
        "http": "http://127.0.0.1:40999",
        "settings": {"ServiceBusConnection": "Endpoint=sb://x"},
        "admin": admin,
        "storage": storage,
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the emulator's management token
    remove_record(tmp_path)
    assert not path.exists()

    path.write_text(json.dumps({"pid": os.getpid() + 1, "http": "http://127.0.0.1:1", "settings": {}}))
    remove_record(tmp_path)  # another devhost started on the same data since: its record stays
    assert path.exists()
