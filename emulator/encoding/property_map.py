"""Editing an application-properties section without re-encoding the entries it leaves alone.

The broker adds and changes application properties (``DeadLetterReason`` when it dead-letters, a rule
action's SET and REMOVE, ``RuleName``). Azure changes only those entries: every other property keeps the
AMQP type its sender gave it (a ushort stays a ushort, a ulong past 2^63 stays a ulong). Decoding the
section to Python values and encoding it again would not: the decoder returns plain ints, which encode as
int or long. So an edit splices: untouched entries are copied as their original bytes, changed entries are
re-encoded in place, new ones are appended.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from shared.amqp.encoding.codec import DecodeError, decode_value, encode_value, skip_value
from shared.amqp.encoding.sections import APPLICATION_PROPERTIES

_SECTION_PREFIX = b"\x00\x53" + bytes((APPLICATION_PROPERTIES,))
_MAP8, _MAP32, _NULL = 0xC1, 0xD1, 0x40


def raw_entries(raw_section: bytes) -> list[tuple[Any, bytes]]:
    """Each entry of an encoded application-properties section: (decoded key, key and value bytes).

    ``raw_section`` is the whole section, descriptor included, as :func:`parse_message` keeps it; an empty
    section (no application properties) has no entries."""
    if not raw_section:
        return []
    if raw_section[:1] != b"\x00":
        raise DecodeError("application-properties section does not start with a descriptor")
    descriptor, pos = decode_value(raw_section, 1)
    code = raw_section[pos]
    if code == _NULL:
        return []
    if code == _MAP8:
        count, pos = raw_section[pos + 2], pos + 3
    elif code == _MAP32:
        count, pos = int.from_bytes(raw_section[pos + 5 : pos + 9], "big"), pos + 9
    else:
        raise DecodeError(f"application-properties section {descriptor!r} is not a map (0x{code:02x})")
    entries: list[tuple[Any, bytes]] = []
    for _ in range(count // 2):
        key, value_pos = decode_value(raw_section, pos)
        end = skip_value(raw_section, value_pos)
        entries.append((key, bytes(raw_section[pos:end])))
        pos = end
    return entries


def splice_application_properties(
    raw_section: bytes, updates: Mapping[Any, Any], removals: Collection[Any] = ()
) -> bytes:
    """``raw_section`` with ``updates`` set (in place when the key is there, appended when not) and the
    keys in ``removals`` dropped; every other entry keeps its original bytes. No entries: no section."""
    body = bytearray()
    count = 0
    pending = dict(updates)
    for key, raw in raw_entries(raw_section):
        if key in removals:
            continue
        if key in pending:
            encode_value(body, key)
            encode_value(body, pending.pop(key))
        else:
            body += raw
        count += 2
    for key, value in pending.items():
        encode_value(body, key)
        encode_value(body, value)
        count += 2
    if not count:
        return b""
    out = bytearray(_SECTION_PREFIX)
    _encode_map_body(out, bytes(body), count)
    return bytes(out)


def _encode_map_body(out: bytearray, body: bytes, count: int) -> None:
    # The same size rule as encode_map: the compact form while size and count fit in a byte.
    if len(body) < 255 and count < 256:
        out += bytes((_MAP8, len(body) + 1, count))
    else:
        out.append(_MAP32)
        out += (len(body) + 4).to_bytes(4, "big") + count.to_bytes(4, "big")
    out += body
