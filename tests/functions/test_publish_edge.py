"""What ``POST /api/events/{eventType}`` answers and logs, under devhost (issue 36, items 2-5 and 11): the one
id a publish has (broker ``MessageId`` = ``NServiceBus.MessageId``) in the 202 and in the log, a refused
publish's own WARNING next to the host's ``Succeeded`` line, 413 for a body larger than the topic's maximum
message size (read from the namespace, checked before sending), 415 for a non-JSON ``Content-Type``, and the
caller's ``?correlationId=`` on the message."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest

from app.endpoints.sample.events import CustomerCreated
from devhost.testing import running_host
from shared.topology.messages import CORRELATION_ID, MESSAGE_ID, message_body
from tests.functions.busbar_app import APP, HOST_JSON, create_queues_and_router
from tests.functions.test_http_api import error_of, first_copies, watch_fallback_topic
from tests.shared.redrive.redrive_support import text_properties

STANDARD_LIMIT = 256 * 1024  # the emulator's namespace is Standard: every topic takes 256 KB
PUBLISHER_LOGGER = "shared.api.publishing"
LOG_WAIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def http(settings: dict[str, str]) -> Iterator[httpx.Client]:
    """This module's host, started while the root logger is at INFO: the host tells the worker its levels
    when the worker starts (devhost.channel.logs.log_categories, as Azure's host does), so the publisher's
    INFO line reaches the host only from a worker started so."""
    root = logging.getLogger()
    level = root.level
    with ExitStack() as stack:
        root.setLevel(logging.INFO)
        try:
            host = stack.enter_context(
                running_host(
                    APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
                )
            )
        finally:
            root.setLevel(level)
        yield stack.enter_context(
            httpx.Client(base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60)
        )


def wait_for_records(
    caplog: pytest.LogCaptureFixture, match: Callable[[logging.LogRecord], bool], what: str
) -> list[logging.LogRecord]:
    """The captured records ``match`` accepts, once there is one (the host logs after it answers)."""
    deadline = time.monotonic() + LOG_WAIT_SECONDS
    while True:
        found = [r for r in list(caplog.records) if match(r)]
        if found or time.monotonic() > deadline:
            assert found, f"no log record: {what}"
            return found
        time.sleep(0.05)


def customer_created(customer_id: str, body_bytes: int) -> dict[str, str]:
    """A Tenant.CustomerCreated whose message body (what the publish sends) is exactly ``body_bytes``."""
    empty = len(message_body(CustomerCreated(customer_id=customer_id, name="")).encode())
    return {"customer_id": customer_id, "name": "x" * (body_bytes - empty)}


# ---------------------------------------------------------------------------- item 2: the publish's id


def test_an_accepted_publish_answers_its_id_under_both_names_and_logs_it_with_topic_session_correlation(
    http: httpx.Client, settings: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    watcher = watch_fallback_topic(settings)
    correlation = f"checkout-{uuid.uuid4().hex[:8]}"

    with caplog.at_level(logging.INFO):
        response = http.post(
            "/api/events/Tenant.CustomerUpdated",
            params={"correlationId": correlation},
            json={"customer_id": "c-ids", "name": "Ada"},
        )
        assert response.status_code == 202, response.text
        body = response.json()
        message_id = body["messageId"]
        logged = wait_for_records(
            caplog,
            lambda r: getattr(r, "worker_logger", None) == PUBLISHER_LOGGER and message_id in r.getMessage(),
            "the accepted publish's INFO line",
        )

    assert body["nserviceBusMessageId"] == message_id == body["sent"][0]["messageId"]
    assert body["correlationId"] == correlation
    [copy] = first_copies(settings, watcher, 1)
    # The id the client got is the one the broker, the console and the handlers show.
    assert copy.message_id == message_id == text_properties(copy)[MESSAGE_ID]
    assert copy.correlation_id == correlation == text_properties(copy)[CORRELATION_ID]
    [line] = logged
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"published Tenant.CustomerUpdated: MessageId={message_id} (= NServiceBus.MessageId), topic "
        f"{settings['BUSBAR_FALLBACK_TOPIC']}, SessionId=c-ids, CorrelationId={correlation}"
    )


def test_without_a_correlation_id_a_publish_starts_its_own_correlation_under_its_message_id(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    watcher = watch_fallback_topic(settings)

    response = http.post("/api/events/Tenant.CustomerUpdated", json={"customer_id": "c-own", "name": "Ada"})

    assert response.status_code == 202, response.text
    body = response.json()
    assert body["correlationId"] == body["messageId"]
    [copy] = first_copies(settings, watcher, 1)
    assert copy.correlation_id == body["messageId"] == text_properties(copy)[CORRELATION_ID]


# ---------------------------------------------------------------------------- item 3: refusals are logged


def test_a_refused_publish_is_logged_as_a_warning_with_status_and_reason_while_the_host_says_succeeded(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Azure's host logs ``Executed '...' (Succeeded, ...)`` for an HTTP function that returned, whatever the
    status (azure-webjobs-sdk src/Microsoft.Azure.WebJobs.Host/Loggers/FunctionInstanceLogger.cs:
    ``status = succeeded ? "Succeeded" : "Failed"``, ``succeeded`` meaning the invocation did not throw);
    devhost keeps that line, and Busbar adds its own with the status and the reason."""
    with caplog.at_level(logging.INFO):
        response = http.post("/api/events/Billing.InvoiceIssued", json={"order_id": "o", "amount": "many"})
        assert response.status_code == 400, response.text
        [warning] = wait_for_records(
            caplog,
            lambda r: (
                getattr(r, "worker_logger", None) == PUBLISHER_LOGGER
                and r.getMessage().startswith("publish of Billing.InvoiceIssued refused")
            ),
            "the refused publish's WARNING",
        )
        invocation = getattr(warning, "invocation_id", None)
        assert invocation, "the WARNING carries its invocation id (the host logs it so)"
        [executed] = wait_for_records(
            caplog,
            lambda r: (
                r.getMessage().startswith("Executed 'Functions.publish_event'")
                and f"Id={invocation}," in r.getMessage()
            ),
            "the host's Executed line of the same invocation",
        )

    assert warning.levelno == logging.WARNING
    assert warning.name == "Function.publish_event.User"
    message = warning.getMessage()
    assert message.startswith("publish of Billing.InvoiceIssued refused: 400 ValidationFailed: "), message
    assert "invoice_id: Field required" in message
    assert executed.getMessage().startswith(f"Executed 'Functions.publish_event' (Succeeded, Id={invocation}")


# ---------------------------------------------------------------------------- item 4: message size


@pytest.mark.parametrize("body_bytes", [300 * 1024, 2 * 1024 * 1024], ids=["300KB", "2MB"])
def test_a_body_larger_than_the_topics_maximum_message_size_is_413_naming_the_limit_and_sends_nothing(
    http: httpx.Client, settings: dict[str, str], body_bytes: int
) -> None:
    watcher = watch_fallback_topic(settings)

    refused = http.post("/api/events/Tenant.CustomerCreated", json=customer_created("c-big", body_bytes))
    accepted = http.post("/api/events/Tenant.CustomerCreated", json={"customer_id": "c-after", "name": "Ada"})

    assert refused.status_code == 413, refused.text
    error = error_of(refused)
    assert error["code"] == "PayloadTooLarge"
    assert error["maxMessageSizeInBytes"] == STANDARD_LIMIT
    topic = settings["BUSBAR_FALLBACK_TOPIC"]
    # The answer of the check made before sending, not Service Bus's refusal of a sent message.
    assert error["message"] == (
        f"the event's body is {body_bytes} bytes; topic {topic} takes messages of at most {STANDARD_LIMIT} "
        "bytes (256 KB, headers included)"
    )
    assert accepted.status_code == 202, accepted.text
    [first] = first_copies(settings, watcher, 1)
    assert first.message_id == accepted.json()["messageId"]


def test_a_body_just_under_the_maximum_message_size_is_published(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    """2 KB under 256 KB leaves room for the headers (about 1 KB): Service Bus takes it, so must the check."""
    watcher = watch_fallback_topic(settings)
    payload = customer_created("c-near", STANDARD_LIMIT - 2048)

    response = http.post("/api/events/Tenant.CustomerCreated", json=payload)

    assert response.status_code == 202, response.text
    [copy] = first_copies(settings, watcher, 1)
    assert copy.message_id == response.json()["messageId"]
    assert len(b"".join(copy.body)) == STANDARD_LIMIT - 2048


def test_a_body_under_the_limit_whose_headers_tip_it_over_is_413_from_service_bus(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    """The check lets through any body that is not larger than the limit (the headers' size is the broker's
    to count); the broker's refusal of the message is the client's error too, and nothing was enqueued."""
    watcher = watch_fallback_topic(settings)

    refused = http.post(
        "/api/events/Tenant.CustomerCreated", json=customer_created("c-edge", STANDARD_LIMIT - 10)
    )
    accepted = http.post("/api/events/Tenant.CustomerCreated", json={"customer_id": "c-after", "name": "Ada"})

    assert refused.status_code == 413, refused.text
    error = error_of(refused)
    assert error["code"] == "PayloadTooLarge"
    assert error["message"].endswith("Service Bus refused it"), error
    assert (
        "MessageSizeExceededError" in error["details"][0] and f"{STANDARD_LIMIT} bytes" in error["details"][0]
    )
    [first] = first_copies(settings, watcher, 1)
    assert first.message_id == accepted.json()["messageId"]


# ---------------------------------------------------------------------------- item 5: content type


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
def test_a_non_json_content_type_is_415_naming_the_expected_type_and_sends_nothing(
    http: httpx.Client, settings: dict[str, str], content_type: str
) -> None:
    watcher = watch_fallback_topic(settings)

    refused = http.post(
        "/api/events/Tenant.CustomerCreated",
        content=b'{"customer_id": "c-text", "name": "Ada"}',
        headers={"content-type": content_type},
    )
    accepted = http.post("/api/events/Tenant.CustomerCreated", json={"customer_id": "c-json", "name": "Ada"})

    assert refused.status_code == 415, refused.text
    error = error_of(refused)
    assert error["code"] == "UnsupportedMediaType"
    assert error["expected"] == "application/json"
    assert content_type in error["message"] and "application/json" in error["message"], error
    [first] = first_copies(settings, watcher, 1)
    assert first.message_id == accepted.json()["messageId"]


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/vnd.busbar.customer+json"],
)
def test_json_content_types_with_parameters_or_a_json_suffix_are_accepted(
    http: httpx.Client, content_type: str
) -> None:
    response = http.post(
        "/api/events/Tenant.CustomerCreated",
        content=b'{"customer_id": "c-typed", "name": "Ada"}',
        headers={"content-type": content_type},
    )

    assert response.status_code == 202, response.text


def test_a_publish_without_a_content_type_is_read_as_json(http: httpx.Client) -> None:
    response = http.post(
        "/api/events/Tenant.CustomerCreated", content=b'{"customer_id": "c-bare", "name": "Ada"}'
    )

    assert "content-type" not in response.request.headers
    assert response.status_code == 202, response.text
