"""Test app that imports once, then dies at every start while the test's flag file exists (as an app file
broken after devhost started), and functions that end the worker process with a chosen exit code."""

import json
import os
from pathlib import Path

import azure.functions as func

if Path(os.environ["DEVHOST_TEST_FLAG"]).exists():
    os._exit(3)  # the worker process dies while importing the app

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="pid")
def pid(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"pid": os.getpid()}), mimetype="application/json")


@app.route(route="exit")
def exit_with(req: func.HttpRequest) -> func.HttpResponse:
    os._exit(int(req.params["code"]))  # the worker process dies mid-invocation
