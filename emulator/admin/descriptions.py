"""Queue, topic and subscription descriptions of the ATOM management API <-> the broker's properties.

A request description is read into the management plane's camelCase property document and handed to the
same converters ARM uses (:mod:`emulator.arm.models`), so both planes apply one set of defaults and one
validation. A PUT replaces the whole definition: an element left out takes its default, as on Azure.
Read-only elements (counts, times, ``EntityAvailabilityStatus``) in a request are ignored.

Responses list the elements in the order the SDK's models declare them, with ``ForwardTo`` as a full
``sb://`` address, as Azure reports it. ``MaxMessageSizeInKilobytes`` is a Premium property: a Premium
namespace reports it and accepts it within Premium's range, a Standard one neither reports nor accepts it
(:mod:`emulator.tier`), so a description read and sent back (the SDK's ``update_queue``) round-trips on
both; no api-version before 2021-05 knows it (:func:`api_version_problems`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from emulator.admin import atom
from emulator.admin.atom import Raw
from emulator.arm import models
from emulator.arm.models import Extras
from emulator.broker.properties import QueueProperties, SubscriptionProperties, TopicProperties
from emulator.durations import format_duration
from emulator.tier import Sku

_BOOLEANS = {
    "requiresduplicatedetection",
    "requiressession",
    "deadletteringonmessageexpiration",
    "deadletteringonfilterevaluationexceptions",
    "enablebatchedoperations",
    "enablepartitioning",
    "enableexpress",
    "supportordering",
}
_INTEGERS = {"maxdeliverycount", "maxsizeinmegabytes", "maxmessagesizeinkilobytes"}
_TEXTS = {
    "lockduration",
    "defaultmessagetimetolive",
    "duplicatedetectionhistorytimewindow",
    "autodeleteonidle",
    "status",
    "forwardto",
    "forwarddeadletteredmessagesto",
    "usermetadata",
}


class InvalidDescription(ValueError):
    """An element of a description has a value of the wrong form; the message names it."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a response reports beside the definition: size, counts and times."""

    size_in_bytes: int
    counts: dict[str, int]
    created_at: datetime
    updated_at: datetime
    accessed_at: datetime


def _document(description: ET.Element) -> dict[str, Any]:
    """The description as an ARM-style ``{"properties": {...}}`` document with typed values."""
    properties: dict[str, Any] = {}
    for key, field in atom.fields(description).items():
        text = field.text
        if key in _BOOLEANS:
            if text is None or text.lower() not in ("true", "false"):
                raise InvalidDescription(f"<{field.name}> must be 'true' or 'false', got {text!r}.")
            properties[key] = text.lower() == "true"
        elif key in _INTEGERS:
            try:
                properties[key] = int(text or "")
            except ValueError:
                raise InvalidDescription(f"<{field.name}> must be an integer, got {text!r}.") from None
        elif key in _TEXTS and text is not None:
            properties[key] = text
    for key in ("forwardto", "forwarddeadletteredmessagesto"):
        if key in properties:
            properties[key] = entity_path(properties[key])
    return {"properties": properties}


# MaxMessageSizeInKilobytes came with api-version 2021-05: an older client's request cannot carry it.
_FIRST_VERSION_WITH_MAX_MESSAGE_SIZE = "2021-05"


def api_version_problems(description: ET.Element, api_version: str | None) -> list[str]:
    """Elements of a queue or topic description the request's api-version does not have:
    ``MaxMessageSizeInKilobytes`` before 2021-05 (whether the tier accepts it is :mod:`emulator.tier`'s)."""
    field = atom.fields(description).get("maxmessagesizeinkilobytes")
    if field is None or api_version is None or api_version >= _FIRST_VERSION_WITH_MAX_MESSAGE_SIZE:
        return []
    return [f"<{field.name}> is not a property of api-version {api_version}"]


def _premium_only(sku: Sku, props: QueueProperties | TopicProperties) -> list[tuple[str, object]]:
    """The elements only a Premium namespace reports (last, as the SDK's models declare them)."""
    if sku is not Sku.PREMIUM:
        return []
    return [("MaxMessageSizeInKilobytes", props.max_message_size_in_kilobytes)]


def entity_path(address: str) -> str:
    """An entity named by name or by address (``sb://host/queue``) → its path in the namespace."""
    parts = urlsplit(address)
    if parts.scheme and parts.netloc:
        return parts.path.strip("/")
    return address.strip("/")


def queue_from_xml(description: ET.Element) -> tuple[QueueProperties, Extras]:
    return models.queue_from_arm(_document(description))


def topic_from_xml(description: ET.Element) -> tuple[TopicProperties, Extras]:
    return models.topic_from_arm(_document(description))


def subscription_from_xml(description: ET.Element) -> SubscriptionProperties:
    return models.subscription_from_arm(_document(description))


# ------------------------------------------------------------------------------------------ rendering


def _address(endpoint: str, path: str | None) -> str | None:
    return None if path is None else f"sb://{endpoint}/{path}"


def _window(props: QueueProperties | TopicProperties) -> str:
    return format_duration(props.duplicate_detection_history_time_window)


def _times(runtime: Runtime) -> list[tuple[str, object]]:
    return [
        ("CreatedAt", atom.timestamp(runtime.created_at)),
        ("UpdatedAt", atom.timestamp(runtime.updated_at)),
        ("AccessedAt", atom.timestamp(runtime.accessed_at)),
    ]


def queue_xml(
    props: QueueProperties, extras: Extras, runtime: Runtime, endpoint: str, authorization: str, sku: Sku
) -> str:
    values: list[tuple[str, object]] = [
        ("LockDuration", format_duration(props.lock_duration)),
        ("MaxSizeInMegabytes", props.max_size_in_megabytes),
        ("RequiresDuplicateDetection", props.requires_duplicate_detection),
        ("RequiresSession", props.requires_session),
        ("DefaultMessageTimeToLive", format_duration(props.default_message_time_to_live)),
        ("DeadLetteringOnMessageExpiration", props.dead_lettering_on_message_expiration),
        (
            "DuplicateDetectionHistoryTimeWindow",
            format_duration(props.duplicate_detection_history_time_window),
        ),
        ("MaxDeliveryCount", props.max_delivery_count),
        ("EnableBatchedOperations", props.enable_batched_operations),
        ("SizeInBytes", runtime.size_in_bytes),
        ("MessageCount", sum(runtime.counts.values())),
        ("IsAnonymousAccessible", False),
        ("AuthorizationRules", Raw(authorization)),
        ("Status", props.status.value),
        ("ForwardTo", _address(endpoint, props.forward_to)),
        ("UserMetadata", props.user_metadata),
        *_times(runtime),
        ("SupportOrdering", True),
        ("CountDetails", atom.counts_xml(runtime.counts)),
        ("AutoDeleteOnIdle", format_duration(props.auto_delete_on_idle)),
        ("EnablePartitioning", extras.enable_partitioning),
        ("EntityAvailabilityStatus", "Available"),
        ("ForwardDeadLetteredMessagesTo", _address(endpoint, props.forward_dead_lettered_messages_to)),
        ("EnableExpress", extras.enable_express),
        *_premium_only(sku, props),
    ]
    return atom.description("QueueDescription", atom.elements(values))


def topic_xml(
    props: TopicProperties,
    extras: Extras,
    runtime: Runtime,
    filters: Mapping[str, int],
    authorization: str,
    sku: Sku,
) -> str:
    values: list[tuple[str, object]] = [
        ("DefaultMessageTimeToLive", format_duration(props.default_message_time_to_live)),
        ("MaxSizeInMegabytes", props.max_size_in_megabytes),
        ("RequiresDuplicateDetection", props.requires_duplicate_detection),
        (
            "DuplicateDetectionHistoryTimeWindow",
            format_duration(props.duplicate_detection_history_time_window),
        ),
        ("EnableBatchedOperations", props.enable_batched_operations),
        ("SizeInBytes", runtime.size_in_bytes),
        ("FilteringMessagesBeforePublishing", False),
        ("IsAnonymousAccessible", False),
        ("AuthorizationRules", Raw(authorization)),
        ("Status", props.status.value),
        *_times(runtime),
        ("SupportOrdering", props.support_ordering),
        ("CountDetails", atom.counts_xml(runtime.counts)),
        ("SubscriptionCount", filters["subscriptions"]),
        ("SqlFilterCount", filters["sql"]),
        ("CorrelationFilterCount", filters["correlation"]),
        ("AutoDeleteOnIdle", format_duration(props.auto_delete_on_idle)),
        ("EnablePartitioning", extras.enable_partitioning),
        ("EntityAvailabilityStatus", "Available"),
        ("EnableSubscriptionPartitioning", False),
        ("EnableExpress", extras.enable_express),
        ("UserMetadata", props.user_metadata),
        *_premium_only(sku, props),
    ]
    return atom.description("TopicDescription", atom.elements(values))


def subscription_xml(props: SubscriptionProperties, runtime: Runtime, endpoint: str) -> str:
    values: list[tuple[str, object]] = [
        ("LockDuration", format_duration(props.lock_duration)),
        ("RequiresSession", props.requires_session),
        ("DefaultMessageTimeToLive", format_duration(props.default_message_time_to_live)),
        ("DeadLetteringOnMessageExpiration", props.dead_lettering_on_message_expiration),
        ("DeadLetteringOnFilterEvaluationExceptions", props.dead_lettering_on_filter_evaluation_exceptions),
        ("MessageCount", sum(runtime.counts.values())),
        ("MaxDeliveryCount", props.max_delivery_count),
        ("EnableBatchedOperations", props.enable_batched_operations),
        ("Status", props.status.value),
        ("ForwardTo", _address(endpoint, props.forward_to)),
        *_times(runtime),
        ("CountDetails", atom.counts_xml(runtime.counts)),
        ("UserMetadata", props.user_metadata),
        ("ForwardDeadLetteredMessagesTo", _address(endpoint, props.forward_dead_lettered_messages_to)),
        ("AutoDeleteOnIdle", format_duration(props.auto_delete_on_idle)),
        ("EntityAvailabilityStatus", "Available"),
    ]
    return atom.description("SubscriptionDescription", atom.elements(values))
