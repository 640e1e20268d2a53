"""AMQP 1.0 type system codec (OASIS AMQP 1.0 part 1).

``decode_value`` reads one value at an offset and returns it with the offset after it; ``encode_value``
appends one value to a bytearray. Both are plain functions over a constructor-byte dispatch table because
they are on the hot path of every frame.

Malformed input raises :class:`DecodeError` with the offset and what was wrong; callers turn that into an
``amqp:decode-error`` for the peer.
"""

from __future__ import annotations

import decimal
import struct
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared.amqp.encoding.types import (
    Array,
    Byte,
    Char,
    Decimal,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    encode_bid128,
)


class DecodeError(ValueError):
    """The bytes are not a valid AMQP encoding."""


_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

Decoder = Callable[[bytes | memoryview, int], tuple[Any, int]]


def _need(buf: bytes | memoryview, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise DecodeError(f"truncated value at offset {pos}: need {n} bytes, have {len(buf) - pos}")


def _fixed(struct_: struct.Struct, wrap: Callable[[Any], Any]) -> Decoder:
    size = struct_.size

    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            _need(buf, pos, size)
        return wrap(struct_.unpack_from(buf, pos)[0]), pos + size

    return decode


def _const(value: Any) -> Decoder:
    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        return value, pos

    return decode


def _small_uint(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    _need(buf, pos, 1)
    return buf[pos], pos + 1


def _small_int(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    _need(buf, pos, 1)
    return _I8.unpack_from(buf, pos)[0], pos + 1


def _boolean(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    _need(buf, pos, 1)
    return buf[pos] != 0, pos + 1


def _char(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    _need(buf, pos, 4)
    try:
        return Char(chr(_U32.unpack_from(buf, pos)[0])), pos + 4
    except ValueError as exc:
        raise DecodeError(f"invalid char at offset {pos}") from exc


def _uuid(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    _need(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def _decimal(width: int) -> Decoder:
    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        _need(buf, pos, width)
        return Decimal(width, bytes(buf[pos : pos + width])), pos + width

    return decode


def _variable(size_struct: struct.Struct | None, kind: str) -> Decoder:
    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        if size_struct is None:
            _need(buf, pos, 1)
            size = buf[pos]
            pos += 1
        else:
            _need(buf, pos, 4)
            size = size_struct.unpack_from(buf, pos)[0]
            pos += 4
        end = pos + size
        if end > len(buf):
            raise DecodeError(
                f"truncated {kind} at offset {pos}: declares {size} bytes, have {len(buf) - pos}"
            )
        raw = bytes(buf[pos:end])
        if kind == "binary":
            return raw, end
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in {kind} at offset {pos}") from exc
        return (Symbol.as_sent(text) if kind == "symbol" else text), end

    return decode


def _compound(wide: bool, kind: str) -> Decoder:
    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        if wide:
            _need(buf, pos, 8)
            size, count = _U32.unpack_from(buf, pos)[0], _U32.unpack_from(buf, pos + 4)[0]
            start = pos + 4
            pos += 8
        else:
            _need(buf, pos, 2)
            size, count = buf[pos], buf[pos + 1]
            start = pos + 1
            pos += 2
        end = start + size
        if end > len(buf):
            raise DecodeError(f"truncated {kind} at offset {start}: declares {size} bytes")
        # Every item takes at least one byte: a count the bytes cannot hold is refused before any work,
        # so a tiny frame cannot make the broker loop or allocate for billions of items.
        if count > end - pos:
            raise DecodeError(
                f"{kind} at offset {start} declares {count} items but holds only {max(end - pos, 0)} bytes"
            )
        items: list[Any] = []
        for _ in range(count):
            if pos >= end:
                raise DecodeError(f"{kind} at offset {start} has fewer items than its count {count}")
            value, pos = decode_value(buf, pos)
            items.append(value)
        if pos != end:
            raise DecodeError(f"{kind} at offset {start} size does not match its items")
        if kind == "list":
            return items, end
        if count % 2:
            raise DecodeError(f"map at offset {start} has an odd number of items")
        result: dict[Any, Any] = {}
        for i in range(0, count, 2):
            key = items[i]
            try:
                result[key] = items[i + 1]
            except TypeError as exc:
                raise DecodeError(f"map at offset {start} has an unhashable key") from exc
        return result, end

    return decode


def _array(wide: bool) -> Decoder:
    def decode(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
        if wide:
            _need(buf, pos, 8)
            size, count = _U32.unpack_from(buf, pos)[0], _U32.unpack_from(buf, pos + 4)[0]
            start = pos + 4
            pos += 8
        else:
            _need(buf, pos, 2)
            size, count = buf[pos], buf[pos + 1]
            start = pos + 1
            pos += 2
        end = start + size
        if end > len(buf):
            raise DecodeError(f"truncated array at offset {start}")
        _need(buf, pos, 1)
        code = buf[pos]
        pos += 1
        descriptor = None
        if code == 0x00:
            descriptor, pos = decode_value(buf, pos)
            _need(buf, pos, 1)
            code = buf[pos]
            pos += 1
        element = _DECODERS.get(code)
        if element is None:
            raise DecodeError(f"unknown array element constructor 0x{code:02x} at offset {pos - 1}")
        # Bound the count by the bytes present (zero-width elements such as null by the array's size)
        # before building anything.
        width = max(_FIXED_WIDTH.get(code, 1), 1)
        if count * width > max(end - pos, 0) and (code not in _ZERO_WIDTH or count > size):
            raise DecodeError(
                f"array at offset {start} declares {count} elements but holds only {max(end - pos, 0)} bytes"
            )
        items = []
        for _ in range(count):
            value, pos = element(buf, pos)
            items.append(value if descriptor is None else Described(descriptor, value))
        if pos != end:
            raise DecodeError(f"array at offset {start} size does not match its items")
        return Array(code, tuple(items)), end

    return decode


def _described(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    descriptor, pos = decode_value(buf, pos)
    value, pos = decode_value(buf, pos)
    return Described(descriptor, value), pos


_DECODERS: dict[int, Decoder] = {
    0x40: _const(None),
    0x41: _const(True),
    0x42: _const(False),
    0x56: _boolean,
    0x50: _small_uint,
    0x60: _fixed(_U16, int),
    0x70: _fixed(_U32, int),
    0x52: _small_uint,
    0x43: _const(0),
    0x80: _fixed(_U64, int),
    0x53: _small_uint,
    0x44: _const(0),
    0x51: _small_int,
    0x61: _fixed(_I16, int),
    0x71: _fixed(_I32, int),
    0x54: _small_int,
    0x81: _fixed(_I64, int),
    0x55: _small_int,
    0x72: _fixed(_F32, float),
    0x82: _fixed(_F64, float),
    0x74: _decimal(4),
    0x84: _decimal(8),
    0x94: _decimal(16),
    0x73: _char,
    0x83: _fixed(_I64, Timestamp),
    0x98: _uuid,
    0xA0: _variable(None, "binary"),
    0xB0: _variable(_U32, "binary"),
    0xA1: _variable(None, "string"),
    0xB1: _variable(_U32, "string"),
    0xA3: _variable(None, "symbol"),
    0xB3: _variable(_U32, "symbol"),
    0x45: _const([]),
    0xC0: _compound(False, "list"),
    0xD0: _compound(True, "list"),
    0xC1: _compound(False, "map"),
    0xD1: _compound(True, "map"),
    0xE0: _array(False),
    0xF0: _array(True),
    0x00: _described,
}


def decode_value(buf: bytes | memoryview, pos: int = 0) -> tuple[Any, int]:
    """Decode one AMQP value at ``pos``; return it and the offset just after it."""
    if pos >= len(buf):
        raise DecodeError(f"truncated input: expected a value at offset {pos}")
    code = buf[pos]
    decoder = _DECODERS.get(code)
    if decoder is None:
        raise DecodeError(f"unknown constructor 0x{code:02x} at offset {pos}")
    value, end = decoder(buf, pos + 1)
    if code == 0x45:  # list0: a fresh list each time, never the shared constant
        return [], end
    return value, end


# Sizes of fixed-width encodings, for skipping values without building them.
_FIXED_WIDTH = {
    0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
    0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
    0x60: 2, 0x61: 2,
    0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
    0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
    0x94: 16, 0x98: 16,
}  # fmt: skip


_ZERO_WIDTH = frozenset(code for code, width in _FIXED_WIDTH.items() if width == 0)


def skip_value(buf: bytes | memoryview, pos: int) -> int:
    """Return the offset just after the value at ``pos`` without decoding its contents."""
    if pos >= len(buf):
        raise DecodeError(f"truncated input: expected a value at offset {pos}")
    code = buf[pos]
    pos += 1
    width = _FIXED_WIDTH.get(code)
    if width is not None:
        end = pos + width
    elif code in (0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0):
        _need(buf, pos, 1)
        end = pos + 1 + buf[pos]
    elif code in (0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0):
        _need(buf, pos, 4)
        end = pos + 4 + _U32.unpack_from(buf, pos)[0]
    elif code == 0x00:
        return skip_value(buf, skip_value(buf, pos))
    else:
        raise DecodeError(f"unknown constructor 0x{code:02x} at offset {pos - 1}")
    if end > len(buf):
        raise DecodeError(f"truncated value at offset {pos - 1}")
    return end


# ----------------------------------------------------------------------------------------------- encoding


def _encode_int(out: bytearray, value: int) -> None:
    # A plain Python int is sent as AMQP int when it fits (what the SDK does), long otherwise.
    if -128 <= value <= 127:
        out += b"\x54" + _I8.pack(value)
    elif -(2**31) <= value < 2**31:
        out += b"\x71" + _I32.pack(value)
    else:
        out += b"\x81" + _I64.pack(value)


def _encode_variable(out: bytearray, raw: bytes, small: int, large: int) -> None:
    if len(raw) < 256:
        out.append(small)
        out.append(len(raw))
    else:
        out.append(large)
        out += _U32.pack(len(raw))
    out += raw


def _encode_compound(out: bytearray, body: bytes | bytearray, count: int, small: int, large: int) -> None:
    if len(body) < 255 and count < 256:
        out.append(small)
        out.append(len(body) + 1)
        out.append(count)
    else:
        out.append(large)
        out += _U32.pack(len(body) + 4)
        out += _U32.pack(count)
    out += body


def encode_list(out: bytearray, items: list[Any] | tuple[Any, ...]) -> None:
    """Append an AMQP list."""
    if not items:
        out.append(0x45)
        return
    body = bytearray()
    for item in items:
        encode_value(body, item)
    _encode_compound(out, body, len(items), 0xC0, 0xD0)


def encode_map(out: bytearray, mapping: dict[Any, Any]) -> None:
    """Append an AMQP map."""
    body = bytearray()
    for key, value in mapping.items():
        encode_value(body, key)
        encode_value(body, value)
    _encode_compound(out, body, len(mapping) * 2, 0xC1, 0xD1)


def _encode_element(out: bytearray, code: int, value: Any) -> None:
    """Encode an array element without its constructor."""
    tmp = bytearray()
    encode_as(tmp, code, value)
    out += tmp[1:]


# Array elements share one constructor, so compact encodings are widened to their fixed-size forms.
_WIDE = {
    0xA0: 0xB0,
    0xA1: 0xB1,
    0xA3: 0xB3,
    0x43: 0x70,
    0x52: 0x70,
    0x44: 0x80,
    0x53: 0x80,
    0x54: 0x71,
    0x55: 0x81,
}


def encode_array(out: bytearray, array: Array) -> None:
    """Append an AMQP array; elements are encoded with ``array.code`` (widened where it is compact)."""
    code = _WIDE.get(array.code, array.code)
    body = bytearray()
    body.append(code)
    for item in array.items:
        _encode_element(body, code, item)
    count = len(array.items)
    if len(body) < 255 and count < 256:
        out.append(0xE0)
        out.append(len(body) + 1)
        out.append(count)
    else:
        out.append(0xF0)
        out += _U32.pack(len(body) + 4)
        out += _U32.pack(count)
    out += body


def encode_as(out: bytearray, code: int, value: Any) -> None:
    """Encode ``value`` with the exact wide constructor ``code`` (used for array elements)."""
    if code == 0x98:
        out.append(0x98)
        out += value.bytes
    elif code == 0x83:
        out.append(0x83)
        out += _I64.pack(int(value))
    elif code == 0x81:
        out.append(0x81)
        out += _I64.pack(int(value))
    elif code == 0x80:
        out.append(0x80)
        out += _U64.pack(int(value))
    elif code == 0x71:
        out.append(0x71)
        out += _I32.pack(int(value))
    elif code == 0x70:
        out.append(0x70)
        out += _U32.pack(int(value))
    elif code in (0xB1, 0xB3, 0xB0):
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
        out.append(code)
        out += _U32.pack(len(raw))
        out += raw
    elif code == 0xD1:
        body = bytearray()
        for k, v in value.items():
            encode_value(body, k)
            encode_value(body, v)
        out.append(0xD1)
        out += _U32.pack(len(body) + 4)
        out += _U32.pack(len(value) * 2)
        out += body
    else:
        raise ValueError(f"cannot encode array elements with constructor 0x{code:02x}")


def encode_value(out: bytearray, value: Any) -> None:
    """Append the AMQP encoding of ``value``; the Python type (or wrapper type) chooses the AMQP type."""
    if value is None:
        out.append(0x40)
    elif value is True:
        out.append(0x41)
    elif value is False:
        out.append(0x42)
    elif isinstance(value, int):
        cls = type(value)
        if cls is int:
            _encode_int(out, value)
        elif cls is Int:
            out += b"\x71" + _I32.pack(value)
        elif cls is UInt:
            if value == 0:
                out.append(0x43)
            elif value < 256:
                out += b"\x52" + bytes((value,))
            else:
                out += b"\x70" + _U32.pack(value)
        elif cls is ULong:
            if value == 0:
                out.append(0x44)
            elif value < 256:
                out += b"\x53" + bytes((value,))
            else:
                out += b"\x80" + _U64.pack(value)
        elif cls is Long:
            out += b"\x81" + _I64.pack(value)
        elif cls is Timestamp:
            out += b"\x83" + _I64.pack(value)
        elif cls is UByte:
            out += b"\x50" + bytes((value,))
        elif cls is UShort:
            out += b"\x60" + _U16.pack(value)
        elif cls is Byte:
            out += b"\x51" + _I8.pack(value)
        elif cls is Short:
            out += b"\x61" + _I16.pack(value)
        else:
            _encode_int(out, int(value))
    elif isinstance(value, str):
        if isinstance(value, Symbol):
            _encode_variable(out, value.encode("ascii"), 0xA3, 0xB3)
        elif isinstance(value, Char):
            out += b"\x73" + _U32.pack(ord(value))
        else:
            _encode_variable(out, value.encode("utf-8"), 0xA1, 0xB1)
    elif isinstance(value, bytes | bytearray | memoryview):
        _encode_variable(out, bytes(value), 0xA0, 0xB0)
    elif isinstance(value, float):
        if isinstance(value, Float):
            out += b"\x72" + _F32.pack(value)
        else:
            out += b"\x82" + _F64.pack(value)
    elif isinstance(value, dict):
        encode_map(out, value)
    elif isinstance(value, list | tuple):
        encode_list(out, value)
    elif isinstance(value, Described):
        out.append(0x00)
        encode_value(out, value.descriptor)
        encode_value(out, value.value)
    elif isinstance(value, uuid.UUID):
        out.append(0x98)
        out += value.bytes
    elif isinstance(value, Array):
        encode_array(out, value)
    elif isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        out += b"\x83" + _I64.pack(int(moment.timestamp() * 1000))
    elif isinstance(value, Decimal):
        out.append({4: 0x74, 8: 0x84, 16: 0x94}[value.width])
        out += value.raw
    elif isinstance(value, decimal.Decimal):  # a number (a .NET System.Decimal): decimal128
        out.append(0x94)
        out += encode_bid128(value)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as AMQP")


def encode(value: Any) -> bytes:
    """Return the AMQP encoding of one value."""
    out = bytearray()
    encode_value(out, value)
    return bytes(out)
