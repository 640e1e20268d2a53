"""AMQP 1.0 frames and performatives (OASIS AMQP 1.0 part 2, transport; part 5, SASL).

Performatives are decoded to ``(code, fields)`` where ``fields`` is the positional field list; the index
constants below name the positions. Absent trailing fields read as ``None`` through :func:`field`.
Outgoing performatives are always encoded with a ``smallulong`` descriptor and ``doff = 2`` because the
SDK's parser accepts nothing else (amqp-dialect.md section 2.2).
"""

from __future__ import annotations

import struct
from typing import Any

from shared.amqp.encoding.codec import DecodeError, decode_value, encode_list
from shared.amqp.encoding.types import Described, Symbol, ULong

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FRAME_HEADER = struct.Struct(">IBBH")
FRAME_TYPE_AMQP = 0
FRAME_TYPE_SASL = 1
MIN_MAX_FRAME_SIZE = 512

# Performative descriptor codes.
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)
ERROR = 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = range(0x23, 0x28)
SOURCE, TARGET = 0x28, 0x29

PERFORMATIVE_NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer",
    DISPOSITION: "disposition", DETACH: "detach", END: "end", CLOSE: "close",
    SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init", SASL_CHALLENGE: "sasl-challenge",
    SASL_RESPONSE: "sasl-response", SASL_OUTCOME: "sasl-outcome",
}  # fmt: skip


class OpenField:
    CONTAINER_ID, HOSTNAME, MAX_FRAME_SIZE, CHANNEL_MAX, IDLE_TIME_OUT = 0, 1, 2, 3, 4
    COUNT = 10


class BeginField:
    REMOTE_CHANNEL, NEXT_OUTGOING_ID, INCOMING_WINDOW, OUTGOING_WINDOW, HANDLE_MAX = 0, 1, 2, 3, 4
    COUNT = 8


class AttachField:
    NAME, HANDLE, ROLE, SND_SETTLE_MODE, RCV_SETTLE_MODE, SOURCE, TARGET = 0, 1, 2, 3, 4, 5, 6
    UNSETTLED, INCOMPLETE_UNSETTLED, INITIAL_DELIVERY_COUNT, MAX_MESSAGE_SIZE = 7, 8, 9, 10
    OFFERED_CAPABILITIES, DESIRED_CAPABILITIES, PROPERTIES = 11, 12, 13
    COUNT = 14


class FlowField:
    NEXT_INCOMING_ID, INCOMING_WINDOW, NEXT_OUTGOING_ID, OUTGOING_WINDOW = 0, 1, 2, 3
    HANDLE, DELIVERY_COUNT, LINK_CREDIT, AVAILABLE, DRAIN, ECHO, PROPERTIES = 4, 5, 6, 7, 8, 9, 10
    COUNT = 11


class TransferField:
    HANDLE, DELIVERY_ID, DELIVERY_TAG, MESSAGE_FORMAT, SETTLED, MORE = 0, 1, 2, 3, 4, 5
    RCV_SETTLE_MODE, STATE, RESUME, ABORTED, BATCHABLE = 6, 7, 8, 9, 10


class DispositionField:
    ROLE, FIRST, LAST, SETTLED, STATE, BATCHABLE = 0, 1, 2, 3, 4, 5


class SourceField:
    ADDRESS, DURABLE, EXPIRY_POLICY, TIMEOUT, DYNAMIC, DYNAMIC_NODE_PROPERTIES = 0, 1, 2, 3, 4, 5
    DISTRIBUTION_MODE, FILTER, DEFAULT_OUTCOME, OUTCOMES, CAPABILITIES = 6, 7, 8, 9, 10


def field(fields: list[Any], index: int, default: Any = None) -> Any:
    """Field ``index`` of a decoded performative, or ``default`` when absent or null."""
    if index < len(fields):
        value = fields[index]
        if value is not None:
            return value
    return default


class FrameError(Exception):
    """A frame violates the framing rules; the connection must be closed with ``condition``."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


def decode_performative(body: bytes | memoryview) -> tuple[int, list[Any], int]:
    """Decode a frame body: ``(performative code, fields, offset of the payload)``."""
    try:
        value, end = decode_value(body, 0)
    except DecodeError as exc:
        raise FrameError("amqp:decode-error", f"malformed performative: {exc}") from exc
    except RecursionError:
        # Lists inside lists, thousands deep: no performative nests like that.
        raise FrameError("amqp:decode-error", "malformed performative: values nested too deeply") from None
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise FrameError("amqp:decode-error", "frame body is not a described list")
    code = value.descriptor
    if isinstance(code, Symbol):
        code = _SYMBOLIC_PERFORMATIVES.get(code)
    if not isinstance(code, int) or code not in PERFORMATIVE_NAMES:
        raise FrameError("amqp:decode-error", f"unknown performative descriptor {value.descriptor!r}")
    return code, value.value, end


_SYMBOLIC_PERFORMATIVES = {Symbol(f"amqp:{name}:list"): code for code, name in PERFORMATIVE_NAMES.items()}


def performative(code: int, fields: list[Any] | tuple[Any, ...]) -> bytearray:
    """Encode a performative body (descriptor and field list)."""
    out = bytearray(b"\x00\x53")
    out.append(code)
    encode_list(out, fields)
    return out


def frame(channel: int, code: int, fields: list[Any] | tuple[Any, ...], payload: bytes = b"") -> bytes:
    """Encode a whole AMQP frame with header, performative and optional payload."""
    body = performative(code, fields)
    size = 8 + len(body) + len(payload)
    return FRAME_HEADER.pack(size, 2, FRAME_TYPE_AMQP, channel) + body + payload


def sasl_frame(code: int, fields: list[Any] | tuple[Any, ...]) -> bytes:
    """Encode a SASL frame (always channel 0)."""
    body = performative(code, fields)
    return FRAME_HEADER.pack(8 + len(body), 2, FRAME_TYPE_SASL, 0) + body


def error(condition: str, description: str | None = None, info: dict[Any, Any] | None = None) -> Described:
    """An AMQP ``error`` composite."""
    return Described(ULong(ERROR), [Symbol(condition), description, info])


def outcome(code: int, fields: list[Any] | None = None) -> Described:
    """A delivery outcome composite (accepted, rejected, released, modified)."""
    return Described(ULong(code), fields or [])
