"""A fresh copy of the repository for running the guides verbatim: what a clone would hold, taken from the
working tree (tracked files, with their local changes), with the checkout's installed tools linked in.

The guides run ``make run`` on the default ports and write ``local.settings.json`` and ``.data/`` where
they run; the checkout's own are a developer's and must not be touched, so the guides run here instead.
File times are kept (``shutil.copy2``), and a requirements file newer than the checkout's
``.venv/.installed`` (a fresh worktree's files are newer than the shared virtualenv) is dated just before it:
the tests run in that virtualenv, so it is installed from these files, and ``make`` must not reinstall it
(nor write to the checkout's virtualenv); so are Azurite's ``package.json`` and ``package-lock.json``, before
``tools/azurite/node_modules/.installed`` (``make run`` depends on it). ``.venv``,
``tools/azurite/node_modules`` and ``tools/checkov/.venv`` are symbolic links to the checkout's (installing
them is ``make``'s job, already done by the checkout's ``make``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINKED = (".venv", "tools/azurite/node_modules", "tools/checkov/.venv")
# The Makefile's install stamps and their prerequisites, both linked in from the checkout.
STAMPS = {
    ".venv/.installed": ("requirements.txt", "requirements-dev.txt"),
    "tools/azurite/node_modules/.installed": (
        "tools/azurite/package.json",
        "tools/azurite/package-lock.json",
    ),
}


def tracked_files(repo: Path = REPO) -> list[str]:
    """The working tree's tracked files (a clone's content, local edits included), deleted ones left out."""
    result = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=repo, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"the guides run in a copy of a git checkout; git ls-files failed in {repo}:\n"
            + result.stderr.decode(errors="replace")
        )
    names = [n for n in result.stdout.decode("utf-8").split("\0") if n]
    return [n for n in names if (repo / n).is_file() or (repo / n).is_symlink()]


def copy_repository(destination: Path, repo: Path = REPO) -> Path:
    """``destination`` laid out as a fresh clone of ``repo`` with its installed tools; returns it."""
    if not (repo / ".venv" / "bin" / "python").exists():
        raise RuntimeError(f"{repo}/.venv is missing: run `make install` in the checkout first")
    destination.mkdir(parents=True)
    for name in tracked_files(repo):
        source, target = repo / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    for name in LINKED:
        if (repo / name).exists():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            (destination / name).symlink_to((repo / name).resolve())
    _date_before_stamp(destination)
    return destination


def _date_before_stamp(destination: Path) -> None:
    for stamp_name, prerequisites in STAMPS.items():
        stamp = destination / stamp_name
        if not stamp.exists():
            continue
        installed = stamp.stat().st_mtime_ns
        for name in prerequisites:
            path = destination / name
            if path.stat().st_mtime_ns >= installed:
                before = installed - 1_000_000_000
                os.utime(path, ns=(before, before))
