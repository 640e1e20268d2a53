"""A message whose application properties the Python SDKs cannot decode (a .NET sender's AMQP ``char`` and
``decimal``) does not stall a trigger: devhost's listeners receive through Busbar's seam (python-qpid-proton,
which reads every AMQP type; nothing is added to azure-servicebus), its host side reads the message as the
Functions host (.NET) does, and the worker-side binding succeeds or fails with it as in Azure; the messages
behind it are processed, on a queue and on its dead-letter queue alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import proton
import pytest

from devhost.channel.protocol import ServiceBusMessageData
from devhost.servicebus.message_reading import message_data
from devhost.servicebus.model_binding_data import LOCK_TOKEN_MARKER, model_binding_content
from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.amqp.encoding.types import decode_bid, encode_bid128
from shared.amqp.receiver import EntityReceiver
from tests.devhost.channel.test_worker_boundary import _plain_copy
from tests.devhost.conftest import APPS, Records, app_settings
from tests.devhost.seam_receiving import receive_as_the_listeners_do
from tests.devhost.typed_sender import dotnet_message, send_typed
from tests.journeys.amqp_reader import receive_all

MAX_DELIVERY_COUNT = 2


def _decimal128(value: str) -> proton.decimal128:
    # .NET writes System.Decimal as an IEEE 754 decimal128 (BID).
    return proton.decimal128(encode_bid128(Decimal(value)))


DOTNET_PROPERTIES: dict[str, Any] = {
    "grade": proton.char("A"),
    "price": _decimal128("19.99"),
    "rate": proton.decimal32(0x3200000F),  # 1.5 (BID, bias 101)
    "tenant": "acme",
}


@pytest.fixture(scope="module")
def entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    # Long locks: a redelivery within a test's wait can only come from an abandon.
    return {
        name: shared_emulator.create_queue(
            lock_duration=timedelta(minutes=5), max_delivery_count=MAX_DELIVERY_COUNT
        )
        for name in ("PLAIN_QUEUE", "SDK_QUEUE")
    }


@pytest.fixture(scope="module")
def host(
    shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> Iterator[HostHandle]:
    settings = app_settings(shared_emulator, module_records.path, entities)
    with running_host(APPS / "codec_app.py", settings=settings) as handle:
        yield handle


def _send_dotnet_between_plain(emulator: EmulatorHandle, queue: str, run: str) -> None:
    send_typed(
        emulator.connection_string,
        queue,
        dotnet_message(f"dotnet-{run}", f"dotnet-{run}", **DOTNET_PROPERTIES),
        *(dotnet_message(f"after-{i}-{run}", f"after-{i}-{run}") for i in range(3)),
    )


def test_a_plain_trigger_gets_char_and_decimal_properties_as_the_hosts_json_writes_them(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    """The host reads every AMQP type and serialises ApplicationProperties with Json.NET: a char is a JSON
    string, a decimal a JSON number; the worker's JSON decoding reads both, so the invocation succeeds."""
    run = uuid.uuid4().hex[:6]
    queue = entities["PLAIN_QUEUE"]
    _send_dotnet_between_plain(shared_emulator, queue, run)
    bodies = {f"dotnet-{run}", *(f"after-{i}-{run}" for i in range(3))}
    module_records.wait(lambda rs: bodies <= {r.get("body") for r in rs})
    (seen,) = module_records.of("plain_reads", body=f"dotnet-{run}")
    assert seen["properties"] == {"grade": "A", "price": 19.99, "rate": 1.5, "tenant": "acme"}
    assert seen["delivery_count"] == 1
    # Completed, as any successful invocation: nothing left, nothing dead-lettered.
    assert receive_all(shared_emulator.connection_string, queue, idle_seconds=1) == []
    assert receive_all(shared_emulator.connection_string, f"{queue}/$deadletterqueue", idle_seconds=1) == []


def test_an_sdk_type_trigger_dead_letters_a_message_its_binding_cannot_decode_and_delivers_the_rest(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    """The host hands the message's raw AMQP bytes on; the binding extension's uamqp cannot decode a char or
    a decimal, so each invocation fails before the function runs, the message is abandoned, and the broker
    dead-letters it at MaxDeliveryCount; the messages behind it are delivered meanwhile."""
    run = uuid.uuid4().hex[:6]
    queue = entities["SDK_QUEUE"]
    _send_dotnet_between_plain(shared_emulator, queue, run)
    after = {f"after-{i}-{run}" for i in range(3)}
    module_records.wait(lambda rs: after <= {r.get("body") for r in rs if r["function"] == "sdk_reads"})
    failed = host.wait_for_invocations(
        lambda rs: (
            len([r for r in rs if r.function_name == "sdk_reads" and r.outcome == "Failed"])
            >= MAX_DELIVERY_COUNT
        )
    )
    assert module_records.of("sdk_reads", body=f"dotnet-{run}") == []
    [dead] = receive_all(shared_emulator.connection_string, f"{queue}/$deadletterqueue")
    assert dead.message_id == f"dotnet-{run}"
    assert dead.properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
    # ... with its properties as they were sent.
    # (proton's classes name the AMQP types; its decimal32 is an int subclass that ``wire_type`` would call
    # a long.)
    assert {name: type(dead.properties[name]).__name__ for name in DOTNET_PROPERTIES} == {
        "grade": "char",
        "price": "decimal128",
        "rate": "decimal32",
        "tenant": "str",
    }
    errors = [r.error or "" for r in failed if r.function_name == "sdk_reads" and r.outcome == "Failed"]
    assert len(errors) == MAX_DELIVERY_COUNT
    assert all("Failed to decode ServiceBus content" in error for error in errors), errors


def _received_dotnet_message(emulator: EmulatorHandle) -> tuple[bytes, ServiceBusMessageData]:
    """The SDK-type content and the plain message data devhost's host side makes of a .NET message with a
    char and decimals of every width."""
    queue = emulator.create_queue()
    wide = proton.decimal64((398 - 2) << 53 | 1999)  # 19.99 (BID, bias 398)
    send_typed(
        emulator.connection_string, queue, dotnet_message("dotnet", "m", **DOTNET_PROPERTIES, wide=wide)
    )
    [message] = receive_as_the_listeners_do(emulator.connection_string, queue, 1)
    return model_binding_content(message), message_data(message)


def _bid_bytes(value: Any) -> bytes:
    # proton hands a decimal128 out as its 16 bytes, a decimal32 or decimal64 as an int of 4 or 8 bytes.
    width = {"decimal32": 4, "decimal64": 8}.get(type(value).__name__)
    return bytes(value) if width is None else int(value).to_bytes(width, "big")


def test_the_raw_amqp_bytes_an_sdk_type_trigger_gets_keep_a_char_and_every_decimal_as_it_arrived(
    shared_emulator: EmulatorHandle,
) -> None:
    """The message's sections as they arrived (docs/operations.md: the .NET SDK's ``ToBytes()`` keeps every
    type, and devhost passes the bytes on): a char stays a char, and each decimal keeps its width and value,
    which the extension's uamqp cannot decode (the SDK-type trigger test above)."""
    content, _ = _received_dotnet_message(shared_emulator)
    decoded = proton.Message()
    decoded.decode(content[content.index(LOCK_TOKEN_MARKER) + len(LOCK_TOKEN_MARKER) :])
    raw: dict[Any, Any] = dict(decoded.properties or {})
    sent = {str(name): value for name, value in raw.items()}
    assert {name: type(sent[name]).__name__ for name in ("grade", "price", "rate", "wide")} == {
        "grade": "char",
        "price": "decimal128",
        "rate": "decimal32",
        "wide": "decimal64",
    }
    assert sent["grade"] == "A"
    assert [decode_bid(_bid_bytes(sent[name])) for name in ("price", "rate", "wide")] == [
        Decimal("19.99"),
        Decimal("1.5"),
        Decimal("19.99"),
    ]


def test_a_plain_triggers_char_and_decimals_cross_to_the_worker_as_a_json_string_and_numbers(
    shared_emulator: EmulatorHandle,
) -> None:
    """Plain values, as Json.NET writes them into the trigger metadata: no decoder's class (a char is a str
    subclass) crosses to the worker process."""
    _, data = _received_dotnet_message(shared_emulator)
    assert data.properties == {"grade": "A", "price": 19.99, "rate": 1.5, "wide": 19.99, "tenant": "acme"}
    assert _plain_copy(data) == data
    assert type(_plain_copy(data).properties["grade"]) is str


def _dead_letter_dotnet_between_plain(emulator: EmulatorHandle, queue: str, run: str) -> None:
    """Send a .NET message between plain ones and dead-letter all four (received through the seam: the
    Python SDK's receive fails on the first char or decimal)."""
    _send_dotnet_between_plain(emulator, queue, run)
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as receiver:
        received: list[Any] = []
        while len(received) < 4:
            batch = receiver.receive_messages(4 - len(received), max_wait_time=5)
            assert batch, f"{queue}: {len(received)} of 4 messages arrived"
            received += batch
        for message in received:
            receiver.dead_letter_message(message, reason="HandlerFailed")


def test_triggers_on_a_dead_letter_queue_get_its_char_and_decimal_message_and_the_ones_behind_it(
    shared_emulator: EmulatorHandle, records: Records
) -> None:
    """A dead-lettered .NET message (queue_name ``<queue>/$deadletterqueue``, as a Functions app names a
    dead-letter queue) reaches a plain trigger with its properties as the host's Json.NET writes them, and
    an SDK-type trigger's binding fails on it as in Azure while the dead letters behind it are delivered:
    nothing is added to azure-servicebus for either (devhost receives through Busbar's seam)."""
    run = uuid.uuid4().hex[:6]
    plain, sdk = (shared_emulator.create_queue(lock_duration=timedelta(minutes=5)) for _ in range(2))
    for queue in (plain, sdk):
        _dead_letter_dotnet_between_plain(shared_emulator, queue, run)
    dead_letter_queues = {"PLAIN_QUEUE": f"{plain}/$deadletterqueue", "SDK_QUEUE": f"{sdk}/$deadletterqueue"}
    settings = app_settings(shared_emulator, records.path, dead_letter_queues)
    after = {f"after-{i}-{run}" for i in range(3)}
    with running_host(APPS / "codec_app.py", settings=settings) as host:
        records.wait(
            lambda rs: (
                {f"dotnet-{run}", *after} <= {r.get("body") for r in rs if r["function"] == "plain_reads"}
            )
        )
        records.wait(lambda rs: after <= {r.get("body") for r in rs if r["function"] == "sdk_reads"})
        failed = host.wait_for_invocations(
            lambda rs: any(r.function_name == "sdk_reads" and r.outcome == "Failed" for r in rs)
        )
    (seen,) = records.of("plain_reads", body=f"dotnet-{run}")
    # ... beside the broker's dead-letter properties.
    assert {name: seen["properties"][name] for name in DOTNET_PROPERTIES} == {
        "grade": "A",
        "price": 19.99,
        "rate": 1.5,
        "tenant": "acme",
    }
    assert seen["properties"]["DeadLetterReason"] == "HandlerFailed"
    assert records.of("sdk_reads", body=f"dotnet-{run}") == []
    errors = [r.error or "" for r in failed if r.function_name == "sdk_reads" and r.outcome == "Failed"]
    assert errors and all("Failed to decode ServiceBus content" in error for error in errors), errors
    # The plain trigger completed every dead letter; the SDK-type one left the .NET message there.
    assert receive_all(shared_emulator.connection_string, f"{plain}/$deadletterqueue", idle_seconds=1) == []
    [left] = receive_all(shared_emulator.connection_string, f"{sdk}/$deadletterqueue", idle_seconds=1)
    assert left.message_id == f"dotnet-{run}"
