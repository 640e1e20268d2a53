"""Property-based check of the SQL filter engine against an independent reference evaluator.

Hypothesis generates expression trees (rendered to SQL text) and messages, including NULLs, missing
properties, type mismatches, NaN and Int64 edge values. The reference below is a plain tree-walking
interpreter written from the documented semantics and the decisions pinned in test_sql_filter.py; it
shares no code with the engine (only the public API is imported). It evaluates every operand eagerly
and reports an evaluation error if any operand fails; the engine may short-circuit, so when the
reference reports an error the engine may either raise FilterEvaluationError or decide without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from emulator.filters.sql import FilterEvaluationError, MessageProperties, SqlSyntaxError, compile_filter

# --- the reference interpreter ----------------------------------------------------------------------------
KNOWN_SYSTEM = {"label": "Label", "subject": "Label", "sequencenumber": "SequenceNumber", "to": "To"}


class RefError(Exception):
    """An evaluation error (Azure's FilterException)."""


def wrap64(x: int) -> int:
    return ctypes.c_int64(x & 0xFFFFFFFFFFFFFFFF).value


def type_of(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "other"


def lookup_user(user: dict[str, Any], name: str) -> Any:
    if name in user:
        return user[name]
    for key, value in user.items():
        if key.lower() == name.lower():
            return value
    return None


def ref_value(node: tuple[Any, ...], msg: MessageProperties) -> Any:
    tag = node[0]
    if tag == "const":
        return node[1]
    if tag == "user":
        return lookup_user(msg.user, node[1])
    if tag == "sys":
        return msg.system.get(KNOWN_SYSTEM[node[1].lower()])
    if tag == "p":
        name = ref_value(node[1], msg)
        return lookup_user(msg.user, name) if isinstance(name, str) else None
    if tag in ("neg", "pos"):
        v = ref_value(node[1], msg)
        if type_of(v) != "number":
            return None
        if tag == "pos":
            return v
        return -v if isinstance(v, float) else wrap64(-v)
    if tag == "arith":
        return ref_arith(node[1], ref_value(node[2], msg), ref_value(node[3], msg))
    raise AssertionError(tag)


def trunc_div(a: int, b: int) -> int:
    q = a // b
    if q < 0 and q * b != a:
        q += 1  # floor division rounded toward zero
    return q


def ref_arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    ta, tb = type_of(a), type_of(b)
    if ta == tb == "string" and op == "+":
        return a + b
    if ta != "number" or tb != "number":
        return None
    if isinstance(a, int) and isinstance(b, int):
        if op in "/%" and b == 0:
            raise RefError("division by zero")
        if op == "/":
            return wrap64(trunc_div(a, b))
        if op == "%":
            return a - b * trunc_div(a, b)
        return wrap64({"+": a + b, "-": a - b, "*": a * b}[op])
    x, y = float(a), float(b)
    if op == "/":
        if y == 0:
            return math.nan if x == 0 or math.isnan(x) else math.copysign(math.inf, x) * math.copysign(1, y)
        return x / y
    if op == "%":
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0:
            return math.nan
        return x if math.isinf(y) else math.fmod(x, y)
    return {"+": x + y, "-": x - y, "*": x * y}[op]


def ref_compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None or type_of(a) != type_of(b) or type_of(a) == "other":
        return None
    if type_of(a) == "bool" and op not in ("=", "<>"):
        return None
    if type_of(a) == "number" and (isinstance(a, float) or isinstance(b, float)):
        a, b = float(a), float(b)
    result: bool = {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    return result


def like_matches(text: str, pattern: list[tuple[str, str]]) -> bool:
    """Dynamic programming over pattern items ("lit", c) / ("any", "") / ("one", "")."""
    reachable = {0}
    for kind, char in pattern:
        step: set[int] = set()
        for i in reachable:
            if kind == "any":
                step.update(range(i, len(text) + 1))
            elif i < len(text) and (kind == "one" or text[i] == char):
                step.add(i + 1)
        reachable = step
    return len(text) in reachable


def pattern_items(pattern: str, escape: str | None) -> list[tuple[str, str]]:
    items, i = [], 0
    while i < len(pattern):
        if pattern[i] == escape:
            items.append(("lit", pattern[i + 1]))
            i += 2
        else:
            items.append({"%": ("any", ""), "_": ("one", "")}.get(pattern[i], ("lit", pattern[i])))
            i += 1
    return items


def ref_cond(node: tuple[Any, ...], msg: MessageProperties) -> bool | None:
    tag = node[0]
    if tag == "and":
        left, right = ref_cond(node[1], msg), ref_cond(node[2], msg)
        return False if False in (left, right) else None if None in (left, right) else True
    if tag == "or":
        left, right = ref_cond(node[1], msg), ref_cond(node[2], msg)
        return True if True in (left, right) else None if None in (left, right) else False
    if tag == "not":
        inner = ref_cond(node[1], msg)
        return None if inner is None else not inner
    if tag == "cmp":
        return ref_compare(node[1], ref_value(node[2], msg), ref_value(node[3], msg))
    if tag == "isnull":
        negated: bool = node[2]
        return (ref_value(node[1], msg) is None) != negated
    if tag == "exists":
        prop = node[1]
        if prop[0] == "sys":
            return msg.system.get(KNOWN_SYSTEM[prop[1].lower()]) is not None
        return any(key.lower() == prop[1].lower() for key in msg.user)
    if tag == "in":
        v, items = ref_value(node[1], msg), [ref_value(item, msg) for item in node[2]]
        result = None if v is None else any(ref_compare("=", v, item) is True for item in items)
        return result if result is None or not node[3] else not result
    if tag == "like":
        v, pattern = ref_value(node[1], msg), ref_value(node[2], msg)
        if not isinstance(v, str) or not isinstance(pattern, str):
            return None
        matched = like_matches(v, pattern_items(pattern, node[3]))
        not_like: bool = node[4]
        return matched != not_like
    raise AssertionError(tag)


def mentions_unknown_system_property(node: Any) -> bool:
    if isinstance(node, tuple) and node and node[0] == "sys":
        return node[1].lower() not in KNOWN_SYSTEM
    return isinstance(node, tuple) and any(mentions_unknown_system_property(child) for child in node)


# --- rendering trees as SQL -------------------------------------------------------------------------------
def sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def render_const(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return sql_string(v)
    text = repr(v)
    return f"({text})" if text.startswith("-") else text


def render_name(name: str, form: int) -> str:
    if form == 0 and name.isalpha() and name.lower() not in ("in", "is", "or", "and", "not", "like"):
        return name
    if form == 1:
        return '"' + name.replace('"', '""') + '"'
    return "[" + name.replace("]", "]]") + "]"


def render(node: tuple[Any, ...]) -> str:
    tag = node[0]
    if tag == "const":
        return render_const(node[1])
    if tag == "user":
        name = render_name(node[1], node[2])
        return f"user.{name}" if node[3] else name
    if tag == "sys":
        return f"sys.{node[1]}"
    if tag == "p":
        return f"p({render(node[1])})"
    if tag == "neg":
        return f"(-{render(node[1])})"
    if tag == "pos":
        return f"(+{render(node[1])})"
    if tag == "arith":
        return f"({render(node[2])} {node[1]} {render(node[3])})"
    if tag in ("and", "or"):
        return f"({render(node[1])} {tag.upper()} {render(node[2])})"
    if tag == "not":
        return f"(NOT {render(node[1])})"
    if tag == "cmp":
        op = "!=" if node[1] == "<>" and node[4] else node[1]
        return f"({render(node[2])} {op} {render(node[3])})"
    if tag == "isnull":
        return f"({render(node[1])} IS {'NOT ' if node[2] else ''}NULL)"
    if tag == "exists":
        return f"EXISTS({render(node[1])})"
    if tag == "in":
        return f"({render(node[1])} {'NOT ' if node[3] else ''}IN ({', '.join(render(i) for i in node[2])}))"
    if tag == "like":
        escape = "" if node[3] is None else f" ESCAPE {sql_string(node[3])}"
        return f"({render(node[1])} {'NOT ' if node[4] else ''}LIKE {render(node[2])}{escape})"
    raise AssertionError(tag)


# --- strategies -------------------------------------------------------------------------------------------
USER_NAMES = ["a", "b", "Cc", "x y", "in", 'q"]']
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    INT64,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 2.0, 1e300, 2.0**53, 2.0**63]),
    st.sampled_from([2**53 + 1, 2**63 - 1, -(2**63)]),  # Int64 values a Double cannot represent exactly
    st.text(alphabet="aAb%_!'", max_size=4),
)
constants = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    INT64,
    st.text(alphabet="aAb%_!'", max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2.0**53, 2**53 + 1, 2**63 - 1, 2.0**63]),
)
user_props = st.tuples(st.just("user"), st.sampled_from(USER_NAMES), st.integers(0, 2), st.booleans()).map(
    lambda t: (t[0], {0: t[1], 1: t[1].upper(), 2: t[1].lower()}[t[2] % 3], t[2], t[3])
)
# "Nope" is not a system property; it is kept rare so that most examples evaluate.
sys_props = st.tuples(
    st.just("sys"), st.sampled_from(["Label", "SUBJECT", "sequencenumber", "To"] * 5 + ["Nope"])
)
leaf_values = st.one_of(
    st.tuples(st.just("const"), constants),
    user_props,
    user_props,
    sys_props,
    st.tuples(st.just("p"), st.tuples(st.just("const"), st.sampled_from([*USER_NAMES, "A", "zz"]))),
)
values = st.recursive(
    leaf_values,
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["neg", "pos"]), inner),
        st.tuples(st.just("arith"), st.sampled_from("+-*/%"), inner, inner),
    ),
    max_leaves=4,
)
like_patterns = st.lists(st.sampled_from(["a", "A", "b", "%", "_", "!%", "!_", "!!"]), max_size=4)


@st.composite
def likes(draw: st.DrawFn) -> tuple[Any, ...]:
    operand = draw(values)
    if draw(st.booleans()):
        parts = draw(like_patterns)
        escape = "!" if draw(st.booleans()) else None
        text = "".join(parts if escape else [p.replace("!", "") or "!" for p in parts])
        return ("like", operand, ("const", text), escape, draw(st.booleans()))
    # A constant pattern that is not a string is a syntax error (pinned in test_sql_filter.py); the
    # parser folds unary +/- on numbers into constants, so those are left out of dynamic patterns too.
    dynamic = draw(
        st.one_of(user_props, sys_props, st.tuples(st.just("arith"), st.just("+"), values, values))
    )
    return ("like", operand, dynamic, None, draw(st.booleans()))


comparisons = st.tuples(
    st.just("cmp"), st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), values, values, st.booleans()
)
leaf_conditions = st.one_of(
    comparisons,
    comparisons,
    st.tuples(st.just("isnull"), values, st.booleans()),
    st.tuples(st.just("exists"), st.one_of(user_props, sys_props)),
    st.tuples(st.just("in"), values, st.lists(values, min_size=1, max_size=3).map(tuple), st.booleans()),
    likes(),
)
conditions = st.recursive(
    leaf_conditions,
    lambda inner: st.one_of(
        st.tuples(st.just("not"), inner), st.tuples(st.sampled_from(["and", "or"]), inner, inner)
    ),
    max_leaves=5,
)
messages = st.builds(
    MessageProperties,
    system=st.fixed_dictionaries(
        {},
        optional={
            "Label": st.text(alphabet="aAb%", max_size=3),
            "SequenceNumber": st.integers(-3, 3),
            "To": scalars,
        },
    ),
    user=st.dictionaries(st.sampled_from([*USER_NAMES, "A", "CC", "X Y"]), scalars, max_size=5),
)


# --- the properties ---------------------------------------------------------------------------------------
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=conditions, message=messages)
def test_compiled_filter_agrees_with_the_reference_evaluator(
    tree: tuple[Any, ...], message: MessageProperties
) -> None:
    text = render(tree)
    assume(len(text) <= 1024)
    compiled = compile_filter(text)
    if mentions_unknown_system_property(tree):
        # Decided: a reference to an unknown system property fails every evaluation.
        try:
            compiled.matches(message)
        except FilterEvaluationError:
            event("unknown system property")
            return
        raise AssertionError(f"{text!r} should fail: it names an unknown system property")
    try:
        expected = ref_cond(tree, message)
    except RefError:
        event("reference result: evaluation error")
        with contextlib.suppress(FilterEvaluationError):
            compiled.matches(message)  # the engine may short-circuit past the failing operand
        return
    event(f"reference result: {expected}")
    assert compiled.matches(message) is (expected is True), (text, message, expected)
    negated = compile_filter(f"NOT {text}").matches(message)
    assert negated is (expected is False), (text, message, expected)


TOKENS = [*"ab1. '[]\"()@%_=<>!+-*/,;", "AND", " OR ", "NOT ", " IN ", " LIKE ", "sys.", "IS NULL", "EXISTS"]


@settings(max_examples=1500, deadline=None)
@given(text=st.lists(st.sampled_from(TOKENS), max_size=25).map("".join))
def test_any_text_either_compiles_or_raises_a_positioned_syntax_error(text: str) -> None:
    try:
        compiled = compile_filter(text)
    except SqlSyntaxError as err:
        assert 1 <= err.position <= len(text) + 1
        assert str(err).endswith(f"at position {err.position}")
        return
    with contextlib.suppress(FilterEvaluationError):
        compiled.matches(MessageProperties(system={"Label": "a"}, user={"a": 1, "b": "x"}))
