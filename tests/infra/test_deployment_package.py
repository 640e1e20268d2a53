"""The package `func azure functionapp publish` uploads (the repository minus .funcignore) imports and
indexes the app with nothing but requirements.txt installed, as the Functions host runs it.

The requirements-only site directory (.venv/deploy-site) is prepared by `make test` (the tests may not
use the network): ``.venv/bin/python -m pip install --target .venv/deploy-site -r requirements.txt``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.funcignore_rules import (
    CoreToolsIgnore,
    build_package,
    core_tools_package_files,
    is_ignored,
    parse_rules,
)
from tests.infra.infra_paths import REPO, sample_values

DEPLOY_SITE = REPO / ".venv" / "deploy-site"
NOT_DEPLOYED = ("tests", "emulator", "devhost", "bench", ".data", "spark", ".venv", "tools", "infra", "docs")

# Runs in `python -I -S -B`: no user site, no PYTHON* variables, no virtualenv site-packages. sys.path is
# the package, then the standard library, then the requirements-only site directory; every imported module
# must come from one of those. Prints the indexed function names as JSON.
INDEX_SCRIPT = r"""
import json, os, site, sys, sysconfig
package, deps = sys.argv[1], sys.argv[2]
sys.path.insert(0, package)
site.addsitedir(deps)
import function_app
names = sorted(f.get_function_name() for f in function_app.app.get_functions())
stdlib = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]
allowed = tuple(os.path.realpath(p) + os.sep for p in [package, deps, *stdlib])
foreign = sorted(
    f"{name}: {module.__file__}"
    for name, module in list(sys.modules.items())
    if getattr(module, "__file__", None) and not os.path.realpath(module.__file__).startswith(allowed)
)
print(json.dumps({"functions": names, "foreign": foreign}))
"""


def _run_index(
    python_args: list[str], package: Path, deps: Path, env: dict[str, str]
) -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, *python_args, "-c", INDEX_SCRIPT, str(package), str(deps)],
        capture_output=True,
        text=True,
        env=env,
        cwd=package,
        timeout=100,
    )
    assert result.returncode == 0, f"function_app.py does not import:\n{result.stderr[-4000:]}"
    output: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return output


def host_environment() -> dict[str, str]:
    """App settings as the Functions host hands them to the worker: environment variables, nothing else."""
    env = dict(sample_values())
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    return env


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    target = tmp_path_factory.mktemp("deployment-package")
    return target, build_package(REPO, target)


def test_the_funcignore_rules_leave_out_development_code_data_and_local_settings() -> None:
    rules = parse_rules((REPO / ".funcignore").read_text(encoding="utf-8").splitlines())
    for directory in NOT_DEPLOYED:
        assert is_ignored(rules, directory, is_dir=True), directory
    for file in ("local.settings.json", "local.settings.sample.json", "requirements-dev.txt", "Makefile"):
        assert is_ignored(rules, file), file
    for kept in ("function_app.py", "host.json", "requirements.txt"):
        assert not is_ignored(rules, kept), kept
    for kept_dir in ("app", "functions", "shared"):
        assert not is_ignored(rules, kept_dir, is_dir=True), kept_dir


# Paths that exist on a developer's machine (not necessarily in this checkout) and must never be packed.
NEVER_PACKED = (
    "shared/__pycache__/app_settings.cpython-313.pyc",
    "shared/topology/__pycache__/options.cpython-313.pyc",
    "functions/__pycache__/redrive.cpython-313.pyc",
    "function_app.pyc",
    "local.settings.json",
    ".venv/lib/python3.13/site-packages/azure/functions/__init__.py",
    ".data/emulator/namespace.db",
    "tests/infra/test_deployment_package.py",
    "spark/replay.py",
    "tools/azurite/node_modules/azurite/package.json",
)
ALWAYS_PACKED = (
    "function_app.py",
    "host.json",
    "requirements.txt",
    "shared/app_settings.py",
    "app/runtime.py",
    "functions/redrive.py",
)


def test_the_funcignore_means_the_same_to_git_and_to_core_tools() -> None:
    text = (REPO / ".funcignore").read_text(encoding="utf-8")
    rules, core_tools = parse_rules(text.splitlines()), CoreToolsIgnore(text)
    for path in NEVER_PACKED:
        assert is_ignored(rules, path) and not core_tools.accepts(path), path
    for path in ALWAYS_PACKED:
        assert not is_ignored(rules, path) and core_tools.accepts(path), path


def test_core_tools_would_pack_exactly_the_package_built_here(package: tuple[Path, list[str]]) -> None:
    _, files = package
    assert core_tools_package_files(REPO) == files


def test_the_package_holds_only_what_runs_in_azure(package: tuple[Path, list[str]]) -> None:
    _, files = package
    assert {"function_app.py", "host.json", "requirements.txt"} <= set(files)
    assert any(f.startswith("shared/") for f in files)
    assert any(f.startswith("app/") for f in files)
    top_level = {f.split("/", 1)[0] for f in files}
    assert top_level.isdisjoint(NOT_DEPLOYED), sorted(top_level)
    assert "local.settings.json" not in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    assert top_level <= {"function_app.py", "host.json", "requirements.txt", "app", "functions", "shared"}, (
        sorted(top_level)
    )


def test_the_app_imports_from_the_package_with_only_requirements_installed(
    package: tuple[Path, list[str]],
) -> None:
    if not (DEPLOY_SITE / "azure" / "functions").is_dir():
        pytest.fail(
            f"{DEPLOY_SITE} is missing: run `make test` (or `.venv/bin/python -m pip install --target "
            ".venv/deploy-site -r requirements.txt`) to prepare the requirements-only site directory"
        )
    target, _ = package
    deployed = _run_index(["-I", "-S", "-B"], target, DEPLOY_SITE, host_environment())
    assert deployed["foreign"] == [], "modules imported from outside the package and requirements.txt"

    # The same app indexed from the repository in the development environment: the package must expose
    # every function the repository defines (a module left out of the package, or a dependency missing
    # from requirements.txt, shows up above as an import error or here as a missing function).
    repo_env = {**host_environment(), "PYTHONPATH": str(REPO)}
    in_repo = _run_index(["-B"], REPO, REPO / ".venv", repo_env)
    assert deployed["functions"] == in_repo["functions"]

    # docs/deployment.md and docs/operations.md walk through these functions by name.
    documented = {"put_subscriptions", "get_subscriptions", "get_topology", "publish_event"}
    documented |= {"fallback_router", "redrive_dead_letters"}
    assert sorted(documented - set(deployed["functions"])) == [], "documented functions missing from the app"
