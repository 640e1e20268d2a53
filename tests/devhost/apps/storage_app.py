"""Test app: an HTTP function that writes and reads a row of Azure Table Storage through the app setting
``AzureWebJobsStorage``, as a Functions app reaches its storage account (``STORAGE_TEST_TABLE`` names the
table)."""

import json
import os

import azure.functions as func
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def _table() -> TableClient:
    # The Functions convention's mixed-case name, as the host sets it in the worker's environment.
    service = TableServiceClient.from_connection_string(os.environ["AzureWebJobsStorage"])  # noqa: SIM112
    return service.create_table_if_not_exists(os.environ["STORAGE_TEST_TABLE"])


@app.route(route="rows/{key}", methods=["PUT", "GET"])
def rows(req: func.HttpRequest) -> func.HttpResponse:
    key = req.route_params["key"]
    with _table() as table:
        if req.method == "PUT":
            table.upsert_entity({"PartitionKey": "rows", "RowKey": key, "value": req.get_body().decode()})
            return func.HttpResponse(status_code=204)
        try:
            entity = table.get_entity("rows", key)
        except ResourceNotFoundError:
            return func.HttpResponse(status_code=404)
    return func.HttpResponse(json.dumps({"value": entity["value"]}), mimetype="application/json")
