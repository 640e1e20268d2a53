"""Compile a parsed filter or action expression to one Python function, once, when the rule is created.

A condition compiles to ``f(system, user) -> bool``, true exactly when the condition is TRUE in SQL
three-valued logic. UNKNOWN is never materialised for conditions: every condition is generated in two
forms, "is it TRUE?" and "is it FALSE?" (``NOT p`` is TRUE when ``p`` is FALSE, ``a AND b`` is FALSE
when either side is FALSE, ...), so the generated code is plain ``and`` / ``or`` over Python bools.
Comparisons, IN and LIKE against constants get an inline fast path for the common operand type and
fall back to the general helpers of ``sql_runtime`` otherwise. Values compile to Python expressions
in which ``None`` is NULL / UNKNOWN. Every property the expression names is read once, up front.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from emulator.filters import sql_runtime as rt
from emulator.filters.sql_lexer import SqlSyntaxError
from emulator.filters.sql_parser import (
    Arith,
    Compare,
    Const,
    Exists,
    Func,
    In,
    IsNull,
    Like,
    Logical,
    Node,
    Not,
    Param,
    Prop,
    Unary,
)

Compiled = Callable[[dict[str, Any], dict[Any, Any]], Any]
_PARAMETER_TYPES = (str, int, float, bool, datetime, timedelta, uuid.UUID, bytes)
_FAST_CLASSES = (str, int, float, bool)


def normalise_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameter names without a leading '@', lower-cased (they are matched case-insensitively)."""
    return {(k[1:] if k.startswith("@") else k).lower(): v for k, v in (parameters or {}).items()}


def unknown_system_property(prop: Prop) -> str:
    return (
        f"'sys.{prop.name}' is not a system property of a Service Bus message "
        f"(referenced at position {prop.pos})"
    )


class _CodeGen:
    def __init__(self, parameters: dict[str, Any]) -> None:
        self.params = parameters
        self.ns: dict[str, Any] = dict(rt.RUNTIME)
        self.hoisted: dict[tuple[str, str], str] = {}
        self.lines: list[str] = []
        self.temps = 0
        self.error: str | None = None  # first unknown system property: the function raises this

    # --- constants and operands ---------------------------------------------------------------------
    def resolve(self, node: Node) -> Node:
        if not isinstance(node, Param):
            return node
        key = node.name.lower()
        if key not in self.params:
            raise SqlSyntaxError(f"no value was supplied for parameter @{node.name}", node.pos)
        value = self.params[key]
        if value is not None and not isinstance(value, _PARAMETER_TYPES):
            raise SqlSyntaxError(
                f"parameter @{node.name} has unsupported type {type(value).__name__}", node.pos
            )
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise SqlSyntaxError(f"parameter @{node.name} is outside the Int64 range", node.pos)
        return Const(node.pos, value)

    def literal(self, value: Any) -> str:
        if value is None or value.__class__ in (bool, int, str):
            return repr(value)
        name = f"_k{len(self.ns)}"
        self.ns[name] = value
        return name

    def operand(self, node: Node) -> tuple[str, str]:
        """(code that evaluates the operand first, name to use afterwards): binds a temp if needed."""
        code = self.value(node)
        if isinstance(node, Const):
            return f"({code})", f"({code})"  # "(0).__class__": a bare "0." would read as a float
        if isinstance(node, Prop):
            return code, code
        self.temps += 1
        return f"(_t{self.temps} := {code})", f"_t{self.temps}"

    def system_name(self, prop: Prop) -> str | None:
        canonical = rt.SYSTEM_PROPERTIES.get(prop.name.lower())
        if canonical is None and self.error is None:
            self.error = unknown_system_property(prop)
        return canonical

    def prop(self, prop: Prop) -> str:
        if prop.scope == "sys":
            canonical = self.system_name(prop)
            if canonical is None:
                return "None"
            key = ("sys", canonical)
            if key not in self.hoisted:
                var = self.hoisted[key] = f"v{len(self.hoisted)}"
                self.lines.append(f"{var} = s.get({canonical!r})")
            return self.hoisted[key]
        # Keyed by the exact spelling: an exact match wins over a case-insensitive one, so two spellings
        # of one name may resolve to different properties.
        key = ("user", prop.name)
        if key not in self.hoisted:
            var = self.hoisted[key] = f"v{len(self.hoisted)}"
            self.lines.append(f"{var} = u.get({prop.name!r}, _M)")
            self.lines.append(f"if {var} is _M: {var} = _ci(u, {prop.name.lower()!r})")
        return self.hoisted[key]

    # --- values -------------------------------------------------------------------------------------
    def value(self, node: Node) -> str:
        node = self.resolve(node)
        if isinstance(node, Const):
            return self.literal(node.value)
        if isinstance(node, Prop):
            return self.prop(node)
        if isinstance(node, Func):
            return "_newid()" if node.name == "newid" else f"_pget(u, {self.value(node.args[0])})"
        if isinstance(node, Unary):
            return f"{'_neg' if node.op == '-' else '_pos'}({self.value(node.operand)})"
        if isinstance(node, Arith):
            return f"_a{ord(node.op)}({self.value(node.left)}, {self.value(node.right)})"
        raise SqlSyntaxError("expected a value, found a condition", node.pos)  # the parser prevents this

    # --- conditions: want=True generates "is TRUE", want=False "is FALSE" ----------------------------
    def cond(self, node: Node, want: bool) -> str:
        if isinstance(node, Logical):
            joiner = " and " if (node.op == "and") == want else " or "
            operands = [node.right]  # a chain "a AND b AND c" becomes one flat Python and-expression
            left = node.left
            while isinstance(left, Logical) and left.op == node.op:
                operands.append(left.right)
                left = left.left
            operands.append(left)
            return "(" + joiner.join(self.cond(operand, want) for operand in reversed(operands)) + ")"
        if isinstance(node, Not):
            return self.cond(node.operand, not want)
        if isinstance(node, IsNull):
            operand = self.resolve(node.operand)
            if isinstance(operand, Const):
                return repr((operand.value is None) == (want != node.negated))
            return f"({self.value(operand)} {'is' if want != node.negated else 'is not'} None)"
        if isinstance(node, Exists):
            test = self.exists(node.prop)
            return test if want else f"(not {test})"
        if isinstance(node, Compare):
            return self.compare(node, want)
        if isinstance(node, In):
            return self.in_list(node, want != node.negated)
        if isinstance(node, Like):
            return self.like(node, want != node.negated)
        raise SqlSyntaxError("expected a condition, found a value", node.pos)  # the parser prevents this

    def exists(self, prop: Prop) -> str:
        if prop.scope == "sys":
            canonical = self.system_name(prop)
            return "False" if canonical is None else f"(s.get({canonical!r}) is not None)"
        return f"_has(u, {prop.name!r})"

    def compare(self, node: Compare, want: bool) -> str:
        left, right, op = self.resolve(node.left), self.resolve(node.right), node.op
        if isinstance(left, Const) and isinstance(right, Const):
            return repr(rt.COMPARE[op](left.value, right.value) is want)
        if isinstance(left, Const):
            left, right, op = right, left, rt.SWAP[op]
        helper = rt.CMP_NAMES[op]
        if isinstance(right, Const) and right.value.__class__ in _FAST_CLASSES:
            cls = right.value.__class__
            if cls is not bool or op in ("=", "<>"):
                first, x = self.operand(left)
                c = self.literal(right.value)
                test = f"{x} {rt.PYOP[op]} {c}" if want else f"not ({x} {rt.PYOP[op]} {c})"
                return (
                    f"(({test}) if {first}.__class__ is {cls.__name__} else ({helper}({x}, {c}) is {want}))"
                )
        return f"({helper}({self.value(left)}, {self.value(right)}) is {want})"

    def in_list(self, node: In, want: bool) -> str:
        items = [self.resolve(item) for item in node.items]
        if all(isinstance(item, Const) for item in items):
            values = [cast(Const, item).value for item in items]
            values = [v for v in values if v is not None]  # NULL items never match
            classes = {v.__class__ for v in values}
            if len(classes) == 1 and (cls := classes.pop()) in (str, int, float):
                first, x = self.operand(node.operand)
                members, every = self.literal(frozenset(values)), self.literal(tuple(values))
                test = f"{x} {'in' if want else 'not in'} {members}"
                return f"(({test}) if {first}.__class__ is {cls.__name__} else (_in({x}, {every}) is {want}))"
        listed = "".join(f"{self.value(item)}, " for item in items)
        return f"(_in({self.value(node.operand)}, ({listed})) is {want})"

    def like(self, node: Like, want: bool) -> str:
        pattern = self.resolve(node.pattern)
        escape = None if node.escape is None else self.resolve(node.escape)
        if isinstance(pattern, Const) and pattern.value is not None and not isinstance(pattern.value, str):
            raise SqlSyntaxError("the LIKE pattern must be a string", pattern.pos)
        if (
            isinstance(escape, Const)
            and escape.value is not None
            and (not isinstance(escape.value, str) or len(escape.value) != 1)
        ):
            raise SqlSyntaxError("the ESCAPE character must be a string of length 1", escape.pos)
        static_escape = escape is None or (isinstance(escape, Const) and escape.value is not None)
        if isinstance(pattern, Const) and isinstance(pattern.value, str) and static_escape:
            esc = None if escape is None else cast(Const, escape).value
            try:
                plan, text = rt.like_plan(pattern.value, esc)
            except ValueError as exc:
                raise SqlSyntaxError(str(exc), pattern.pos) from None
            first, x = self.operand(node.operand)
            lit = repr(text)
            match = {
                "eq": f"{x} == {lit}",
                "prefix": f"{x}.startswith({lit})",
                "suffix": f"{x}.endswith({lit})",
                "contains": f"{lit} in {x}",
                "any": "True",
            }.get(plan) or f"{self.literal(rt.like_regex(pattern.value, esc))}.fullmatch({x}) is not None"
            test = match if want else f"not ({match})"
            fallback = f"_like({x}, {self.literal(pattern.value)}, {'_NOESC' if esc is None else repr(esc)})"
            return f"(({test}) if {first}.__class__ is str else ({fallback} is {want}))"
        esc_code = "_NOESC" if escape is None else self.value(escape)
        return f"(_like({self.value(node.operand)}, {self.value(pattern)}, {esc_code}) is {want})"

    # --- assembly -----------------------------------------------------------------------------------
    def build(self, result: str, label: str) -> tuple[Compiled, str]:
        if self.error is not None:
            self.ns["_error"] = self.error
            body = ["raise _FEE(_error)"]
        else:
            body = [*self.lines, f"return {result}"]
        source = "def _compiled(s, u):\n" + "".join(f"    {line}\n" for line in body)
        try:
            code = compile(source, f"<{label}>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as exc:  # CPython's own nesting limits
            raise SqlSyntaxError("the expression is too deeply nested to compile", 1) from exc
        exec(code, self.ns)
        return cast(Compiled, self.ns["_compiled"]), source


def compile_condition(node: Node, parameters: dict[str, Any]) -> tuple[Compiled, str]:
    """``f(system, user)`` returning True exactly when the condition is TRUE; and its Python source."""
    gen = _CodeGen(parameters)
    return gen.build(gen.cond(node, True), "sql filter")


def compile_value(node: Node, parameters: dict[str, Any]) -> tuple[Compiled, str]:
    """``f(system, user)`` returning the expression's value (None for NULL); and its Python source."""
    gen = _CodeGen(parameters)
    return gen.build(gen.value(node), "sql action")
