"""``python -m devhost.http.show_key`` (``make host-key`` / ``make master-key``) prints the key the local app
serves with: one fixed in local.settings.json, else the one devhost keeps; no key yet is exit 2 with why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devhost.http.key_store import KeyStore
from devhost.http.show_key import main
from devhost.local_settings import ConfiguredKeys


def kept_keys(data_dir: Path) -> ConfiguredKeys:
    names = iter(["kept-master", "kept-host"])
    return KeyStore(data_dir / "secrets").resolve(ConfiguredKeys(), [], lambda: next(names))


def test_the_kept_keys_are_printed_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept_keys(tmp_path / "devhost")
    arguments = ["--settings", str(tmp_path / "absent.json"), "--data-dir", str(tmp_path / "devhost")]
    assert main(["host", *arguments]) == 0
    assert capsys.readouterr().out == "kept-host\n"
    assert main(["master", *arguments]) == 0
    assert capsys.readouterr().out == "kept-master\n"


def test_a_key_fixed_in_local_settings_wins_over_the_kept_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept_keys(tmp_path / "devhost")
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps({"Values": {}, "Keys": {"host": "fixed-host"}}))
    arguments = ["--settings", str(settings), "--data-dir", str(tmp_path / "devhost")]
    assert main(["host", *arguments]) == 0
    assert capsys.readouterr().out == "fixed-host\n"
    assert main(["master", *arguments]) == 0
    assert capsys.readouterr().out == "kept-master\n"


def test_before_the_first_make_run_there_is_no_key_and_the_error_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["host", "--settings", str(tmp_path / "none.json"), "--data-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no host key yet" in captured.err and "make run" in captured.err
    assert not (tmp_path / "secrets").exists()  # reading creates nothing


def test_an_unreadable_secrets_file_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "host.json").write_text("{not json")
    assert main(["master", "--settings", str(tmp_path / "none.json"), "--data-dir", str(tmp_path)]) == 2
    assert "host.json" in capsys.readouterr().err
