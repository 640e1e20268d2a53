"""Every shell command in the docs is either an Azure command (it cannot run here) or a local one that a
test or a make target exercises; the table below names the witness of each local command, and this test
checks that the witness exists.

Commands are read from fenced ``sh``/``bash``/``shell``/``console`` blocks of docs/*.md and README.md
(``console`` blocks: the lines starting with ``$ ``).
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.infra.infra_paths import DOCS, REPO

SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


@dataclass(frozen=True, slots=True)
class DocCommand:
    file: str
    text: str


@dataclass(frozen=True, slots=True)
class Witness:
    """Tests that run a kind of local command: ``path::test_function``, each file containing ``tokens``."""

    pattern: str  # regex matched against the command
    tests: tuple[str, ...]
    tokens: tuple[str, ...] = ()


# Local commands of the docs other than `make <target>` (checked against the Makefile), and their witnesses.
WITNESSES: tuple[Witness, ...] = (
    Witness(
        r"^cp local\.settings\.sample\.json local\.settings\.json$",
        (
            "tests/infra/test_bicep_settings.py::test_the_sample_runs_the_functions_host_against_the_local_emulators",
        ),
    ),
    Witness(
        r"^curl -X (PUT|GET) http://127\.0\.0\.1:7071/api/endpoints/\w+/subscriptions\b",
        (
            "tests/functions/test_end_to_end.py::test_each_endpoint_handles_exactly_the_events_it_subscribes_to_over_http_and_sdk",
        ),
        ("/api/endpoints/", "x-functions-key"),
    ),
    Witness(
        r"^curl -X POST http://127\.0\.0\.1:7071/api/events/[\w.]+\b",
        (
            "tests/functions/test_end_to_end.py::test_handlers_publish_with_the_incoming_correlation_carried_over",
        ),
        ("/api/events/",),
    ),
    Witness(
        r"^\.venv/bin/python -m shared\.topology (validate|plan|apply)"
        r" --options \S+ --endpoint \w+ --events [\w. ]+$",
        (
            "tests/shared/topology/test_topology_cli.py::test_validate_reports_every_violation_and_exits_2",
            "tests/shared/topology/test_topology_cli.py::test_plan_then_apply_then_plan_again",
            "tests/shared/topology/test_topology_cli.py::test_object_events_and_missing_management_settings",
        ),
        ("validate", "plan", "apply", "--options", "--endpoint", "--events"),
    ),
    Witness(
        r"^\.venv/bin/python -m shared\.topology (plan|apply) --migrate"
        r" --options \S+ --endpoint \w+ --events [\w. ]+$",
        (
            "tests/functions/test_migration_journey.py::test_moving_an_event_to_its_own_topic_while_events_flow_loses_none_and_doubles_none_outside_the_handover",
        ),
        ("plan --migrate", "apply --migrate"),
    ),
    Witness(
        r"^\.venv/bin/python -m shared\.redrive plan$",
        (
            "tests/shared/redrive/test_redrive_settings.py::test_the_cli_exits_2_with_the_problem_when_settings_are_missing",
            "tests/shared/redrive/test_redrive_runs.py::test_a_plan_counts_what_a_run_would_do_and_settles_nothing",
            "tests/devhost/test_make_run_tools.py::test_the_documented_command_lines_reach_the_app_make_run_serves_on_os_picked_ports",
        ),
        ("plan",),
    ),
)


def commands_of(block: str, console: bool = False) -> list[str]:
    """One command per logical line: continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if console:
            if not line.startswith("$ "):
                continue
            line = line[2:].strip()
        if line and not line.startswith("#"):
            found.append(line)
    return found


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in [*sorted(DOCS.glob("*.md")), REPO / "README.md"]:
        text = path.read_text(encoding="utf-8")
        for language, body in FENCE.findall(text):
            if language.lower() in SHELL_LANGUAGES:
                for command in commands_of(body, console=language.lower() == "console"):
                    found.append(DocCommand(path.relative_to(REPO).as_posix(), command))
    return found


def classify(command: str) -> str:
    """``azure`` (needs an Azure account or Azure tooling), ``local``, or ``unknown``."""
    assignment = re.match(r"^[A-Z_][A-Z0-9_]*=(.*)$", command)
    if assignment:
        return "azure" if re.search(r"\$\((az|databricks) ", assignment.group(1)) else "unknown"
    words = shlex.split(command, posix=True)
    if not words:
        return "unknown"
    first = words[0]
    if first in ("az", "databricks") or (first == "func" and words[1:2] == ["azure"]):
        return "azure"
    if first == "curl":
        urls = [w for w in words if re.match(r"https?://", w)]
        hosts = {re.sub(r"^https?://([^/:]+).*$", r"\1", u) for u in urls}
        if hosts and hosts <= LOCAL_HOSTS:
            return "local"
        return "azure" if hosts else "unknown"
    if first in ("make", "cp") or first.endswith("python") or first.endswith("python3"):
        return "local"
    return "unknown"


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:", text, re.M))


def test_the_command_reader_joins_continuations_and_skips_comments() -> None:
    block = "# provision\naz group create \\\n  --name rg\n\nmake test\n"
    assert commands_of(block) == ["az group create --name rg", "make test"]
    assert commands_of("$ make run\noutput line\n", console=True) == ["make run"]


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("az deployment group create --resource-group rg --template-file infra/main.bicep", "azure"),
        ('func azure functionapp publish "$APP"', "azure"),
        ("databricks bundle deploy --target prod", "azure"),
        ("APP=$(az deployment group show --query x --output tsv)", "azure"),
        ('curl "https://$HOST/api/topology" -H "x-functions-key: $KEY"', "azure"),
        ("curl -X PUT http://127.0.0.1:7071/api/endpoints/billing/subscriptions", "local"),
        ("make run", "local"),
        (".venv/bin/python -m shared.redrive plan", "local"),
        ("func start", "unknown"),
        ("rm -rf /", "unknown"),
    ],
)
def test_commands_are_classified_as_azure_or_local(command: str, kind: str) -> None:
    assert classify(command) == kind


def test_every_doc_command_is_classified() -> None:
    commands = doc_commands()
    assert {classify(c.text) for c in commands} >= {"azure", "local"}, "the docs lost their commands"
    unknown = [f"{c.file}: {c.text}" for c in commands if classify(c.text) == "unknown"]
    assert unknown == [], "neither an Azure command nor a known local one"


def test_every_local_doc_command_is_run_by_a_make_target_or_a_test() -> None:
    targets = make_targets()
    problems = []
    for command in (c for c in doc_commands() if classify(c.text) == "local"):
        words = shlex.split(command.text)
        if words[0] == "make":
            missing = [t for t in words[1:] if "=" not in t and not t.startswith("-") and t not in targets]
            if missing:
                problems.append(f"{command.file}: {command.text}: no make target {missing}")
        elif not any(re.search(w.pattern, command.text) for w in WITNESSES):
            problems.append(f"{command.file}: {command.text}: no witness in WITNESSES")
    assert problems == []


def _defines(path: Path, function: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == function for n in ast.walk(tree))


def test_every_witness_exists_and_is_used_by_the_docs() -> None:
    commands = [c.text for c in doc_commands()]
    problems = []
    for witness in WITNESSES:
        if not any(re.search(witness.pattern, c) for c in commands):
            problems.append(f"unused witness {witness.pattern}")
        for test in witness.tests:
            file, _, function = test.partition("::")
            path = REPO / file
            if not path.is_file() or not _defines(path, function):
                problems.append(f"missing witness test {test}")
                continue
            source = path.read_text(encoding="utf-8")
            problems.extend(
                f"{file} does not mention {token!r}" for token in witness.tokens if token not in source
            )
    assert problems == []
