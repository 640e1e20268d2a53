"""The worker process speaks FunctionRpc, as the Python worker does with the Functions host: the host's
``StreamingMessage``s in (init, functions metadata, load, invocation, cancel, terminate), the runtime's
answers and ``RpcLog``s out, nothing else on the channel."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from devhost.channel.frames import (
    BOUND_ARGUMENTS_CATEGORY,
    CHANNEL_FD_ARGUMENT,
    ROOT_LOG_CATEGORY,
    encode,
    read_frame,
)
from devhost.channel.function_indexing import index_functions
from devhost.channel.handshake import HOST_VERSION
from devhost.channel.invocation_rpc import invocation_message
from devhost.channel.protocol import HttpInput, InvocationRequest
from devhost.channel.protos import load as load_protos
from devhost.servicebus.settlement import worker_arguments

REPO = Path(__file__).resolve().parents[3]
APP = """
import logging

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="hello")
def hello(req: func.HttpRequest) -> func.HttpResponse:
    logging.getLogger("app").warning("hello from %s", req.params.get("who"))
    return func.HttpResponse("hi", status_code=201)


@app.route(route="boom")
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise KeyError("nope")
"""


class _Host:
    """The test as the Functions host: one end of the worker's channel."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.logs: list[Any] = []

    async def ask(self, **content: Any) -> Any:
        """Send one request; its answer (the RpcLogs before it are kept)."""
        message = load_protos().StreamingMessage(request_id=str(uuid.uuid4()), **content)
        self.writer.write(encode(message))
        while True:
            answer = await read_frame(self.reader)
            assert answer is not None, "the worker closed the channel"
            if answer.WhichOneof("content") == "rpc_log":
                self.logs.append(answer.rpc_log)
            else:
                assert answer.request_id == message.request_id
                return answer


def _invocation(function: Any, query: dict[str, str]) -> Any:
    request = InvocationRequest(
        function.name,
        str(uuid.uuid4()),
        HttpInput("GET", "http://127.0.0.1/api/x", {"Accept": "*/*"}, query, {}, b""),
    )
    return invocation_message(function, request).invocation_request


@pytest.mark.subprocess
def test_the_worker_process_answers_the_hosts_function_rpc_messages(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(textwrap.dedent(APP), encoding="utf-8")
    host_end, worker_end = socket.socketpair()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devhost.worker",
            *worker_arguments(1),
            CHANNEL_FD_ARGUMENT,
            str(worker_end.fileno()),
        ],
        pass_fds=(worker_end.fileno(),),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    worker_end.close()
    protos = load_protos()

    async def talk() -> dict[str, Any]:
        reader, writer = await asyncio.open_connection(sock=host_end)
        host = _Host(reader, writer)
        init = await host.ask(
            worker_init_request=protos.WorkerInitRequest(
                host_version=HOST_VERSION,
                function_app_directory=str(tmp_path),
                log_categories={ROOT_LOG_CATEGORY: protos.RpcLog.Information},
            )
        )
        metadata = await host.ask(
            functions_metadata_request=protos.FunctionsMetadataRequest(function_app_directory=str(tmp_path))
        )
        indexed = list(metadata.function_metadata_response.function_metadata_results)
        loads = [
            await host.ask(
                function_load_request=protos.FunctionLoadRequest(function_id=m.function_id, metadata=m)
            )
            for m in indexed
        ]
        functions = {f.name: f for f in index_functions(indexed, {})}
        hello = _invocation(functions["hello"], {"who": "host"})
        said = await host.ask(invocation_request=hello)
        failed = await host.ask(invocation_request=_invocation(functions["boom"], {}))
        writer.write(encode(protos.StreamingMessage(worker_terminate=protos.WorkerTerminate())))
        await writer.drain()
        while (last := await read_frame(reader)) is not None:  # it closes the channel as it ends
            assert last.WhichOneof("content") == "rpc_log"
        writer.close()
        return {
            "init": init,
            "loads": loads,
            "hello": hello,
            "said": said,
            "failed": failed,
            "logs": host.logs,
        }

    try:
        seen = asyncio.run(talk())
        assert worker.wait(60) == 0  # WorkerTerminate: it ends once its invocations have
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    init = seen["init"].worker_init_response
    assert init.result.status == protos.StatusResult.Success
    assert (init.worker_metadata.runtime_name, init.worker_metadata.worker_version) == ("python", _pinned())
    assert all(
        load.function_load_response.result.status == protos.StatusResult.Success for load in seen["loads"]
    )
    said = seen["said"].invocation_response
    assert said.invocation_id == seen["hello"].invocation_id
    assert said.result.status == protos.StatusResult.Success
    assert (said.return_value.http.status_code, said.return_value.http.body.bytes) == ("201", b"hi")
    failed = seen["failed"].invocation_response
    assert failed.result.status == protos.StatusResult.Failure
    assert failed.result.exception.message == "KeyError: 'nope'"
    assert "raise KeyError" in failed.result.exception.stack_trace
    # The function's log, tagged with its invocation; the runtime's own line, a system log.
    logs = [log for log in seen["logs"] if log.invocation_id == said.invocation_id]
    [user] = [log for log in logs if log.category == "app"]
    assert (user.message, user.level, user.log_category) == (
        "hello from host",
        protos.RpcLog.Warning,
        protos.RpcLog.User,
    )
    [runtime] = [log for log in logs if log.message == "Function name: hello, Function Type: sync"]
    assert (runtime.category, runtime.log_category) == ("azure.functions", protos.RpcLog.System)
    [bound] = [log for log in logs if log.category == BOUND_ARGUMENTS_CATEGORY]
    assert json.loads(bound.properties) == {"req": "azure.functions.http.HttpRequest"}


def _pinned() -> str:
    requirements = (REPO / "requirements.txt").read_text().splitlines()
    [pin] = [
        line.split("==")[1].strip() for line in requirements if line.startswith("azure-functions-runtime==")
    ]
    return pin
