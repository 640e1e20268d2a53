"""checkov, the IaC scanner Azure teams hold their templates to, passes over infra/ with no unexplained
finding: every check either passes or is skipped in the template itself with a reason, and every skip is
listed in docs/deployment.md.

checkov runs from its own virtualenv (tools/checkov/.venv, which `make test` prepares; see
tools/checkov/requirements.txt), as a subprocess, offline (``--skip-download``: no policy download, no
network).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra.infra_paths import DOCS, INFRA, REPO

CHECKOV = REPO / "tools" / "checkov" / ".venv" / "bin" / "checkov"
SKIP_COMMENT = re.compile(r"^\s*//\s*checkov:skip=(\w+):(.*)$", re.M)
# | `CKV_AZURE_35` | `modules/storage.bicep` `hostAccount` | reason |
DOC_ROW = re.compile(r"^\|\s*`(CKV\w+)`\s*\|\s*`([\w/.-]+\.bicep)`\s*`(\w+)`\s*\|(.+)\|\s*$", re.M)


@dataclass(frozen=True)
class Finding:
    """One check result, located the way docs/deployment.md lists it."""

    check_id: str
    file: str  # relative to infra/
    symbol: str  # the resource's symbolic name
    comment: str  # checkov's suppress comment ('' unless skipped)

    @classmethod
    def of(cls, result: dict[str, Any]) -> Finding:
        return cls(
            check_id=result["check_id"],
            file=result["file_path"].lstrip("/"),
            symbol=result["resource"].rsplit(".", 1)[-1],
            comment=(result["check_result"].get("suppress_comment") or "").strip(),
        )

    def __str__(self) -> str:
        return f"{self.check_id} on {self.file} {self.symbol}"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    if not CHECKOV.exists():
        stamp = CHECKOV.parent.parent.relative_to(REPO) / ".installed"
        pytest.fail(
            f"{CHECKOV} is missing: run `make test` (or `make {stamp}`) to create checkov's virtualenv"
        )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    result = subprocess.run(
        [
            str(CHECKOV),
            "--directory",
            str(INFRA),
            "--framework",
            "bicep",
            "--skip-download",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=100,
    )
    # checkov exits 1 when a check fails; its report says which, so the tests below read that instead.
    assert result.returncode in (0, 1), f"checkov crashed ({result.returncode}):\n{result.stderr[-4000:]}"
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def findings(report: dict[str, Any], kind: str) -> list[Finding]:
    return [Finding.of(result) for result in report["results"][kind]]


def test_checkov_parses_every_template_and_runs_its_bicep_checks(report: dict[str, Any]) -> None:
    assert report["check_type"] == "bicep"
    assert report["results"]["parsing_errors"] == []
    assert report["summary"]["parsing_errors"] == 0
    passed = {(f.check_id, f.symbol) for f in findings(report, "passed_checks")}
    # What the templates set so these pass (docs/deployment.md): FTP off, HTTP/2, a geo-redundant archive.
    fixed = {("CKV_AZURE_78", "app"), ("CKV_AZURE_18", "app"), ("CKV_AZURE_67", "app")}
    assert fixed | {("CKV_AZURE_206", "archiveAccount")} <= passed


def test_checkov_finds_no_failed_check_in_infra(report: dict[str, Any]) -> None:
    failed = [
        f"{f}: {r['check_name']}"
        for f, r in zip(findings(report, "failed_checks"), report["results"]["failed_checks"], strict=True)
    ]
    assert failed == [], (
        "fix these in infra/, or skip one in the template with a reason (docs/deployment.md):\n"
        + "\n".join(failed)
    )


def test_every_skip_in_the_templates_has_a_reason_and_is_one_checkov_applied(report: dict[str, Any]) -> None:
    skipped = findings(report, "skipped_checks")
    assert [str(f) for f in skipped if len(f.comment) < 20] == [], (
        "a skip without a reason a reviewer can check"
    )
    written = sorted(
        (check_id, path.relative_to(INFRA).as_posix())
        for path in INFRA.rglob("*.bicep")
        for check_id, _ in SKIP_COMMENT.findall(path.read_text(encoding="utf-8"))
    )
    # A skip comment outside a resource's body is silently ignored by checkov: each one written must apply.
    assert written == sorted((f.check_id, f.file) for f in skipped)


def test_every_skip_is_listed_in_the_deployment_guide(report: dict[str, Any]) -> None:
    listed = {(check_id, file, symbol) for check_id, file, symbol, _ in DOC_ROW.findall(_deployment_md())}
    skipped = {(f.check_id, f.file, f.symbol) for f in findings(report, "skipped_checks")}
    assert sorted(skipped - listed) == [], "skipped in infra/ but not listed in docs/deployment.md"
    assert sorted(listed - skipped) == [], "listed in docs/deployment.md but no longer skipped in infra/"


def _deployment_md() -> str:
    return (DOCS / "deployment.md").read_text(encoding="utf-8")
