"""The shell commands the guides show, read from their fenced ``sh``/``bash``/``shell``/``console`` blocks
(``console`` blocks: the lines starting with ``$ ``), each with its file, line and expected outcome, and
classified as local (run by tests/docs/test_guides.py), Azure (needs an account: not run) or the test suite
itself (``make test``: not run inside the suite, ``.ci/run`` runs it).

A command is one logical line: ``\\``-continued lines belong to it, and so does the body of a here-document
(``cat > file <<'EOF'`` ... ``EOF``). Comment lines and blank lines are not commands.

**Expected outcome.** A command must exit 0 and, when it runs curl, every response must have an HTTP status
below 400, unless the guide says otherwise next to it, in a comment on the command's last line or on the
line directly above it: ``# exit 2 ...`` (the exit status expected) or ``# HTTP 401 ...`` (the status of its
response). The comment is there for the reader too: it says what they will see.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE_OPEN = re.compile(r"^```([\w-]*)")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
EXPECTATION = re.compile(r"#\s*(exit|HTTP)\s+(\d+)\b")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
AZURE_TOOLS = re.compile(r"(^|[\s;&|(`])(az|databricks|func\s+azure)\s")
# Local commands besides `make`, curl to 127.0.0.1 and the checkout's python: what the guides use.
LOCAL_PROGRAMS = frozenset({"make", "cp", "cat", "ls", "until"})


def guide_files(repo: Path = REPO) -> list[Path]:
    """Every guide whose commands must run: README.md, docs/*.md and spark/README.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md")), repo / "spark" / "README.md"]


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One command of a guide: ``text`` as written (continuations and here-documents included)."""

    file: str
    line: int  # 1-based line of the file where the command starts
    text: str
    expected_exit: int = 0
    expected_http: int | None = None  # None: every response below 400

    @property
    def one_line(self) -> str:
        """The command with its continuations joined, for messages and classification."""
        return re.sub(r"\s*\\\n\s*", " ", self.text)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _expectation(comment_source: str) -> tuple[int, int | None] | None:
    match = EXPECTATION.search(comment_source)
    if match is None:
        return None
    kind, number = match.group(1), int(match.group(2))
    return (number, None) if kind == "exit" else (0, number)


def _trailing_comment(line: str) -> str:
    """The ``# ...`` at the end of a command line (a ``#`` after whitespace, outside quotes)."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and index > 0 and line[index - 1].isspace():
            return line[index:]
    return ""


def commands_of(block: str, file: str = "", first_line: int = 1, console: bool = False) -> list[DocCommand]:
    """The commands of one fenced block whose first body line is line ``first_line`` of ``file``."""
    lines = block.split("\n")
    found: list[DocCommand] = []
    pending: tuple[int, int | None] | None = None  # from a comment line directly above
    index = 0
    while index < len(lines):
        line = lines[index]
        start = index
        index += 1
        if console:
            if not line.startswith("$ "):
                pending = None
                continue
            line = line[2:]
        stripped = line.strip()
        if not stripped:
            pending = None
            continue
        if stripped.startswith("#"):
            pending = _expectation(stripped)
            continue
        parts = [line.rstrip()]
        while parts[-1].endswith("\\") and index < len(lines):
            parts.append(lines[index].rstrip())
            index += 1
        heredoc = HEREDOC.search(" ".join(parts))
        if heredoc:
            word = heredoc.group(2)
            while index < len(lines):
                parts.append(lines[index])
                index += 1
                if lines[index - 1].strip() == word:
                    break
        text = "\n".join(parts).strip()
        expectation = _expectation(_trailing_comment(parts[0 if heredoc else -1])) or pending
        exit_status, http = expectation or (0, None)
        found.append(DocCommand(file, first_line + start, text, exit_status, http))
        pending = None
    return found


def doc_commands(files: list[Path] | None = None, repo: Path = REPO) -> list[DocCommand]:
    """Every command of the guides, in the order of each file."""
    found: list[DocCommand] = []
    for path in files if files is not None else guide_files(repo):
        name = path.relative_to(repo).as_posix()
        lines = path.read_text(encoding="utf-8").split("\n")
        index = 0
        while index < len(lines):
            opening = FENCE_OPEN.match(lines[index])
            index += 1
            if opening is None:
                continue
            body_start = index
            while index < len(lines) and not lines[index].startswith("```"):
                index += 1
            language = opening.group(1).lower()
            if language in SHELL_LANGUAGES:
                body = "\n".join(lines[body_start:index])
                found.extend(commands_of(body, name, body_start + 1, console=language == "console"))
            index += 1  # the closing fence
    return found


def classify(command: str) -> str:
    """``azure`` (needs an Azure account or Azure tooling), ``suite`` (``make test``, the whole test suite),
    ``local``, or ``unknown``."""
    if AZURE_TOOLS.search(f" {command}"):
        return "azure"
    assignment = re.match(r"^[A-Za-z_][A-Za-z0-9_]*=(.*)$", command, re.S)
    if assignment:
        inner = re.fullmatch(r"\$\((.*)\)", assignment.group(1).strip(), re.S)
        return classify(inner.group(1)) if inner else "unknown"
    try:
        words = shlex.split(command.split("\n")[0], posix=True)
    except ValueError:
        return "unknown"
    if not words:
        return "unknown"
    first = words[0]
    if words[:2] == ["make", "test"]:
        return "suite"
    if first == "curl":
        urls = [w for w in words if re.match(r"https?://", w)]
        hosts = {re.sub(r"^https?://([^/:]+).*$", r"\1", u) for u in urls}
        if hosts and hosts <= LOCAL_HOSTS:
            return "local"
        return "azure" if hosts else "unknown"
    if first in LOCAL_PROGRAMS or first.endswith(("/python", "/python3")):
        return "local"
    return "unknown"


def make_targets(repo: Path = REPO) -> set[str]:
    """The Makefile's targets."""
    text = (repo / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:", text, re.M))
