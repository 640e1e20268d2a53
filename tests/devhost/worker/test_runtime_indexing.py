"""The host's index of each app is what Azure's own worker code indexed: devhost's host side reads its
functions, triggers and trigger bindings from the ``RpcFunctionMetadata`` that ``azure_functions_runtime``
(the version requirements.txt pins) answers in the worker process.

The reference is the runtime run on its own in a subprocess (``python -m devhost.worker.index_app``: it keeps
the app in module globals and changes ``sys.path``, the working directory and logging).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devhost.channel.process_worker import ProcessWorker, WorkerOptions
from devhost.channel.protocol import FunctionMetadata
from devhost.servicebus.settlement import worker_arguments
from tests.devhost.conftest import APPS

REPO = Path(__file__).resolve().parents[3]
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


def _host_index(app: Path, settings: dict[str, str]) -> list[FunctionMetadata]:
    """The functions a host reads from its worker process."""
    options = WorkerOptions(app, settings)

    async def index() -> list[FunctionMetadata]:
        channel = await ProcessWorker.start(options, worker_arguments(1))
        try:
            functions: list[FunctionMetadata] = channel.functions()
            return functions
        finally:
            await channel.close()

    return asyncio.run(index())


@pytest.mark.subprocess
@pytest.mark.parametrize("app_file", ["function_app.py", *_TEST_APPS])
def test_the_host_reads_each_function_from_what_the_runtime_indexed(app_file: str) -> None:
    app = REPO / app_file if app_file == "function_app.py" else APPS / app_file
    settings = _settings_for(app)
    runtime = _run(
        [sys.executable, "-m", "devhost.worker.index_app", str(app.parent)],
        _environment(settings, app.name),
        cwd=app.parent,
    )

    host = _host_index(app, settings)

    assert runtime["runtimeVersion"] == _pinned_runtime_version()
    assert [(f.name, f.function_id) for f in host] == [
        (f["name"], f["functionId"]) for f in runtime["functions"]
    ]
    for ours, theirs in zip(host, runtime["functions"], strict=True):
        bindings = theirs["bindings"]
        [trigger] = [b for b in bindings if b["type"].endswith("Trigger")]
        assert (ours.trigger_type, ours.trigger_arg) == (trigger["type"], trigger["name"]), ours.name
        assert ours.trigger == _resolved(trigger, settings), ours.name
        others = [(b["type"], b["direction"], b["name"]) for b in bindings if b is not trigger]
        # devhost answers an HTTP function with its return value: the runtime's only other binding for one.
        assert others == ([("http", "OUT", "$return")] if ours.trigger_type == "httpTrigger" else []), (
            ours.name
        )
        if ours.service_bus is not None:
            # The runtime marks an SDK-type trigger for deferred binding: the host sends model_binding_data.
            deferred = trigger.get("properties", {}).get("SupportsDeferredBinding", False)
            assert (ours.service_bus.payload == "sdk") == deferred, ours.name
            assert ours.service_bus.batch == (trigger.get("cardinality") == "MANY"), ours.name
            assert ours.service_bus.sessions == bool(trigger.get("isSessionsEnabled")), ours.name
            assert ours.service_bus.auto_complete == trigger.get("autoCompleteMessages"), ours.name


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
        [sys.executable, "-m", "devhost.worker.index_app", str(tmp_path)],
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
