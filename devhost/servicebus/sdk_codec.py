"""Compatibility shim for devhost's host side: the AMQP types azure-servicebus 7.15 cannot read, so that a
message with a ``char`` or ``decimal`` application property does not stall devhost's trigger listeners.

A .NET sender puts ``char`` (0x73) and ``decimal`` (``System.Decimal``, as decimal128, 0x94) properties on
the wire without a second thought. azure-servicebus's AMQP stack (``_pyamqp``) has no decoder for char,
decimal32 (0x74) or decimal64 (0x84), and its decimal128 decoder reads the coefficient's 32-bit words as
decimal digits (it fails, or is wrong, for any coefficient past 2^32). A receive that meets such a message
raises ``Handler failed: 'NoneType' object is not callable`` and shuts the link down; a peek raises the
same: the console cannot list the queue and a re-drive run fails on the entity for as long as the message
is at its head, without naming it. Reporting the message without reading it is not possible either: the
SDK fails before it has a sequence number to report.

:func:`install` registers what is missing, in the SDK's own decoder table:

* decoders for char (as :class:`~shared.envelope.properties.Char`, so a copy sends a char again), decimal32
  and decimal64 (as ``Decimal``), and a decimal128 decoder that reads IEEE 754-2008 BID, the encoding .NET
  (Microsoft.Azure.Amqp) and the SDK's own ``encode_decimal128`` write.

Nothing is added to the SDK's encoders. Nothing the SDK already decodes changes, except decimal128, whose
decoder it replaces. Remove this module when azure-servicebus decodes these itself:
tests/devhost/servicebus/test_sdk_codec.py fails then.

Its one user is devhost, whose host side receives trigger messages with azure-servicebus where the Functions
host (.NET) reads every AMQP type; :mod:`devhost.servicebus.listener` installs it before any listener
receives. Busbar itself installs nothing into the SDK: the receivers and senders that meet chars and decimals
(the re-drive's, the console's, the hold queue's, the copies' sends) are Busbar's own, on python-qpid-proton
(:mod:`shared.amqp`), and its own new messages never carry a char (:func:`shared.envelope.sdk.sdk_value`
refuses one, naming it). It goes when devhost's listeners receive through that seam too.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

from azure.servicebus._pyamqp import _decode

from shared.amqp.encoding.types import decode_bid
from shared.envelope.properties import Char

_CHAR, _DECIMAL32, _DECIMAL64, _DECIMAL128 = 0x73, 0x74, 0x84, 0x94
# The widths of the decimal encodings (AMQP 1.0 part 1, 1.6.18-20).
_WIDTHS = {_DECIMAL32: 4, _DECIMAL64: 8, _DECIMAL128: 16}


def _fixed_decoder(code: int) -> Any:
    width = _WIDTHS[code]

    def decode(buffer: memoryview, _depth: int = 0) -> tuple[memoryview, Decimal]:
        return buffer[width:], decode_bid(bytes(buffer[:width]))

    return decode


def _decode_char(buffer: memoryview, _depth: int = 0) -> tuple[memoryview, Char]:
    # A char is one UTF-32BE code point.
    return buffer[4:], Char(chr(struct.unpack(">I", buffer[:4])[0]))


def missing_in_sdk() -> list[int]:
    """The constructors this shim adds that the SDK, as imported, has no decoder of its own for."""
    table = _decode._DECODE_BY_CONSTRUCTOR
    return [code for code in (_CHAR, _DECIMAL32, _DECIMAL64) if table[code] is None or _is_ours(table[code])]


def _is_ours(decoder: Any) -> bool:
    return getattr(decoder, "__module__", None) == __name__


def install() -> None:
    """Register the decoders (idempotent)."""
    table = _decode._DECODE_BY_CONSTRUCTOR
    for code in (_DECIMAL32, _DECIMAL64):
        if table[code] is None:
            table[code] = _fixed_decoder(code)
    if table[_CHAR] is None:
        table[_CHAR] = _decode_char
    table[_DECIMAL128] = _fixed_decoder(_DECIMAL128)


__all__ = ["decode_bid", "install", "missing_in_sdk"]
