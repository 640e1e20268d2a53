"""What the Functions host refuses when it starts (with its messages), and how it routes encoded paths.

Indexing is the runtime's (``azure_functions_runtime`` in the worker process): what it refuses, devhost
refuses with its message; what the host refuses in the runtime's metadata, devhost refuses too."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest

from devhost.bindings import BindingError
from devhost.channel.function_indexing import AppLoadError
from devhost.ncrontab import CronError
from devhost.startup_problems import HostStartupProblems
from devhost.testing import running_host

SB_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.service_bus_queue_trigger(arg_name="msg", queue_name="q", connection="{connection}")
def listens(msg: func.ServiceBusMessage) -> None:
    pass
"""

HTTP_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="items/{{name}}", methods=["GET"])
def first(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(req.route_params["name"])
{second}
"""

SECOND = """

@app.route(route="Items/{name}", methods=["GET", "POST"])
def second(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("second")
"""


def _app(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "function_app.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def test_a_missing_connection_setting_refuses_start_up_with_the_hosts_message(tmp_path: Path) -> None:
    app = _app(tmp_path, SB_APP.format(connection="NoSuchConnection"))
    with pytest.raises(BindingError) as refused, running_host(app, settings={}):
        pass
    assert str(refused.value) == (
        "The 'listens' function is in error: Microsoft.Azure.WebJobs.Host: Error indexing method "
        "'Functions.listens'. Microsoft.Azure.WebJobs.Extensions.ServiceBus: Service Bus account connection "
        "string 'NoSuchConnection' does not exist. Make sure that it is a defined App Setting."
    )


TIMERS_AND_QUEUE_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.timer_trigger(arg_name="timer", schedule="%NIGHTLY%")
def nightly(timer: func.TimerRequest) -> None:
    pass


@app.timer_trigger(arg_name="timer", schedule="%HOURLY%")
def hourly(timer: func.TimerRequest) -> None:
    pass


@app.service_bus_queue_trigger(arg_name="msg", queue_name="q", connection="NoSuchConnection")
def listens(msg: func.ServiceBusMessage) -> None:
    pass
"""


def refuse_settings(settings: Mapping[str, str]) -> None:
    raise ValueError(f"2 invalid app setting(s): BUSBAR_A is {settings['BUSBAR_A']!r}")


def test_every_problem_that_stops_the_start_is_reported_at_one_start(tmp_path: Path) -> None:
    # The Functions host logs every function in error at one start; devhost, which refuses to start instead,
    # names them all too, with the startup hook's failure (make run's check of every app setting).
    app = _app(tmp_path, TIMERS_AND_QUEUE_APP)
    settings = {"NIGHTLY": "every night", "HOURLY": "0 0 * * * *  *", "BUSBAR_A": "bad"}
    with (
        pytest.raises(HostStartupProblems) as refused,
        running_host(app, settings=settings, startup_hook=refuse_settings),
    ):
        pass
    found = dict((where, error) for where, error in refused.value.problems)
    assert list(found) == [
        "the startup hook",
        "Functions.nightly (schedule)",
        "Functions.hourly (schedule)",
        "Functions.listens (connection)",
    ]
    assert str(found["the startup hook"]) == "2 invalid app setting(s): BUSBAR_A is 'bad'"
    assert isinstance(found["Functions.nightly (schedule)"], CronError)
    assert "'every night'" in str(found["Functions.nightly (schedule)"])
    assert isinstance(found["Functions.listens (connection)"], BindingError)
    message = str(refused.value).splitlines()
    assert message[0] == "4 problems stop the host from starting:"
    assert message[1] == "  - the startup hook: ValueError: 2 invalid app setting(s): BUSBAR_A is 'bad'"
    assert len(message) == 5 and all(line.startswith("  - Functions.") for line in message[2:])


def test_a_single_problem_is_raised_as_itself(tmp_path: Path) -> None:
    app = _app(tmp_path, TIMERS_AND_QUEUE_APP)
    settings = {
        "NIGHTLY": "0 0 0 * * *",
        "HOURLY": "0 0 * * * *",
        "NoSuchConnection": "Endpoint=sb://127.0.0.1/;",
        "BUSBAR_A": "x",
    }
    with (
        pytest.raises(ValueError, match="BUSBAR_A is 'x'") as refused,
        running_host(app, settings=settings, startup_hook=refuse_settings),
    ):
        pass
    assert not isinstance(refused.value, HostStartupProblems)


def test_a_connection_section_without_a_namespace_refuses_start_up(tmp_path: Path) -> None:
    app = _app(tmp_path, SB_APP.format(connection="Sb"))
    with (
        pytest.raises(BindingError, match="Connection should have an 'fullyQualifiedNamespace' property"),
        running_host(app, settings={"Sb__credential": "managedidentity"}),
    ):
        pass


def test_the_azurewebjobs_prefixed_setting_serves_a_connection_as_in_the_host() -> None:
    from devhost.bindings import resolve_connection

    found = resolve_connection("Sb", {"AzureWebJobsSb": "Endpoint=sb://x/;"}, where="f")
    assert found.connection_string == "Endpoint=sb://x/;"


def test_two_http_functions_on_the_same_route_and_method_refuse_start_up(tmp_path: Path) -> None:
    app = _app(tmp_path, HTTP_APP.format(second=SECOND))
    with pytest.raises(ValueError) as refused, running_host(app, settings={}):
        pass
    assert str(refused.value) == (
        "The 'second' function is in error: The route specified conflicts with the route defined by "
        "function 'first'."
    )


def test_an_encoded_slash_stays_inside_one_route_value(tmp_path: Path) -> None:
    app = _app(tmp_path, HTTP_APP.format(second=""))
    with (
        running_host(app, settings={}) as host,
        urllib.request.urlopen(f"{host.base_url}/api/items/a%2Fb%20c") as response,
    ):
        assert response.read().decode() == "a%2Fb c"


def test_a_binding_type_the_extension_bundle_does_not_know_refuses_start_up(tmp_path: Path) -> None:
    source = """
    import azure.functions as func

    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


    @app.route(route="x")
    @app.generic_input_binding(arg_name="other", type="http2")
    def strange(req: func.HttpRequest, other: str) -> func.HttpResponse:
        return func.HttpResponse("x")
    """
    with pytest.raises(AppLoadError) as refused, running_host(_app(tmp_path, source), settings={}):
        pass
    assert str(refused.value) == (
        "The 'strange' function is in error: The binding type(s) 'http2' were not found in the configured "
        "extension bundle. Please ensure the type is correct and the correct version of extension bundle is "
        "configured."
    )


def test_a_binding_name_the_host_does_not_accept_refuses_start_up_though_the_runtime_indexed_it(
    tmp_path: Path,
) -> None:
    source = """
    import azure.functions as func

    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


    @app.route(route="x", trigger_arg_name="my_req")
    def underscored(my_req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse("x")
    """
    with pytest.raises(AppLoadError) as refused, running_host(_app(tmp_path, source), settings={}):
        pass
    # Utility.ValidateBinding: letters and digits only (the Python runtime indexes the function happily).
    assert str(refused.value) == (
        "The 'underscored' function is in error: The binding name my_req is invalid. Please assign a valid "
        "name to the binding."
    )


BUILTIN_GENERIC_BATCH_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.service_bus_queue_trigger(arg_name="batch", queue_name="q", connection="Sb", cardinality="many")
def batch(batch: list[func.ServiceBusMessage]) -> None:
    pass
"""

NONE_RETURNING_HTTP_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="x")
def nothing(req: func.HttpRequest) -> None:
    return None
"""


def test_a_builtin_generic_trigger_annotation_is_refused_as_azure_functions_runtime_refuses_it(
    tmp_path: Path,
) -> None:
    # azure-functions-runtime 1.3.0 (Python 3.13 in Azure) loads typing.List[...] but not list[...].
    app = _app(tmp_path, BUILTIN_GENERIC_BATCH_APP)
    with pytest.raises(AppLoadError) as refused, running_host(app, settings={"Sb": "Endpoint=sb://x/;"}):
        pass
    assert str(refused.value) == (
        f"indexing {app} failed: FunctionLoadError: cannot load the batch function: binding batch has "
        "invalid non-type annotation list[azure.functions._servicebus.ServiceBusMessage]"
    )


def test_an_http_function_annotated_to_return_none_is_refused_as_the_runtime_refuses_it(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path, NONE_RETURNING_HTTP_APP)
    with pytest.raises(AppLoadError) as refused, running_host(app, settings={}):
        pass
    assert str(refused.value) == (
        f"indexing {app} failed: FunctionLoadError: cannot load the nothing function: Python return "
        'annotation "NoneType" does not match binding type "http"'
    )


@pytest.mark.subprocess
def test_devhost_shows_the_runtimes_indexing_error_as_the_host_logs_it_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path, BUILTIN_GENERIC_BATCH_APP)
    (tmp_path / "local.settings.json").write_text('{"Values": {"Sb": "Endpoint=sb://x/;"}}', encoding="utf-8")

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "devhost",
            "--app",
            str(app),
            "--settings",
            str(tmp_path / "local.settings.json"),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    # GrpcWorkerChannel.HandleWorkerInitError: "Initializing worker process failed", with the worker's
    # exception as RpcException words it (its message: the runtime's serialize_exception, "<Type>: <text>").
    failed = "Initializing worker process failed\nResult: Failure\nException: FunctionLoadError: cannot load"
    assert failed in done.stderr, done.stderr
    assert "\nStack: Traceback (most recent call last):" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(
        f"error: AppLoadError: indexing {app.resolve()} failed: FunctionLoadError: cannot load the batch "
        "function: binding batch has invalid non-type annotation "
        "list[azure.functions._servicebus.ServiceBusMessage]"
    ), done.stderr
