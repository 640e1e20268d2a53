"""``python -m devhost.worker.index_app <app directory>``: the functions ``azure_functions_runtime`` indexes
in an app, as JSON on stdout (the runtime's version, and per function its id and raw bindings).

It answers, with Azure's own indexing code, what the Functions host learns from the app: a tool to look
at an app, and, in a process of its own, the reference a test holds devhost's index to. A failed index
prints the runtime's exception (type and message, as the host logs it) on stderr and exits 1. Runs the
runtime in this process: call it in a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from devhost.channel.handshake import HOST_VERSION
from devhost.worker.runtime_driver import RuntimeDriver


async def index(app_directory: Path) -> dict[str, Any]:
    """Init the runtime on ``app_directory`` and read back its function metadata."""
    driver = RuntimeDriver()
    protos = driver.protos
    directory = str(app_directory.resolve())
    init = (
        await driver.handle(
            protos.StreamingMessage(
                request_id="init",
                worker_init_request=protos.WorkerInitRequest(
                    host_version=HOST_VERSION, function_app_directory=directory
                ),
            )
        )
    ).worker_init_response
    if init.result.status != protos.StatusResult.Success:
        raise RuntimeError(init.result.exception.message)
    metadata = (
        await driver.handle(
            protos.StreamingMessage(
                request_id="metadata",
                functions_metadata_request=protos.FunctionsMetadataRequest(function_app_directory=directory),
            )
        )
    ).function_metadata_response
    return {
        "runtimeVersion": driver.version,
        "functions": [
            {
                "name": function.name,
                "functionId": function.function_id,
                "bindings": [json.loads(raw) for raw in function.raw_bindings],
            }
            for function in metadata.function_metadata_results
        ],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m devhost.worker.index_app <app directory>", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(index(Path(argv[0])))
    except RuntimeError as failure:
        print(f"the runtime could not index the app: {failure}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
