"""The .funcignore matcher follows gitignore semantics (the deployment-package test relies on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.funcignore_rules import (
    CoreToolsIgnore,
    build_package,
    core_tools_package_files,
    is_ignored,
    package_files,
    parse_rule,
    parse_rules,
)


def ignored(patterns: str, path: str, is_dir: bool = False) -> bool:
    return is_ignored(parse_rules(patterns.splitlines()), path, is_dir)


def test_blank_lines_and_comments_are_not_rules() -> None:
    assert parse_rule("") is None
    assert parse_rule("   ") is None
    assert parse_rule("# tests/") is None
    assert parse_rules(["# c", "", "tests/"])[0].pattern == "tests/"


def test_an_escaped_hash_is_a_file_name() -> None:
    assert ignored("\\#notes", "#notes")


@pytest.mark.parametrize(
    ("path", "is_dir", "expected"),
    [
        ("tests", True, True),
        ("tests/infra/test_x.py", False, True),
        ("shared/tests", True, True),  # no slash inside the pattern: matches at any depth
        ("tests", False, False),  # a trailing slash matches directories only
        ("testsuite", True, False),
    ],
)
def test_a_directory_pattern_leaves_out_the_directory_and_everything_inside(
    path: str, is_dir: bool, expected: bool
) -> None:
    assert ignored("tests/", path, is_dir) is expected


def test_a_leading_slash_anchors_the_pattern_at_the_root() -> None:
    assert ignored("/build", "build", is_dir=True)
    assert not ignored("/build", "shared/build", is_dir=True)


def test_an_inner_slash_anchors_the_pattern_at_the_root() -> None:
    assert ignored("docs/*.md", "docs/deployment.md")
    assert not ignored("docs/*.md", "shared/docs/deployment.md")


def test_a_star_does_not_cross_directories() -> None:
    assert ignored("*.pyc", "shared/__pycache__/x.cpython-313.pyc")
    assert not ignored("shared/*.py", "shared/archive/schema.py")
    assert ignored("shared/*.py", "shared/contracts.py")


def test_question_mark_and_character_classes_match_one_character() -> None:
    assert ignored("file?.txt", "file1.txt")
    assert not ignored("file?.txt", "file12.txt")
    assert ignored("log[0-9].txt", "log7.txt")
    assert not ignored("log[!0-9].txt", "log7.txt")
    assert ignored("log[!0-9].txt", "logx.txt")


def test_double_star_matches_any_number_of_directories() -> None:
    assert ignored("**/fixtures", "a/b/fixtures", is_dir=True)
    assert ignored("**/fixtures", "fixtures", is_dir=True)
    assert ignored("data/**", "data/a/b.bin")
    assert not ignored("data/**", "data", is_dir=True)
    assert ignored("a/**/z.txt", "a/z.txt")
    assert ignored("a/**/z.txt", "a/b/c/z.txt")


def test_negation_re_includes_and_the_last_matching_rule_wins() -> None:
    patterns = "*.json\n!host.json"
    assert ignored(patterns, "local.settings.json")
    assert not ignored(patterns, "host.json")
    assert ignored("!host.json\n*.json", "host.json")


def test_a_file_inside_an_ignored_directory_cannot_be_re_included() -> None:
    assert ignored("bench/\n!bench/keep.py", "bench/keep.py")


def test_trailing_spaces_are_trimmed_unless_escaped() -> None:
    assert ignored("Makefile   ", "Makefile")
    assert ignored("name\\ ", "name ")
    assert not ignored("name\\ ", "name")


def test_the_package_keeps_only_what_the_rules_let_through(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for rel in ("function_app.py", "shared/a.py", "tests/test_a.py", "shared/__pycache__/a.pyc", "notes.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x", encoding="utf-8")
    (root / ".funcignore").write_text("tests/\n__pycache__/\n*.md\n.funcignore\n", encoding="utf-8")
    rules = parse_rules((root / ".funcignore").read_text(encoding="utf-8").splitlines())
    assert package_files(root, rules) == ["function_app.py", "shared/a.py"]
    target = tmp_path / "package"
    assert build_package(root, target) == ["function_app.py", "shared/a.py"]
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "function_app.py",
        "shared/a.py",
    ]


def test_core_tools_matches_each_pattern_as_a_prefix_of_the_path_from_the_root() -> None:
    matcher = CoreToolsIgnore("tests/\n*.pyc\n__pycache__/\n.git\n/docs/\n")
    assert not matcher.accepts("tests/infra/test_x.py")
    assert matcher.accepts("shared/tests/test_x.py")  # git would leave this out; Core Tools does not
    assert not matcher.accepts("x.pyc")
    assert matcher.accepts("shared/__pycache__/x.pyc")  # root only, unlike git
    assert not matcher.accepts(".gitignore")  # a prefix match, unlike git
    assert not matcher.accepts("docs/deployment.md")  # the leading slash is dropped
    assert matcher.accepts("function_app.py")


def test_core_tools_double_star_reaches_nested_directories() -> None:
    matcher = CoreToolsIgnore("**/__pycache__/\n**/*.pyc\n")
    assert not matcher.accepts("shared/__pycache__/x.cpython-313.pyc")
    assert not matcher.accepts("shared/topology/__pycache__/y.pyc")
    assert not matcher.accepts("shared/topology/z.pyc")
    assert matcher.accepts("shared/topology/z.py")


def test_core_tools_negations_re_include_files() -> None:
    matcher = CoreToolsIgnore("*.json\n!host.json\n")
    assert matcher.accepts("host.json")
    assert not matcher.accepts("local.settings.json")


def test_the_core_tools_walk_skips_dot_git_and_directories_it_denies_whole(tmp_path: Path) -> None:
    for rel in ("function_app.py", ".git/config", ".venv/lib/x.py", "shared/a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x", encoding="utf-8")
    (tmp_path / ".funcignore").write_text(".venv/\n.funcignore\n", encoding="utf-8")
    assert core_tools_package_files(tmp_path) == ["function_app.py", "shared/a.py"]
