"""The typed journeys' app: ``make run`` on OS-picked ports with its own settings and data, the documented
HTTP API and ``make`` targets against it, and the ".NET-shaped" order its tests publish.

The order is what an NServiceBus publisher on .NET puts on the fallback topic: a JSON body, MessageId,
CorrelationId, ContentType and Subject, the NServiceBus headers with assembly-qualified enclosed types and
their CorrelationFilter stamps, and an application property of every AMQP type a trigger can read
(:data:`tests.shared.envelope.wire_types.SENT`; char and decimal it cannot: docs/operations.md). Its amount
is negative, so the sample billing handler can never invoice it (``PermanentHandlerError``): the failure a
journey starts from, with no test-only code in the app.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from app.endpoints.sample.events import OrderAccepted
from shared.envelope.sdk import sdk_application_properties
from shared.topology.messages import correlation_stamps
from tests.devhost.test_make_run import REPO, SAMPLE_ENTITIES, MakeRun
from tests.devhost.test_make_run_tools import tool_environment
from tests.shared.envelope.wire_types import DESCRIBED, SENT

FALLBACK_TOPIC = "busbar-fallback"  # local.settings.sample.json
ASSEMBLY = "Shipping.Messages, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null"
ENCLOSED_TYPES = ";".join(
    f"{name}, {ASSEMBLY}"
    for name in ("Shipping.OrderAccepted", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged")
)
NSERVICEBUS_HEADERS = {
    "NServiceBus.EnclosedMessageTypes": ENCLOSED_TYPES,
    "NServiceBus.MessageIntent": "Publish",
    "NServiceBus.ContentType": "application/json",
    "NServiceBus.OriginatingEndpoint": "Shipping",
    "NServiceBus.TimeSent": "2026-11-26 09:30:15:123000 Z",
}
"""What NServiceBus stamps on a published event (all strings)."""
STAMPS = correlation_stamps(ENCLOSED_TYPES)
"""The CorrelationFilter routing mode's stamps: one boolean ``True`` per enclosed type."""


@dataclass(frozen=True, slots=True)
class DotnetOrder:
    """One published order: what was sent, to compare with what arrives."""

    order_id: str
    message_id: str
    correlation_id: str
    body: bytes

    def message(self) -> ServiceBusMessage:
        properties: Any = {
            **sdk_application_properties(SENT),
            **sdk_application_properties(DESCRIBED),
            **NSERVICEBUS_HEADERS,
            "NServiceBus.MessageId": self.message_id,
            "NServiceBus.CorrelationId": self.correlation_id,
            **STAMPS,
        }
        return ServiceBusMessage(
            self.body,
            message_id=self.message_id,
            correlation_id=self.correlation_id,
            content_type="application/json",
            subject="Shipping.OrderAccepted",
            application_properties=properties,
        )


def dotnet_order() -> DotnetOrder:
    """A fresh order billing cannot invoice (negative amount)."""
    order_id = f"typed-{uuid.uuid4().hex[:8]}"
    body = OrderAccepted(order_id=order_id, amount=-12.5).model_dump_json(by_alias=True).encode()
    return DotnetOrder(order_id, str(uuid.uuid4()), f"corr-{order_id}", body)


class TypedApp:
    """A running ``make run`` with ``overrides`` over the sample settings."""

    def __init__(self, root: Path, overrides: dict[str, str]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.data = root / "data"
        self.archive = root / "archive"
        settings: dict[str, Any] = json.loads((REPO / "local.settings.sample.json").read_text())
        settings["Values"].update({"BUSBAR_ARCHIVE_URL": str(self.archive), **overrides})
        # MakeRun points SETTINGS beside the data directory
        (root / "local.settings.json").write_text(json.dumps(settings, indent=2))
        # With the emulator's sample entities: the journeys inspect what is sent again on 'orders', which no
        # function consumes.
        self.run = MakeRun(self.data, SAMPLE_ENTITIES)
        assert self.run.settings == root / "local.settings.json"
        self.run.reader.wait_ready(timeout=120)
        self.connection_string = self.run.banner("Service Bus connection string")
        self.http = httpx.Client(
            base_url=self.run.base_url, timeout=60, headers={"x-functions-key": self.run.banner("Master key")}
        )

    def publish(self, order: DotnetOrder) -> None:
        """Send ``order`` to the fallback topic with the SDK, as the .NET publisher would."""
        with (
            ServiceBusClient.from_connection_string(self.connection_string) as client,
            client.get_topic_sender(FALLBACK_TOPIC) as sender,
        ):
            sender.send_messages(order.message())

    def make(self, target: str, *variables: str) -> subprocess.CompletedProcess[str]:
        """A documented ``make`` target against this app (its settings and data), from the checkout."""
        command = [
            *("make", "--no-print-directory", "-s", target),
            f"SETTINGS={self.run.settings}",
            f"DATA_DIR={self.data}",
            *variables,
        ]
        result = subprocess.run(
            command,
            cwd=REPO,
            env=tool_environment(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
        return result

    def output(self) -> str:
        return "\n".join(self.run.reader.lines)

    def close(self) -> None:
        self.http.close()
        try:
            self.run.interrupt()
        finally:
            self.run.kill()


@contextmanager
def typed_app(root: Path, **overrides: str) -> Iterator[TypedApp]:
    """``make run`` for one journey, stopped (Ctrl-C) at the end."""
    app = TypedApp(root, overrides)
    try:
        yield app
    finally:
        app.close()


def eventually[T](read: Callable[[], T | None], what: str, app: TypedApp, timeout: float = 240) -> T:
    """The first truthy result of ``read``, polling; fails naming ``what`` with the app's output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} never happened; make run said:\n{app.output()[-6000:]}")
