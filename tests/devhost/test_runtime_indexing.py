"""Azure's own worker code (``azure_functions_runtime``, the version requirements.txt pins) indexes each app
as devhost's worker does: the same functions, triggers, trigger parameters and trigger bindings.

Both sides run in subprocesses (the runtime keeps the app in module globals and changes ``sys.path``, the
working directory and logging). Until devhost's worker drives the runtime itself (issue 26), this is the
oracle that catches a divergence in devhost's own indexing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.devhost.conftest import APPS

REPO = Path(__file__).resolve().parents[2]
# devhost's indexing of one app, in its own process: name, trigger type, trigger parameter, trigger binding,
# and whether the trigger parameter is an SDK type.
_DEVHOST_INDEX = """
import json, sys
from pathlib import Path
from devhost.worker.indexing import index_functions
settings = json.loads(sys.argv[2])
out = []
for function in index_functions(Path(sys.argv[1]), settings):
    m = function.metadata
    sdk = m.service_bus is not None and m.service_bus.payload == "sdk"
    row = {"name": m.name, "type": m.trigger_type, "arg": m.trigger_arg, "trigger": m.trigger}
    out.append({**row, "sdk": sdk})
json.dump(out, sys.stdout)
"""
_EXPRESSION = re.compile(r"%([A-Za-z0-9_]+)%")
# Apps devhost's tests run that index without side effects (flaky_start_app and hanging_app die or hang at
# import on purpose).
_TEST_APPS = sorted(
    path.name
    for path in APPS.glob("*_app.py")
    if path.name not in {"flaky_start_app.py", "hanging_app.py", "app_records.py"}
)


def _environment(settings: dict[str, str], script: str | None = None) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(settings, PYTHONPATH=str(REPO))
    if script is not None:
        env["PYTHON_SCRIPT_FILE_NAME"] = (
            script  # the runtime's setting for a script not named function_app.py
        )
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> Any:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _settings_for(app: Path) -> dict[str, str]:
    """A value for every ``%setting%`` the app's bindings name (Busbar's app: its sample settings)."""
    if app.name == "function_app.py":
        values: dict[str, str] = json.loads((REPO / "local.settings.sample.json").read_text())["Values"]
        return values
    return {name: f"value-of-{name.lower()}" for name in set(_EXPRESSION.findall(app.read_text()))} | {
        "DEVHOST_TEST_RECORDS": os.devnull
    }


def _resolved(binding: dict[str, Any], settings: dict[str, str]) -> dict[str, Any]:
    """What the host does to a raw binding before using it: ``%setting%`` expressions resolved."""
    return {
        key: _EXPRESSION.sub(lambda m: settings[m.group(1)], value) if isinstance(value, str) else value
        for key, value in binding.items()
    }


# Enum-valued binding fields: the runtime writes the enum's name (``FUNCTION``, ``MANY``), the library its
# value; the host parses them without regard to case.
_ENUM_FIELDS = ("authLevel", "cardinality", "dataType", "accessRights")


def _comparable(binding: dict[str, Any]) -> dict[str, Any]:
    """A trigger binding without what differs only in form: the direction (the runtime's raw binding says
    ``IN``, devhost keeps the library's enum, 0), the extension's ``properties``, enum fields' case."""
    comparable = {k: v for k, v in binding.items() if k not in {"direction", "properties"}}
    for name in _ENUM_FIELDS:
        if isinstance(comparable.get(name), str):
            comparable[name] = comparable[name].lower()
    return comparable


@pytest.mark.subprocess
@pytest.mark.parametrize("app_file", ["function_app.py", *_TEST_APPS])
def test_the_runtime_indexes_each_function_as_devhost_does(app_file: str) -> None:
    app = REPO / app_file if app_file == "function_app.py" else APPS / app_file
    settings = _settings_for(app)
    runtime = _run(
        [sys.executable, "-m", "devhost.rpc.index_app", str(app.parent)],
        _environment(settings, app.name),
        cwd=app.parent,
    )
    devhost = _run(
        [sys.executable, "-c", _DEVHOST_INDEX, str(app), json.dumps(settings)],
        _environment(settings),
        cwd=app.parent,
    )

    assert runtime["runtimeVersion"] == _pinned_runtime_version()
    by_name = {function["name"]: function for function in runtime["functions"]}
    assert sorted(by_name) == sorted(f["name"] for f in devhost)
    for ours in devhost:
        bindings = by_name[ours["name"]]["bindings"]
        [trigger] = [b for b in bindings if b["type"].endswith("Trigger")]
        assert (trigger["type"], trigger["name"]) == (ours["type"], ours["arg"]), ours["name"]
        assert trigger["direction"] == "IN"
        # The runtime marks an SDK-type trigger for deferred binding (the host then sends model_binding_data).
        deferred = trigger.get("properties", {}).get("SupportsDeferredBinding", False)
        assert deferred == ours["sdk"], ours["name"]
        assert _comparable(_resolved(trigger, settings)) == _comparable(ours["trigger"]), ours["name"]
        # devhost answers an HTTP function with its return value: the runtime's only other binding for one.
        others = [(b["type"], b["direction"], b["name"]) for b in bindings if b is not trigger]
        if ours["type"] == "httpTrigger":
            assert others == [("http", "OUT", "$return")], ours["name"]


def _pinned_runtime_version() -> str:
    [pin] = [
        line.split("==")[1].strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.startswith("azure-functions-runtime==")
    ]
    return pin


@pytest.mark.subprocess
def test_an_app_the_runtime_cannot_index_is_refused_with_its_exception(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(
        "import azure.functions as func\n"
        "app = func.FunctionApp()\n"
        "@app.route(route='a')\n"
        "@app.route(route='b')\n"
        "def twice(req: func.HttpRequest) -> func.HttpResponse:\n"
        "    return func.HttpResponse('x')\n"
    )

    done = subprocess.run(
        [sys.executable, "-m", "devhost.rpc.index_app", str(tmp_path)],
        env=_environment({}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )

    assert done.returncode == 1
    assert done.stderr.startswith("the runtime could not index the app: "), done.stderr
    assert "ValueError: A trigger was already registered to this function" in done.stderr, done.stderr
