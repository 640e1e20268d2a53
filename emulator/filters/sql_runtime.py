"""Runtime helpers that compiled filters and actions call: value kinds, comparisons, arithmetic, LIKE,
case-insensitive property lookup. ``None`` is NULL / UNKNOWN throughout.

Type rules (C# implicit conversions, see tests for every decision): Int64 op Int64 -> Int64 (wrapping,
truncating division), any double -> double, string + string -> string, DateTime/TimeSpan arithmetic;
operands of kinds with no conversion between them give UNKNOWN, never an error.
"""

from __future__ import annotations

import math
import operator
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from emulator.filters.sql_lexer import FilterEvaluationError

# --- system properties ------------------------------------------------------------------------------
_SYSTEM_NAMES = (
    "ContentType", "CorrelationId", "DeadLetterSource", "DeliveryCount", "EnqueuedSequenceNumber",
    "EnqueuedTimeUtc", "ExpiresAtUtc", "ForcePersistence", "Label", "LockedUntilUtc", "LockToken",
    "MessageId", "PartitionKey", "ReplyTo", "ReplyToSessionId", "ScheduledEnqueueTimeUtc",
    "SequenceNumber", "SessionId", "Size", "State", "TimeToLive", "To", "ViaPartitionKey",
)  # fmt: skip
# Lower-case name -> canonical key of MessageProperties.system. Both the BrokeredMessage names (the
# documented ones) and the Azure.Messaging.ServiceBus names are accepted.
SYSTEM_PROPERTIES: dict[str, str] = {name.lower(): name for name in _SYSTEM_NAMES} | {
    "subject": "Label",
    "enqueuedtime": "EnqueuedTimeUtc",
    "scheduledenqueuetime": "ScheduledEnqueueTimeUtc",
    "expiresat": "ExpiresAtUtc",
    "lockeduntil": "LockedUntilUtc",
    "transactionpartitionkey": "ViaPartitionKey",
}

# --- runtime: value kinds and comparisons -----------------------------------------------------------
_KINDS: dict[type, str] = {
    str: "s",
    int: "n",
    float: "n",
    bool: "b",
    datetime: "d",
    timedelta: "t",
    uuid.UUID: "g",
    bytes: "y",
}
MISSING = object()
NO_ESCAPE = object()
_I64 = 2**63


def kind(v: Any) -> str:
    """s(tring) n(umber) b(oolean) d(atetime) t(imespan) g(uid) y (bytes) o(ther); ``v`` is not None."""
    k = _KINDS.get(v.__class__)
    if k is not None:
        return k
    for cls, name in _KINDS.items():  # subclasses (AMQP Symbol, Long, ...); bool cannot be subclassed
        if isinstance(v, cls):
            return name
    return "o"


def _utc(v: datetime) -> datetime:
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v  # naive datetimes are taken as UTC


def _comparable(a: Any, b: Any, ordered: bool) -> tuple[Any, Any] | None:
    """The operands made comparable, or None when the comparison is UNKNOWN."""
    if a is None or b is None:
        return None
    ka = kind(a)
    if ka != kind(b) or ka == "o" or (ordered and ka in "bgy"):
        return None
    if ka == "n":
        if isinstance(a, float) is not isinstance(b, float):
            return float(a), float(b)  # C#: long op double converts the long to double
    elif ka == "d":
        return _utc(a), _utc(b)
    return a, b


def _make_cmp(fn: Callable[[Any, Any], bool], ordered: bool) -> Callable[[Any, Any], bool | None]:
    def cmp(a: Any, b: Any) -> bool | None:
        pair = _comparable(a, b, ordered)
        return None if pair is None else fn(pair[0], pair[1])

    return cmp


COMPARE: dict[str, Callable[[Any, Any], bool | None]] = {
    "=": _make_cmp(operator.eq, False),
    "<>": _make_cmp(operator.ne, False),
    ">": _make_cmp(operator.gt, True),
    ">=": _make_cmp(operator.ge, True),
    "<": _make_cmp(operator.lt, True),
    "<=": _make_cmp(operator.le, True),
}
CMP_NAMES = {"=": "_eq", "<>": "_ne", ">": "_gt", ">=": "_ge", "<": "_lt", "<=": "_le"}
PYOP = {"=": "==", "<>": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
SWAP = {"=": "=", "<>": "<>", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _in(v: Any, items: tuple[Any, ...]) -> bool | None:
    """UNKNOWN only when ``v`` is NULL; otherwise whether some item compares equal (NULL items never do)."""
    if v is None:
        return None
    eq = COMPARE["="]
    return any(eq(v, item) is True for item in items)


# --- runtime: arithmetic ----------------------------------------------------------------------------
def _wrap(x: int) -> int:
    return x if -_I64 <= x < _I64 else (x + _I64) % (2 * _I64) - _I64  # C# unchecked Int64


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise FilterEvaluationError("integer division by zero")
    q = abs(a) // abs(b)
    return _wrap(q if (a < 0) == (b < 0) else -q)  # C# truncates toward zero


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise FilterEvaluationError("integer modulo by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r  # C#: the remainder has the sign of the dividend


def _float_div(a: float, b: float) -> float:
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    try:
        return a / b
    except OverflowError:
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _float_mod(a: float, b: float) -> float:
    if b == 0.0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return a if math.isinf(b) else math.fmod(a, b)


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: _wrap(a + b),
    "-": lambda a, b: _wrap(a - b),
    "*": lambda a, b: _wrap(a * b),
    "/": _int_div,
    "%": _int_mod,
}
_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _float_div, "%": _float_mod
}  # fmt: skip


def _other_arith(op: str, ka: str, kb: str, a: Any, b: Any) -> Any:
    if op == "+":
        if ka == kb == "s":
            return str(a) + str(b)
        if ka == "d" and kb == "t":
            return _utc(a) + b
        if ka == "t" and kb == "d":
            return _utc(b) + a
        if ka == kb == "t":
            return a + b
    elif op == "-":
        if ka == kb == "d":
            return _utc(a) - _utc(b)
        if ka == "d" and kb == "t":
            return _utc(a) - b
        if ka == kb == "t":
            return a - b
    return None


def _make_arith(op: str) -> Callable[[Any, Any], Any]:
    int_op, float_op = _INT_OPS[op], _FLOAT_OPS[op]

    def arith(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        ka, kb = kind(a), kind(b)
        if ka == kb == "n":
            if isinstance(a, float) or isinstance(b, float):
                return float_op(float(a), float(b))
            return int_op(a, b)
        try:
            return _other_arith(op, ka, kb, a, b)
        except OverflowError as exc:
            raise FilterEvaluationError(f"date/time arithmetic overflow in '{op}'") from exc

    return arith


def _neg(a: Any) -> Any:
    if a is None:
        return None
    k = kind(a)
    if k == "n":
        return -a if isinstance(a, float) else _wrap(-a)
    if k == "t":
        try:
            return -a
        except OverflowError as exc:
            raise FilterEvaluationError("TimeSpan negation overflow") from exc
    return None


def _pos(a: Any) -> Any:
    return a if a is not None and kind(a) in "nt" else None


# --- runtime: LIKE and property lookup --------------------------------------------------------------
def _like_items(pattern: str, escape: str | None) -> list[str]:
    """The pattern as items: one literal character each, or the markers "%%" (any run) and "__" (one)."""
    items: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 >= len(pattern):
                raise ValueError("the LIKE pattern ends with its escape character")
            items.append(pattern[i + 1])
            i += 2
            continue
        items.append("%%" if c == "%" else "__" if c == "_" else c)
        i += 1
    return items


@lru_cache(maxsize=1024)
def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The LIKE pattern as a regex for ``fullmatch`` (case-sensitive; '%' and '_' also match newlines)."""
    parts = [".*" if c == "%%" else "." if c == "__" else re.escape(c) for c in _like_items(pattern, escape)]
    return re.compile("".join(parts), re.DOTALL)


def like_plan(pattern: str, escape: str | None) -> tuple[str, str]:
    """How to match a constant pattern: ("eq"|"prefix"|"suffix"|"contains"|"any"|"regex", literal)."""
    items = _like_items(pattern, escape)
    if "__" in items:
        return "regex", ""
    runs: list[str | None] = []  # None is '%'
    for item in items:
        if item == "%%":
            if not runs or runs[-1] is not None:
                runs.append(None)
        elif runs and runs[-1] is not None:
            runs[-1] = str(runs[-1]) + item
        else:
            runs.append(item)
    shapes = {(): "eq", (None,): "any", ("s",): "eq", ("s", None): "prefix", (None, "s"): "suffix"}
    shape = tuple(None if r is None else "s" for r in runs)
    literal = next((r for r in runs if r is not None), "")
    if shape == (None, "s", None):
        return "contains", literal
    return shapes.get(shape, "regex"), literal


def _like(v: Any, pattern: Any, escape: Any) -> bool | None:
    if v is None or pattern is None or escape is None:
        return None
    if not isinstance(v, str) or not isinstance(pattern, str):
        return None
    if escape is NO_ESCAPE:
        escape = None
    elif not isinstance(escape, str):
        return None
    elif len(escape) != 1:
        raise FilterEvaluationError(f"the LIKE escape must be a single character, got {escape!r}")
    try:
        return like_regex(pattern, escape).fullmatch(v) is not None
    except ValueError as exc:
        raise FilterEvaluationError(str(exc)) from exc


def find_user_key(user: Mapping[Any, Any], name: str) -> Any:
    """The key of ``user`` naming ``name``: the exact spelling, else the first case-insensitive match."""
    if name in user:
        return name
    lname = name.lower()
    return next((k for k in user if isinstance(k, str) and k.lower() == lname), MISSING)


def _ci(user: Mapping[Any, Any], lname: str) -> Any:
    for k, v in user.items():
        if isinstance(k, str) and k.lower() == lname:
            return v
    return None


def _pget(user: Mapping[Any, Any], name: Any) -> Any:
    if not isinstance(name, str):
        return None
    key = find_user_key(user, name)
    return None if key is MISSING else user[key]


RUNTIME: dict[str, Any] = {
    **{CMP_NAMES[op]: fn for op, fn in COMPARE.items()},
    **{f"_a{ord(op)}": _make_arith(op) for op in "+-*/%"},
    "_in": _in, "_like": _like, "_NOESC": NO_ESCAPE, "_neg": _neg, "_pos": _pos, "_newid": uuid.uuid4,
    "_ci": _ci, "_pget": _pget, "_has": lambda u, n: find_user_key(u, n) is not MISSING, "_M": MISSING,
    "_FEE": FilterEvaluationError,
}  # fmt: skip
