"""``.funcignore`` semantics: gitignore-style patterns, as ``func azure functionapp publish`` applies them.

Supported (the gitignore subset a deployment ignore file needs): blank lines and ``#`` comments, ``\\``
escapes, trailing-space trimming, ``!`` negation (last match wins), a trailing ``/`` for directories only,
anchoring by a leading or inner ``/``, ``*``, ``?``, ``[...]`` and ``**`` (leading ``**/``, trailing
``/**`` and inner ``/**/``). As in git, nothing inside an ignored directory can be re-included.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """One pattern line: its regex over the ``/``-separated relative path, and its flags."""

    pattern: str
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool


def _translate(glob: str) -> str:
    """Regex source for a gitignore glob (without anchoring slashes) over a relative path."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        at_segment_start = i == 0 or glob[i - 1] == "/"
        if glob.startswith("**/", i) and at_segment_start:
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i) and at_segment_start and i + 2 == n:
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            while i < n and glob[i] == "*":  # other runs of asterisks are one ordinary asterisk
                i += 1
            out.append("[^/]*")
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[":
            j = i + 1
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":  # a leading "]" is part of the set
                j += 1
            close = glob.find("]", j)
            if close < 0:
                out.append(re.escape("["))
                i += 1
                continue
            body = glob[i + 1 : close]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close + 1
        elif glob[i] == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def parse_rule(line: str) -> IgnoreRule | None:
    """The rule for one line of an ignore file, or None for blank lines and comments."""
    text = line.rstrip("\n")
    # Trailing spaces are trimmed unless escaped with a backslash.
    stripped = text.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(text):
        stripped += " "
    text = stripped
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    if negated or text.startswith(("\\!", "\\#")):  # "\\!" and "\\#" escape a literal first character
        text = text[1:]
    directory_only = text.endswith("/")
    text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    text = text.lstrip("/")
    prefix = "^" if anchored else "^(?:.*/)?"
    return IgnoreRule(line.strip(), re.compile(prefix + _translate(text) + "$"), negated, directory_only)


def parse_rules(lines: Iterable[str]) -> list[IgnoreRule]:
    """Every rule of an ignore file, in order."""
    return [rule for rule in (parse_rule(line) for line in lines) if rule is not None]


def _matches_itself(rules: list[IgnoreRule], rel_path: str, is_dir: bool) -> bool:
    ignored = False
    for rule in rules:
        if rule.directory_only and not is_dir:
            continue
        if rule.regex.match(rel_path):
            ignored = not rule.negated
    return ignored


def is_ignored(rules: list[IgnoreRule], rel_path: str, is_dir: bool = False) -> bool:
    """True when ``rel_path`` (``/``-separated, relative to the project root) is left out."""
    parts = rel_path.strip("/").split("/")
    for depth in range(1, len(parts)):
        if _matches_itself(rules, "/".join(parts[:depth]), is_dir=True):
            return True
    return _matches_itself(rules, "/".join(parts), is_dir)


def package_files(root: Path, rules: list[IgnoreRule]) -> list[str]:
    """Relative paths of the files the deployment package holds, sorted."""
    kept: list[str] = []

    def walk(directory: Path) -> None:
        for entry in sorted(directory.iterdir()):
            rel = entry.relative_to(root).as_posix()
            if entry.is_dir() and not entry.is_symlink():
                if not is_ignored(rules, rel, is_dir=True):
                    walk(entry)
            elif not is_ignored(rules, rel):
                kept.append(rel)

    walk(root)
    return kept


def build_package(root: Path, target: Path) -> list[str]:
    """Copy what ``root/.funcignore`` keeps into ``target``; the copied relative paths."""
    rules = parse_rules((root / ".funcignore").read_text(encoding="utf-8").splitlines())
    files = package_files(root, rules)
    for rel in files:
        destination = target / rel
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, destination)
    return files


class CoreToolsIgnore:
    """The matcher Azure Functions Core Tools itself applies to ``.funcignore`` when it packs an app
    (``GitIgnoreParser``, a port of codemix/gitignore-parser), reproduced to check that our file means the
    same to it as to git. Its quirks: every pattern is matched as a *prefix* of the relative path (so
    ``*.pyc`` and ``__pycache__/`` only match at the root, and ``.git`` also matches ``.gitignore``), and a
    leading ``/`` is dropped; ``**`` is any text, ``*`` any text without ``/``. Files only: Core Tools tests
    each file's relative path, never a directory.
    """

    _SPECIAL = re.compile(r"[\-\[\]/{}()+?.\\^$|]")

    def __init__(self, text: str) -> None:
        positive: list[str] = []
        negative: list[str] = []
        for raw in text.split("\n"):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            if line.startswith("/"):
                line = line[1:]
            (negative if negated else positive).append(line)
        self._positive = self._compile(sorted(positive))
        self._negative = self._compile(sorted(negative))

    @classmethod
    def _prepare(cls, pattern: str) -> str:
        escaped = cls._SPECIAL.sub(lambda m: "\\" + m.group(0), pattern)
        return escaped.replace("**", "(.+)").replace("*", "([^\\/]+)")

    @classmethod
    def _compile(cls, patterns: list[str]) -> re.Pattern[str]:
        if not patterns:
            return re.compile("$^")
        return re.compile("^((" + ")|(".join(cls._prepare(p) for p in patterns) + "))")

    def accepts(self, rel_path: str) -> bool:
        """True when Core Tools packs the file at ``rel_path`` (``/``-separated, relative)."""
        return bool(self._negative.match(rel_path)) or not self._positive.match(rel_path)

    def denies_everything_under(self, rel_dir: str) -> bool:
        """True when no file below ``rel_dir`` can be packed: a positive pattern matches a prefix of
        ``rel_dir/`` (so of every path below it) and there are no negations. Lets a walk skip .venv."""
        return self._negative.pattern == "$^" and bool(self._positive.match(rel_dir + "/"))


def core_tools_package_files(root: Path) -> list[str]:
    """Relative paths of the files Core Tools packs from ``root`` (it always skips .git and .vscode)."""
    matcher = CoreToolsIgnore((root / ".funcignore").read_text(encoding="utf-8"))
    kept: list[str] = []
    for directory, subdirs, files in os.walk(root):
        rel_dir = Path(directory).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        subdirs[:] = sorted(
            d
            for d in subdirs
            if not (prefix == "" and d in (".git", ".vscode"))
            and not matcher.denies_everything_under(prefix + d)
        )
        kept.extend(prefix + f for f in files if matcher.accepts(prefix + f))
    return sorted(kept)
