"""A message body as the Functions host hands it to an untyped batch: read by Json.NET as ``object``, then
written back by Json.NET.

A Service Bus trigger with ``cardinality: many`` and no ``dataType`` makes the host request ``object[]``
(azure-functions-host ``GeneralScriptBindingProvider.GetRequestedType``: no data type is ``object``, made an
array for ``Many``). ``object`` is neither the message type, nor ``string``, nor a POCO the extension
converts (webjobs-sdk ``OpenType.Poco`` excludes ``System.Object``), so webjobs-sdk binds each element with
``PocoTriggerArgumentBinding``: the body as a string, then ``JsonConvert.DeserializeObject(text,
typeof(object))``, which fails the whole invocation for a body that is not JSON. The host then sends the
array with ``ToRpcDefault``: ``JsonConvert.SerializeObject(value, Formatting.None)``, a ``json`` TypedData.

So the worker sees each body as Json.NET rewrote it, with Json.NET's defaults: a string that looks like an
ISO-8601 date and time becomes a ``DateTime`` and is written back in Json.NET's own form (fractions of a
second without trailing zeros, ``Z`` kept, an offset converted to the machine's local time, which is UTC on
Azure's workers: azure-functions-python-worker#1401), numbers with a fraction or an exponent become doubles
(written with ``.0`` or ``E+NN``), others 64-bit integers (or big integers). An empty body is ``null``.

Known differences, all on input Json.NET is more lenient with than Python's ``json`` (single quotes,
comments, unquoted names, trailing commas: refused here, read by Json.NET) and the exact wording of
Json.NET's parse errors.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

# What JsonTextReader reads as a date (DateTimeUtils.TryParseDateTimeIso, DateTimeParser): 19 to 40
# characters, yyyy-MM-ddTHH:mm:ss, up to 7 digits of fraction, then Z, an offset or nothing.
_ISO_DATE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,7}))?(Z|[+-]\d{2}(?::?\d{2})?)?"
)
_MAX_TICK_DIGITS = 7


class JsonNetReaderError(ValueError):
    """The body is not JSON Json.NET reads (its ``JsonReaderException``)."""


def poco_binding_error(parser_message: str) -> str:
    """The message webjobs-sdk's ``PocoTriggerArgumentBinding`` fails a binding to ``object`` with."""
    return (
        "Binding parameters to complex objects (such as 'Object') uses Json.NET serialization. \n"
        "1. Bind the parameter type as 'string' instead of 'Object' to get the raw values and avoid JSON "
        "deserialization, or\n"
        f"2. Change the queue payload to be valid json. The JSON parser failed: {parser_message}\n"
    )


def json_net_roundtrip(text: str) -> str:
    """``JsonConvert.SerializeObject(JsonConvert.DeserializeObject(text, typeof(object)))``; raises
    :class:`JsonNetReaderError` where Json.NET's reader would."""
    if not text.strip():
        return "null"  # DeserializeObject of an empty text is null
    try:
        # strict=False: Json.NET reads control characters inside strings as they are.
        value = json.loads(text, parse_float=_DotnetDouble, parse_constant=_constant, strict=False)
    except json.JSONDecodeError as exc:
        raise JsonNetReaderError(_reader_message(text, exc)) from None
    return _write(value)


class _DotnetDouble(float):
    """A JSON number with a fraction or an exponent: Json.NET reads it as a double."""


def _constant(name: str) -> float:
    return _DotnetDouble(name)


def _reader_message(text: str, exc: json.JSONDecodeError) -> str:
    # Json.NET counts from line 0, position 0 until it has read a character.
    line, column = (0, 0) if exc.pos == 0 else (exc.lineno, exc.colno)
    if exc.pos < len(text):
        return (
            f"Unexpected character encountered while parsing value: {text[exc.pos]}. Path '', "
            f"line {line}, position {column}."
        )
    return f"Unexpected end when reading JSON. Path '', line {line}, position {column}."


def _write(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, _DotnetDouble):
        return _double(float(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        moment = _date(value)
        return _string(value) if moment is None else f'"{moment}"'
    if isinstance(value, list):
        return "[" + ",".join(_write(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{_write(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _double(value: float) -> str:
    """Json.NET's text for a double: .NET's shortest round-trip form (``E`` notation from 1E+15 and from
    1E-05 down), with ``.0`` when it would read as an integer; NaN and infinities as strings
    (``FloatFormatHandling.String``)."""
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    figures = "".join(str(d) for d in digits)
    assert isinstance(exponent, int)
    magnitude = len(figures) + exponent - 1  # the power of ten of the first figure
    prefix = "-" if sign else ""
    if -5 < magnitude < 15:
        if exponent >= 0:
            return f"{prefix}{figures}{'0' * exponent}.0"
        point = len(figures) + exponent
        if point > 0:
            return f"{prefix}{figures[:point]}.{figures[point:]}"
        return f"{prefix}0.{'0' * -point}{figures}"
    mantissa = figures[0] + (f".{figures[1:]}" if len(figures) > 1 else "")
    return f"{prefix}{mantissa}E{'+' if magnitude >= 0 else '-'}{abs(magnitude):02d}"


def _date(text: str) -> str | None:
    """Json.NET's text for a string it reads as a ``DateTime``; None when it stays a string."""
    if not 19 <= len(text) <= 40:
        return None
    match = _ISO_DATE.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    ticks = int((fraction or "").ljust(_MAX_TICK_DIGITS, "0"))
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError:
        return None  # not a date after all: it stays a string
    if zone and zone != "Z":
        # An offset: Json.NET makes it a local DateTime, the machine's zone, which is UTC on Azure's
        # workers; written with that offset.
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        moment -= sign * offset
        suffix = "+00:00"
    else:
        suffix = "Z" if zone == "Z" else ""
    figures = f"{ticks:07d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{figures}" if figures else "") + suffix


# Json.NET's default string escaping (StringEscapeHandling.Default): quotes, backslash, control characters
# (short forms where JSON has them, else \u00xx in lower case), and U+0085, U+2028, U+2029.
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_ESCAPED = re.compile('["\\\\\x00-\x1f\x85\u2028\u2029]')


def _string(text: str) -> str:
    return '"' + _ESCAPED.sub(lambda m: _SHORT.get(m.group(), f"\\u{ord(m.group()):04x}"), text) + '"'


__all__ = ["JsonNetReaderError", "json_net_roundtrip", "poco_binding_error"]
