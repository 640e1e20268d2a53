"""The AMQP bytes a message arrived with, kept for the SDK-type triggers that must pass them on.

The host's Service Bus extension gives an SDK-type trigger the message's own AMQP encoding
(``ServiceBusReceivedMessage.GetRawAmqpMessage().ToBytes()`` in ``ServiceBusTriggerBindingStrategy``): the
.NET AMQP stack keeps each value's type, so a ``long``, a timestamp, a binary or a symbol reaches the
worker as the sender wrote it. azure-servicebus decodes a transfer into plain Python values (a long, a
timestamp and an int all become ``int``) and drops the bytes, so devhost keeps them itself: a receiver
marked with :func:`keep_payloads` records each message's payload on receipt, keyed by its delivery tag
(the lock token's bytes), and :func:`take_payload` hands it to the message.

The SDK's receive links assemble a message in ``ReceiverLink._incoming_transfer`` (``_pyamqp/receiver.py``
and ``_pyamqp/aio/_receiver_async.py``): frames with ``more`` set are appended to ``_received_payload``,
the last one completes it. :func:`install` wraps that method; the payload is read before the SDK clears
it. tests/devhost/servicebus/test_amqp_payload.py fails if the SDK moves any of this.
"""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from typing import Any, cast

from azure.servicebus._pyamqp import receiver as sync_receiver
from azure.servicebus._pyamqp.aio import _receiver_async as async_receiver

MAX_KEPT = 4096
"""Payloads a receiver keeps unclaimed (prefetched messages a closing receiver never hands out); the oldest
go first."""

_STORE = "_devhost_amqp_payloads"
_ON_MESSAGE = "_devhost_amqp_payload"
_MISSING = object()
_WRAPPED = "__devhost_payload__"


def keep_payloads[R](receiver: R) -> R:
    """``receiver`` (an azure-servicebus receiver, sync or aio), marked so that the payload of each message
    it receives is kept for :func:`take_payload`."""
    setattr(receiver, _STORE, OrderedDict())
    return receiver


def take_payload(message: Any) -> bytes | None:
    """The AMQP bytes ``message`` (a ``ServiceBusReceivedMessage``) arrived with; ``None`` when its receiver
    was not marked. The receiver hands them over once and the message keeps them from then on, so every
    reader of one message (its trigger metadata, its ``model_binding_data``) gets the same bytes."""
    kept = getattr(message, _ON_MESSAGE, _MISSING)
    if kept is not _MISSING:
        return cast(bytes | None, kept)
    store = getattr(getattr(message, "_receiver", None), _STORE, None)
    tag = getattr(message, "_delivery_tag", None)
    if store is None or tag is None:
        return None
    payload: bytes | None = store.pop(bytes(tag), None)
    with contextlib.suppress(AttributeError):  # a message class without a __dict__: read once only
        setattr(message, _ON_MESSAGE, payload)
    return payload


def link_receiver(link: Any) -> Any:
    """The receiver a receive link delivers to (``None`` for any other link): the SDK hands its receive
    link ``functools.partial(<transport>.enhanced_message_received, receiver)`` (a management or ``$cbs``
    link a ``ManagementLink`` method)."""
    on_transfer = getattr(link, "_on_transfer", None)
    arguments = on_transfer.args if isinstance(on_transfer, functools.partial) else ()
    return arguments[0] if arguments else None


def _store_of(link: Any) -> OrderedDict[bytes, bytes] | None:
    store = getattr(link_receiver(link), _STORE, None)
    return store if isinstance(store, OrderedDict) else None


def _record(link: Any, frame: Any) -> None:
    store = _store_of(link)
    if store is None or frame[5]:  # not a marked receiver, or more frames of this delivery follow
        return
    pending = link._received_payload
    payload = bytes(pending) + bytes(frame[11]) if pending else bytes(frame[11])
    # The delivery's first transfer carries its tag (the SDK keeps that frame as ``_first_frame``).
    first = frame if frame[1] is not None else link._first_frame
    if first is None or first[2] is None:
        return
    store[bytes(first[2])] = payload
    while len(store) > MAX_KEPT:
        store.popitem(last=False)


def _recording(incoming_transfer: Any) -> Any:
    @functools.wraps(incoming_transfer)
    def record(link: Any, frame: Any) -> Any:
        _record(link, frame)
        return incoming_transfer(link, frame)

    setattr(record, _WRAPPED, incoming_transfer)
    return record


def _recording_async(incoming_transfer: Any) -> Any:
    @functools.wraps(incoming_transfer)
    async def record(link: Any, frame: Any) -> Any:
        _record(link, frame)
        return await incoming_transfer(link, frame)

    setattr(record, _WRAPPED, incoming_transfer)
    return record


def install() -> None:
    """Wrap the SDK's receive links (sync and aio) once; only :func:`keep_payloads` receivers keep bytes."""
    for module, wrapper in ((sync_receiver, _recording), (async_receiver, _recording_async)):
        current = module.ReceiverLink._incoming_transfer
        if not hasattr(current, _WRAPPED):
            module.ReceiverLink._incoming_transfer = wrapper(current)
