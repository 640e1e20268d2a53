"""Reading the guides' commands: every fenced shell command is found with its line and expected outcome,
and is either an Azure command (it cannot run here), ``make test`` (the suite itself) or a local one, which
tests/docs/test_guides.py runs verbatim."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.docs.doc_commands import DocCommand, classify, commands_of, doc_commands, make_targets


def test_the_command_reader_joins_continuations_and_skips_comments() -> None:
    block = "# provision\naz group create \\\n  --name rg\n\nmake test\n"
    assert [(c.line, c.one_line) for c in commands_of(block)] == [
        (2, "az group create --name rg"),
        (5, "make test"),
    ]
    assert [c.text for c in commands_of("$ make run\noutput line\n", console=True)] == ["make run"]


def test_an_expected_outcome_is_read_from_a_trailing_comment_or_the_comment_line_above() -> None:
    block = (
        "tool apply  # exit 2: refused\n"
        "# HTTP 401: no key\n"
        "curl http://127.0.0.1:7071/api/topology\n"
        "# a plain comment\n"
        "curl http://127.0.0.1:7071/api/topology -d '# exit 4 is data, not a comment'\n"
    )
    assert [(c.expected_exit, c.expected_http) for c in commands_of(block)] == [
        (2, None),
        (0, 401),
        (0, None),
    ]


def test_a_command_knows_its_guide_and_line(tmp_path) -> None:
    (tmp_path / "guide.md").write_text("# Title\n\ntext\n\n```sh\nmake run\n```\n\n```json\n{}\n```\n")
    assert doc_commands([tmp_path / "guide.md"], repo=tmp_path) == [DocCommand("guide.md", 6, "make run")]


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
        ("make test", "suite"),
        ("KEY=$(make host-key)", "local"),
        ("until make redrive-run && ls .data/archive; do sleep 1; done", "local"),
        ("cat > topology.json <<'EOF'\n{}\nEOF", "local"),
        (".venv/bin/python -m shared.redrive plan", "local"),
        ("func start", "unknown"),
        ("rm -rf /", "unknown"),
        ("KEY=secret", "unknown"),
    ],
)
def test_commands_are_classified_as_azure_suite_or_local(command: str, kind: str) -> None:
    assert classify(command) == kind


def test_every_doc_command_is_classified() -> None:
    commands = doc_commands()
    assert {classify(c.one_line) for c in commands} >= {"azure", "local"}, "the docs lost their commands"
    unknown = [f"{c.where}: {c.one_line}" for c in commands if classify(c.one_line) == "unknown"]
    assert unknown == [], "neither an Azure command nor a known local one"


def make_invocations(command: str) -> list[list[str]]:
    """The arguments of every ``make`` a command runs (also inside ``$(...)``, loops and ``&&`` lists)."""
    return [shlex.split(m) for m in re.findall(r"(?:^|[\s;&|(])make\s+([^;&|)\n#]*)", command)]


def test_make_invocations_are_found_inside_substitutions_and_loops() -> None:
    command = "until make redrive-run DATA_DIR=x && ls; do sleep 1; done; KEY=$(make host-key)"
    assert make_invocations(command) == [["redrive-run", "DATA_DIR=x"], ["host-key"]]


def test_every_make_target_the_docs_name_exists() -> None:
    targets = make_targets()
    problems = []
    for command in doc_commands():
        for arguments in make_invocations(command.one_line):
            missing = [t for t in arguments if "=" not in t and not t.startswith("-") and t not in targets]
            if missing:
                problems.append(f"{command.where}: {command.one_line}: no make target {missing}")
    assert problems == []


# A user's local.settings.json holds their edits (keys, connection strings, settings); `make run` creates it
# from the sample only when it is missing. A guide command that copies, moves, links, tees, redirects or
# edits in place onto it, or deletes it, would lose them.
_SETTINGS_FILE = r"(?:\S*/)?local\.settings\.json(?=$|[\s;&|)])"
_WRITES_SETTINGS = re.compile(
    rf"(?:^|[\s;&|(])(?:cp|mv|ln|install)\s[^;&|\n]*\s{_SETTINGS_FILE}\s*(?:$|[;&|)])"  # the destination
    rf"|(?:^|[\s;&|(])(?:rm|tee|sed\s+-i\S*)\s[^;&|\n]*?{_SETTINGS_FILE}"
    rf"|>>?\|?\s*{_SETTINGS_FILE}"
)


def writes_local_settings(command: str) -> bool:
    """Whether a shell command overwrites, edits or removes ``local.settings.json``."""
    return _WRITES_SETTINGS.search(command) is not None


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("cp local.settings.sample.json local.settings.json", True),
        ("cp -f local.settings.sample.json ./local.settings.json && make run", True),
        ("cat local.settings.sample.json > local.settings.json", True),
        ("jq . local.settings.sample.json | tee local.settings.json", True),
        ("sed -i 's/a/b/' local.settings.json", True),
        ("rm local.settings.json", True),
        ("cat local.settings.json", False),
        ("cp local.settings.json backup.json", False),
        ("make run SETTINGS=local.settings.json", False),
        ("grep BUSBAR local.settings.json > found.txt", False),
    ],
)
def test_a_command_that_overwrites_edits_or_removes_local_settings_json_is_recognised(
    command: str, writes: bool
) -> None:
    assert writes_local_settings(command) is writes


def test_no_guide_command_overwrites_the_users_local_settings_json() -> None:
    # `make run` creates it from the sample when it is missing (tests/devhost/test_make_run.py)
    offending = [f"{c.where}: {c.one_line}" for c in doc_commands() if writes_local_settings(c.text)]
    assert offending == [], "make run creates local.settings.json when missing; a guide must never replace it"
