"""The emulator's own readings of a message's encoding: the inner messages of a batch a sender transfers, and
the body of a management request. The sections themselves are Busbar's one codec's
(:mod:`shared.amqp.encoding.sections`)."""

from __future__ import annotations

from typing import Any

from shared.amqp.encoding.codec import DecodeError, decode_value, skip_value
from shared.amqp.encoding.sections import AMQP_VALUE, DATA, ParsedMessage, section_code

BATCH_MESSAGE_FORMAT = 0x80013700


def split_batch(payload: bytes | memoryview) -> list[bytes]:
    """The inner messages of a batch (message format 0x80013700): one data section each."""
    messages: list[bytes] = []
    buf = payload
    pos = 0
    while pos < len(buf):
        code, value_pos = section_code(buf, pos)
        if code == DATA:
            inner, pos = decode_value(buf, value_pos)
            if not isinstance(inner, bytes):
                raise DecodeError(f"batch data section at offset {value_pos} is not binary")
            messages.append(inner)
        else:
            pos = skip_value(buf, value_pos)
    return messages


def decode_body_value(parsed: ParsedMessage) -> Any:
    """The amqp-value of a request body (management requests carry a map)."""
    body = parsed.body_raw
    if len(body) < 3 or body[2] != AMQP_VALUE:
        return None
    try:
        value, _ = decode_value(body, 3)
    except DecodeError:
        return None
    return value
