"""AMQP 1.0 message sections (OASIS AMQP 1.0 part 3): a message's encoding split into its sections.

:func:`parse_message` keeps the parts of a message a relay never changes as their original encoding
(properties, application properties, body, footer) and decodes them alongside, so the emulator's broker
re-sends a client's bytes verbatim and re-encodes only the header and message annotations. Strict: a
section it cannot read is a :class:`~shared.amqp.encoding.codec.DecodeError` (the emulator answers
``amqp:decode-error``); :mod:`shared.amqp.encoding.application_properties` reads re-encodings this refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.amqp.encoding.codec import DecodeError, decode_value, encode_value, skip_value

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = (
    0x70,
    0x71,
    0x72,
    0x73,
    0x74,
)
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x75, 0x76, 0x77, 0x78

_SYMBOLIC_SECTIONS = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}


class HeaderField:
    DURABLE, PRIORITY, TTL, FIRST_ACQUIRER, DELIVERY_COUNT = 0, 1, 2, 3, 4


class PropertiesField:
    MESSAGE_ID, USER_ID, TO, SUBJECT, REPLY_TO, CORRELATION_ID, CONTENT_TYPE, CONTENT_ENCODING = range(8)
    ABSOLUTE_EXPIRY_TIME, CREATION_TIME, GROUP_ID, GROUP_SEQUENCE, REPLY_TO_GROUP_ID = range(8, 13)


@dataclass(slots=True)
class ParsedMessage:
    """One AMQP message split into its sections."""

    header: list[Any] | None = None
    # The sender's delivery annotations; a receiver gets them back with the broker's (the lock token).
    delivery_annotations: dict[Any, Any] = field(default_factory=dict)
    message_annotations: dict[Any, Any] = field(default_factory=dict)
    properties: list[Any] | None = None
    properties_raw: bytes = b""
    application_properties: dict[Any, Any] | None = None
    application_properties_raw: bytes = b""
    body_raw: bytes = b""
    footer_raw: bytes = b""

    def prop(self, index: int) -> Any:
        """Field ``index`` of the properties section, or None."""
        props = self.properties
        if props is None or index >= len(props):
            return None
        return props[index]

    def header_field(self, index: int) -> Any:
        """Field ``index`` of the header section, or None."""
        header = self.header
        if header is None or index >= len(header):
            return None
        return header[index]

    @property
    def size(self) -> int:
        """Size in bytes of the parts of the message that count against size limits."""
        return len(self.properties_raw) + len(self.application_properties_raw) + len(self.body_raw)


def section_code(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Return (section code, offset of the section value)."""
    if buf[pos] != 0x00:
        raise DecodeError(f"expected a message section at offset {pos}, found 0x{buf[pos]:02x}")
    descriptor, value_pos = decode_value(buf, pos + 1)
    if isinstance(descriptor, str):
        code = _SYMBOLIC_SECTIONS.get(str(descriptor))
        if code is None:
            raise DecodeError(f"unknown message section {descriptor!r} at offset {pos}")
        return code, value_pos
    if not isinstance(descriptor, int) or not HEADER <= descriptor <= FOOTER:
        raise DecodeError(f"unknown message section descriptor {descriptor!r} at offset {pos}")
    return descriptor, value_pos


def parse_message(payload: bytes | memoryview) -> ParsedMessage:
    """Split an encoded message into sections. Sections are accepted in any order (the SDK sends
    delivery-annotations last), and a message without a body is valid."""
    msg = ParsedMessage()
    buf = payload
    pos = 0
    end = len(buf)
    body_start = body_end = -1
    while pos < end:
        code, value_pos = section_code(buf, pos)
        if code in (DATA, AMQP_SEQUENCE, AMQP_VALUE):
            section_end = skip_value(buf, value_pos)
            if body_start < 0:
                body_start = pos
            elif body_end != pos:
                raise DecodeError(f"body sections are not contiguous at offset {pos}")
            body_end = section_end
        else:
            value, section_end = decode_value(buf, value_pos)
            if code == HEADER:
                msg.header = _expect(value, list, "header", pos)
            elif code == MESSAGE_ANNOTATIONS:
                msg.message_annotations = _expect(value, dict, "message-annotations", pos)
            elif code == PROPERTIES:
                msg.properties = _expect(value, list, "properties", pos)
                msg.properties_raw = bytes(buf[pos:section_end])
            elif code == APPLICATION_PROPERTIES:
                msg.application_properties = _expect(value, dict, "application-properties", pos)
                msg.application_properties_raw = bytes(buf[pos:section_end])
            elif code == FOOTER:
                msg.footer_raw = bytes(buf[pos:section_end])
            elif code == DELIVERY_ANNOTATIONS:
                msg.delivery_annotations = _expect(value, dict, "delivery-annotations", pos)
        pos = section_end
    if body_start >= 0:
        msg.body_raw = bytes(buf[body_start:body_end])
    return msg


def _expect(value: Any, kind: type, name: str, pos: int) -> Any:
    if value is None:
        return [] if kind is list else {}
    if not isinstance(value, kind):
        raise DecodeError(f"{name} section at offset {pos} is not a {kind.__name__}")
    return value


def section(code: int, value: Any) -> bytes:
    """Encode one section with its descriptor."""
    out = bytearray(b"\x00\x53")
    out.append(code)
    encode_value(out, value)
    return bytes(out)
