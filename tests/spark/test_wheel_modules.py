"""Every module the replay wheel ships imports with the job's own dependencies (spark/requirements.txt).

`make test` also runs this file on Python 3.12, Databricks Runtime 17.3 LTS's, in a virtualenv holding only
those dependencies (tools/replay312): a module that needs 3.13, or a package the job does not install (the
Functions app's), fails there by name.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _wheel_packages() -> list[str]:
    """The top-level packages pyproject.toml's setuptools section puts in the wheel (spark, shared)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include: list[str] = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return [name for name in include if "*" not in name]


def _wheel_modules() -> list[str]:
    modules: list[str] = []
    for package in _wheel_packages():
        modules.append(package)
        found = pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}.")
        modules.extend(info.name for info in found)
    return sorted(modules)


def test_the_wheel_carries_the_replay_job_and_the_shared_code_it_uses() -> None:
    modules = _wheel_modules()
    assert _wheel_packages() == ["spark", "shared"]
    assert {"spark.replay", "spark.sender", "shared.archive.schema", "shared.envelope.sdk"} <= set(modules)


def _is_entry_point(module: str) -> bool:
    return module.rsplit(".", 1)[-1] == "__main__"


@pytest.mark.parametrize("module", [m for m in _wheel_modules() if not _is_entry_point(m)])
def test_each_module_of_the_wheel_imports(module: str) -> None:
    assert importlib.import_module(module).__name__ == module


@pytest.mark.parametrize("module", [m for m in _wheel_modules() if _is_entry_point(m)])
def test_each_entry_point_of_the_wheel_compiles_and_its_package_imports(module: str) -> None:
    """``python -m package`` modules run their job when imported: compiled here, their package imported."""
    package = module.rsplit(".", 1)[0]
    path = ROOT / package.replace(".", "/") / "__main__.py"
    compile(path.read_text(), str(path), "exec")
    assert importlib.import_module(package).__name__ == package


def _requirement_names(lines: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ \[;]", line.strip(), maxsplit=1)[0].lower() for line in lines}


def test_the_databricks_job_installs_every_dependency_the_runtime_does_not_bring() -> None:
    """spark/requirements.txt (what the 3.12 check installs) and the job's task libraries name the same
    packages, except those Databricks Runtime 17.3 LTS carries itself."""
    listed = (ROOT / "spark" / "requirements.txt").read_text().splitlines()
    needed = _requirement_names([line for line in listed if line.strip() and not line.startswith("#")])
    bundle = (ROOT / "infra" / "databricks" / "databricks.yml").read_text()
    installed = _requirement_names(re.findall(r'- pypi: \{ package: "([^"]+)" \}', bundle))
    assert needed - installed == {"pyspark", "pyarrow", "pandas"}
    assert installed <= needed
