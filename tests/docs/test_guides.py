"""The guides are tests: every local shell command of README.md, docs/*.md and spark/README.md runs exactly
as written, in the order of its guide, against the app the guide's own ``make run`` starts.

**Where.** In a fresh copy of the repository (tests/docs/repo_copy.py: the working tree's tracked files, the
checkout's ``.venv`` and tools linked in), never in the checkout, whose ``local.settings.json`` and
``.data/`` are a developer's. The guides name ``http://127.0.0.1:7071`` and ``make run`` with its default
ports, so the walkthroughs need ports 7071, 5672, 5300 and Azurite's 10000-10002: they take a machine-wide
lock (one walkthrough at a time, across test sessions too; tests/conftest.py's scheduler gives them all to
one xdist worker) and fail at once, naming the port, when something else listens there (a developer's own
``make run``: stop it and run again).

**How.** One bash session per guide, working directory the copy's root, environment the machine's minus
anything Busbar-specific (``BUSBAR_*``, ``ServiceBus*``, ``AzureWebJobs*``, ...); no variable added, so
every value a command needs (``KEY``, ``MASTER``) comes from a command of the guide. ``make run`` runs in the
background as in a second terminal, the walkthrough waits for devhost's ready line, and it is stopped with
Ctrl-C (SIGINT) at the end. Asynchronous steps are waited for by commands of the guide itself (the re-drive
is repeated until the failure is archived), never by a sleep in the test. A command must exit 0 and every
curl response must be below 400, unless a ``# exit N`` / ``# HTTP NNN`` comment next to it in the guide says
otherwise (tests/docs/doc_commands.py); a failure names the guide, the line, the command, its output and the
app's last lines (tests/docs/guide_runner.py).

**Which.** A walkthrough is guides followed one after the other against one app, as a new user would on a
fresh clone: README (``make run``, the host key, a publish, the subscriptions) -> configuration (the
runbook make targets) -> operations (a failing order, the console's views, the re-drive's plan and run until
the failure is archived) -> spark/README.md (replay dry run and real run of that archive) -> topology guide
(validate / plan / apply, the refused second path and the declared migration; last, because the migration
changes how billing receives the sample's order). docs/deployment.md's local trial starts its own
``make run`` from a fresh copy, and so does docs/endpoints.md's new endpoint (a module the app finds when it
starts). Azure commands (``az``, ``databricks``, ``func azure``, curl to a deployed
host) need an account and are not run. ``make test`` is not run: it is this suite (``.ci/run`` runs it in
a fresh clone).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.doc_commands import REPO, DocCommand, classify, doc_commands, guide_files
from tests.docs.guide_runner import (
    GuideFailure,
    Walkthrough,
    default_ports_lock,
    is_make_run,
    taken_default_ports,
    user_environment,
)
from tests.docs.repo_copy import copy_repository

WALKTHROUGHS: dict[str, tuple[str, ...]] = {
    "newcomer": (
        "README.md",
        "docs/configuration.md",
        "docs/operations.md",
        "spark/README.md",
        # Last: its declared migration moves billing's Shipping.OrderAccepted to the event's own topic, which
        # the router bridges to only after its next snapshot (BUSBAR_ROUTER_SNAPSHOT_SECONDS): an order the
        # operations guide published in that window would not reach billing.
        "docs/topology-guide.md",
        # The guarantees: a held key of the ordered crm, released by the re-drive (its own customer).
        "docs/guarantees.md",
    ),
    "deployment-local-trial": ("docs/deployment.md",),
    # A new endpoint module on a fresh clone, published over HTTP and handled: its own make run.
    "add-an-endpoint": ("docs/endpoints.md",),
}


def runnable(commands: list[DocCommand], guide: str) -> list[DocCommand]:
    """A guide's commands that run here: local ones (``make test`` is the suite, Azure's need Azure)."""
    return [c for c in commands if c.file == guide and classify(c.one_line) == "local"]


def test_every_guide_with_local_commands_is_followed_by_one_walkthrough() -> None:
    guides = {c.file for c in doc_commands() if classify(c.one_line) == "local"}
    followed = [guide for walkthrough in WALKTHROUGHS.values() for guide in walkthrough]
    assert sorted(followed) == sorted(set(followed)), "a guide in two walkthroughs"
    assert guides == set(followed), "add the guide to WALKTHROUGHS, where a new user would read it"
    for name, walkthrough in WALKTHROUGHS.items():
        commands = [c for guide in walkthrough for c in runnable(doc_commands(), guide)]
        assert sum(is_make_run(c) for c in commands) == 1, f"{name}: one make run starts its app"


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(WALKTHROUGHS))
def test_the_guides_local_commands_run_verbatim_in_order_against_make_run(name: str, tmp_path: Path) -> None:
    commands = doc_commands()
    with default_ports_lock():
        taken = taken_default_ports()
        if taken:
            pytest.fail(
                f"the guides' `make run` needs the default ports, and something listens on {', '.join(taken)}"
                " (your own `make run`?): stop it and run this test again"
            )
        copy = copy_repository(tmp_path / "busbar")
        walkthrough = Walkthrough(copy, user_environment(), tmp_path / "scratch")
        expected = 0
        try:
            for guide in WALKTHROUGHS[name]:
                steps = runnable(commands, guide)
                expected += len(steps)
                walkthrough.follow(guide, steps)
            walkthrough.stop()
        finally:
            walkthrough.kill()
    assert walkthrough.ran == expected
    assert not (copy / ".data" / "devhost" / "endpoints.json").exists()  # stopped: nothing points at it


# ---------------------------------------------------------------------------------------------- the harness


def guide(tmp_path: Path, text: str) -> list[DocCommand]:
    path = tmp_path / "guide.md"
    path.write_text(text)
    return doc_commands([path], repo=tmp_path)


def follow(tmp_path: Path, text: str, timeout: float = 30.0) -> Walkthrough:
    walkthrough = Walkthrough(tmp_path, user_environment(), tmp_path / "scratch", command_timeout=timeout)
    walkthrough.follow("guide.md", guide(tmp_path, text))
    return walkthrough


def test_a_broken_command_fails_naming_the_guide_line_command_and_output(tmp_path: Path) -> None:
    text = "# A guide\n\n```sh\necho first\nls no-such-file\necho never\n```\n"
    with pytest.raises(GuideFailure) as failure:
        follow(tmp_path, text)
    message = str(failure.value)
    assert message.startswith("guide.md:5: exited 2, the guide expects 0")
    assert "$ ls no-such-file" in message and "No such file or directory" in message


def test_variables_set_by_a_line_are_there_for_the_later_lines_and_stdin_is_not_theirs(
    tmp_path: Path,
) -> None:
    text = '```sh\nVALUE=$(echo kept)\ncat\ntest "$VALUE" = kept\n```\n'
    assert follow(tmp_path, text).ran == 3


def test_the_guides_see_none_of_busbars_settings_from_the_test_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUSBAR_NAMESPACE", "leaked")
    monkeypatch.setenv("ServiceBusConnection", "leaked")
    assert follow(tmp_path, '```sh\ntest -z "$BUSBAR_NAMESPACE$ServiceBusConnection"\n```\n').ran == 1


def test_a_guides_make_prints_only_its_output_even_when_the_suite_runs_under_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make test` exports MAKELEVEL: a guide's `KEY=$(make host-key)` would take make's "Entering
    # directory" lines too, where a user's terminal gives the key alone.
    (tmp_path / "Makefile").write_text("key:\n\t@echo the-key\n")
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("MAKEFLAGS", "w")
    guide = '```sh\nKEY=$(make key)\ntest "$KEY" = the-key\n```\n'
    assert follow(tmp_path, guide).ran == 2


def test_an_expected_exit_status_is_checked_both_ways(tmp_path: Path) -> None:
    assert follow(tmp_path, "```sh\nsh -c 'exit 2'  # exit 2: refused\n```\n").ran == 1
    assert follow(tmp_path, "```sh\n# exit 3: refused\nsh -c 'exit 3'\n```\n").ran == 1
    with pytest.raises(GuideFailure, match=r"guide.md:2: exited 0, the guide expects 2"):
        follow(tmp_path, "```sh\ntrue  # exit 2\n```\n")


def test_a_here_document_is_one_command_with_its_body(tmp_path: Path) -> None:
    text = "```sh\ncat > note.json <<'EOF'\n{\"a\": 1}\nEOF\ncat note.json\n```\n"
    commands = guide(tmp_path, text)
    assert [(c.line, c.text) for c in commands] == [
        (2, "cat > note.json <<'EOF'\n{\"a\": 1}\nEOF"),
        (5, "cat note.json"),
    ]
    follow(tmp_path, text)
    assert (tmp_path / "note.json").read_text() == '{"a": 1}\n'


def test_a_command_bash_cannot_parse_fails_with_bashs_message(tmp_path: Path) -> None:
    with pytest.raises(GuideFailure, match=r"(?s)guide.md:2: exited 2.*syntax error"):
        follow(tmp_path, "```sh\nif then fi (\n```\n")


def test_a_hanging_command_fails_with_the_time_it_was_given(tmp_path: Path) -> None:
    with pytest.raises(GuideFailure, match=r"guide.md:2: did not finish within 1 s"):
        follow(tmp_path, "```sh\nsleep 30\n```\n", timeout=1.0)


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/ok" else 404)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_curl_must_get_a_status_below_400_unless_the_guide_names_another(tmp_path: Path, web: str) -> None:
    assert classify(f"curl {web}/ok") == "local"
    assert (
        follow(tmp_path, f"```sh\ncurl {web}/ok\ncurl -s {web}/missing  # HTTP 404: no such thing\n```\n").ran
        == 2
    )
    with pytest.raises(GuideFailure) as failure:
        follow(tmp_path, f'```sh\nKEY=x\ncurl {web}/missing -H "x-functions-key: $KEY"\n```\n')
    assert str(failure.value).startswith("guide.md:3: curl got HTTP 404, expected a status below 400")
    with pytest.raises(GuideFailure, match=r"curl got HTTP 200, expected HTTP 404"):
        follow(tmp_path, f"```sh\ncurl {web}/ok  # HTTP 404\n```\n")


def test_the_guides_read_are_the_readme_the_docs_and_sparks_readme() -> None:
    names = [p.relative_to(REPO).as_posix() for p in guide_files()]
    assert names[0] == "README.md" and "spark/README.md" in names and "docs/operations.md" in names
