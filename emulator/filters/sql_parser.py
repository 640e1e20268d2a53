"""Parser for SQL filters and rule actions: text -> AST.

Precedence (undocumented by Azure; SQL-92 convention), loosest first::

    OR  <  AND  <  NOT  <  comparison / [NOT] LIKE / [NOT] IN / IS [NOT] NULL / EXISTS
        <  binary + -  <  * / %  <  unary + -

Predicates (conditions) and expressions (values) are parsed by one precedence climber and then
checked: AND/OR/NOT take conditions, comparisons and arithmetic take values. That is how a leading
'(' can open either ``(a = 1 OR b = 2)`` or ``(a + b) > 3`` without backtracking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.filters.sql_lexer import SqlSyntaxError, Tok, Token, tokenize


@dataclass(frozen=True, slots=True)
class Node:
    pos: int  # 1-based position of the node's first character


# --- values -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Const(Node):
    value: Any  # None, bool, int, float or str


@dataclass(frozen=True, slots=True)
class Param(Node):
    name: str  # as written, without '@'


@dataclass(frozen=True, slots=True)
class Prop(Node):
    scope: str  # "sys" or "user"
    name: str  # as written (case preserved)


@dataclass(frozen=True, slots=True)
class Func(Node):
    name: str  # "newid" or "property"
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary(Node):
    op: str  # "+" or "-"
    operand: Node


@dataclass(frozen=True, slots=True)
class Arith(Node):
    op: str  # + - * / %
    left: Node
    right: Node


# --- conditions -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Compare(Node):
    op: str  # = <> > >= < <=   ("!=" is normalised to "<>")
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    operand: Node
    negated: bool


@dataclass(frozen=True, slots=True)
class In(Node):
    operand: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Like(Node):
    operand: Node
    pattern: Node
    escape: Node | None
    negated: bool


@dataclass(frozen=True, slots=True)
class Exists(Node):
    prop: Prop


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True, slots=True)
class Logical(Node):
    op: str  # "and" or "or"
    left: Node
    right: Node


# --- action statements ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SetStmt(Node):
    target: Prop
    value: Node


@dataclass(frozen=True, slots=True)
class RemoveStmt(Node):
    target: Prop


CONDITIONS = (Compare, IsNull, In, Like, Exists, Not, Logical)
_COMPARISONS = frozenset({"=", "<>", "!=", ">", ">=", "<", "<="})
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# Parentheses, unary operators and chained arithmetic may nest this deep. Azure's limit is undocumented;
# real filters nest a few levels, and the bound keeps parsing and the generated Python well within
# CPython's recursion and parenthesis-nesting limits.
MAX_NESTING = 40
_CONDITION_HINT = "a condition (a comparison, LIKE, IN, IS NULL or EXISTS)"


def is_condition(node: Node) -> bool:
    return isinstance(node, CONDITIONS)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    def nest(self, token: Token, extra: int = 1) -> None:
        if self.depth + extra > MAX_NESTING:
            raise SqlSyntaxError(f"the expression nests more than {MAX_NESTING} levels deep", token.pos)

    # --- token helpers ------------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    @property
    def prev(self) -> Token | None:
        return self.tokens[self.i - 1] if self.i else None

    def advance(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind is Tok.OP and self.tok.value in ops

    def at_kw(self, *words: str) -> bool:
        return self.tok.kind is Tok.KEYWORD and self.tok.value in words

    def peek_kw(self, offset: int, word: str) -> bool:
        token = self.tokens[min(self.i + offset, len(self.tokens) - 1)]
        return token.kind is Tok.KEYWORD and token.value == word

    def fail(self, expected: str, say_after: bool = True) -> SqlSyntaxError:
        where = f" after {self.prev.describe()}" if self.prev is not None and say_after else ""
        found = self.tok.describe()
        if self.tok.kind is Tok.KEYWORD and self.tok.value not in ("null", "true", "false"):
            found = f"keyword {found} (write [{self.tok.text}] to use it as a property name)"
        return SqlSyntaxError(f"expected {expected}{where}, found {found}", self.tok.pos)

    def expect_op(self, op: str, expected: str | None = None) -> Token:
        if not self.at_op(op):
            raise self.fail(expected or f"'{op}'", say_after=expected is None)
        return self.advance()

    # --- kind checks --------------------------------------------------------------------------------
    @staticmethod
    def need_value(node: Node, context: str) -> Node:
        if is_condition(node):
            raise SqlSyntaxError(f"expected a value {context}, found a condition", node.pos)
        return node

    @staticmethod
    def need_condition(node: Node, context: str) -> Node:
        if not is_condition(node):
            raise SqlSyntaxError(f"expected {_CONDITION_HINT} {context}, found a value", node.pos)
        return node

    # --- conditions ---------------------------------------------------------------------------------
    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.at_kw("or"):
            self.advance()
            right = self.and_expr()
            self.need_condition(left, "before 'OR'")
            self.need_condition(right, "after 'OR'")
            left = Logical(left.pos, "or", left, right)
        return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.at_kw("and"):
            self.advance()
            right = self.not_expr()
            self.need_condition(left, "before 'AND'")
            self.need_condition(right, "after 'AND'")
            left = Logical(left.pos, "and", left, right)
        return left

    def not_expr(self) -> Node:
        if self.at_kw("not"):
            pos = self.advance().pos
            return Not(pos, self.need_condition(self.not_expr(), "after 'NOT'"))
        return self.predicate()

    def predicate(self) -> Node:
        if self.at_kw("exists"):
            pos = self.advance().pos
            self.expect_op("(")
            prop = self.primary()
            if not isinstance(prop, Prop):
                raise SqlSyntaxError("expected a property name inside EXISTS( )", prop.pos)
            self.expect_op(")")
            return Exists(pos, prop)
        left = self.additive()
        if self.tok.kind is Tok.OP and self.tok.value in _COMPARISONS:
            op = self.advance().value
            right = self.additive()
            self.need_value(left, f"before '{op}'")
            self.need_value(right, f"after '{op}'")
            return Compare(left.pos, "<>" if op == "!=" else op, left, right)
        if self.at_kw("is"):
            self.advance()
            negated = self.at_kw("not")
            if negated:
                self.advance()
            if not self.at_kw("null"):
                raise self.fail("NULL")
            self.advance()
            return IsNull(left.pos, self.need_value(left, "before 'IS'"), negated)
        negated = self.at_kw("not") and (self.peek_kw(1, "in") or self.peek_kw(1, "like"))
        if negated:
            self.advance()
        if self.at_kw("in"):
            self.advance()
            self.need_value(left, "before 'IN'")
            self.expect_op("(")
            items = [self.value("in the IN list")]
            while self.at_op(","):
                self.advance()
                items.append(self.value("in the IN list"))
            if not self.at_op(")"):
                raise self.fail("',' or ')' in the IN list")
            self.advance()
            return In(left.pos, left, tuple(items), negated)
        if self.at_kw("like"):
            self.advance()
            self.need_value(left, "before 'LIKE'")
            pattern = self.value("as the LIKE pattern")
            escape = None
            if self.at_kw("escape"):
                self.advance()
                escape = self.value("after 'ESCAPE'")
            return Like(left.pos, left, pattern, escape, negated)
        return left

    # --- values -------------------------------------------------------------------------------------
    def value(self, context: str) -> Node:
        return self.need_value(self.additive(), context)

    def additive(self) -> Node:
        left = self.multiplicative()
        terms = 0
        while self.at_op("+", "-"):
            terms += 1
            self.nest(self.tok, terms)
            op = self.advance().value
            right = self.multiplicative()
            left = Arith(
                left.pos, op, self.need_value(left, f"before '{op}'"), self.need_value(right, f"after '{op}'")
            )
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        terms = 0
        while self.at_op("*", "/", "%"):
            terms += 1
            self.nest(self.tok, terms)
            op = self.advance().value
            right = self.unary()
            left = Arith(
                left.pos, op, self.need_value(left, f"before '{op}'"), self.need_value(right, f"after '{op}'")
            )
        return left

    def unary(self) -> Node:
        if self.at_op("+", "-"):
            token = self.advance()
            nxt = self.tok
            if token.value == "-" and nxt.kind is Tok.INTEGER and nxt.value == -_INT64_MIN:
                self.advance()  # -9223372036854775808: the one literal whose magnitude is not an Int64
                return Const(token.pos, _INT64_MIN)
            self.nest(token)
            self.depth += 1
            operand = self.need_value(self.unary(), f"after unary '{token.value}'")
            self.depth -= 1
            value = operand.value if isinstance(operand, Const) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                folded = -value if token.value == "-" else value
                if isinstance(folded, float) or _INT64_MIN <= folded <= _INT64_MAX:
                    return Const(token.pos, folded)
            return Unary(token.pos, token.value, operand)
        return self.primary()

    def primary(self) -> Node:
        token = self.tok
        kind = token.kind
        if kind is Tok.INTEGER:
            if token.value > _INT64_MAX:
                raise SqlSyntaxError(f"integer constant {token.text} is outside the Int64 range", token.pos)
            self.advance()
            return Const(token.pos, token.value)
        if kind in (Tok.DECIMAL, Tok.STRING):
            self.advance()
            return Const(token.pos, token.value)
        if kind is Tok.PARAM:
            self.advance()
            return Param(token.pos, token.value)
        if kind is Tok.KEYWORD and token.value in ("true", "false", "null"):
            self.advance()
            return Const(token.pos, {"true": True, "false": False, "null": None}[token.value])
        if kind is Tok.OP and token.value == "(":
            self.nest(token)
            self.depth += 1
            self.advance()
            inner = self.or_expr()
            self.depth -= 1
            self.expect_op(")", f"')' to close the '(' opened at position {token.pos}")
            return inner
        if kind in (Tok.IDENT, Tok.NAME):
            nxt = self.tokens[self.i + 1]
            if kind is Tok.IDENT and nxt.kind is Tok.OP and nxt.value == "(":
                return self.function()
            return self.property()
        raise self.fail("an expression")

    def property(self) -> Prop:
        token = self.advance()
        if not self.at_op("."):
            return Prop(token.pos, "user", token.value)
        scope = str(token.value).lower()
        if scope not in ("sys", "user"):
            raise SqlSyntaxError(f"unknown scope {token.describe()}: expected sys or user", token.pos)
        self.advance()
        name = self.tok
        if name.kind not in (Tok.IDENT, Tok.NAME, Tok.KEYWORD):
            raise self.fail(f"a property name after '{token.text}.'")
        self.advance()
        return Prop(token.pos, scope, name.text if name.kind is Tok.KEYWORD else name.value)

    def function(self) -> Node:
        token = self.advance()
        name = token.value.lower()
        self.advance()  # '('
        if name == "newid":
            if not self.at_op(")"):
                raise SqlSyntaxError("newid() takes no arguments", self.tok.pos)
            self.advance()
            return Func(token.pos, "newid", ())
        if name in ("property", "p"):
            arg = self.value(f"as the argument of {token.text}()")
            if not self.at_op(")"):
                raise SqlSyntaxError(f"expected ')': {token.text}() takes exactly one argument", self.tok.pos)
            self.advance()
            return Func(token.pos, "property", (arg,))
        raise SqlSyntaxError(
            f"unknown function '{token.text}': the functions are newid(), property(name) and p(name)",
            token.pos,
        )

    def at_end(self) -> bool:
        return self.tok.kind is Tok.EOF

    def end(self, expected: str) -> None:
        if self.tok.kind is not Tok.EOF:
            raise self.fail(expected)


def parse_filter(text: str) -> Node:
    """Parse a SQL filter into a condition node."""
    parser = _Parser(text)
    if parser.tok.kind is Tok.EOF:
        raise SqlSyntaxError(f"expected {_CONDITION_HINT}, found an empty filter", 1)
    node = parser.or_expr()
    parser.end("AND, OR or the end of the filter")
    return parser.need_condition(node, "as the filter")


def parse_action(text: str, max_statements: int) -> list[SetStmt | RemoveStmt]:
    """Parse a SQL rule action: ``SET prop = expr`` / ``REMOVE prop`` statements separated by ';' or ','."""
    parser = _Parser(text)
    statements: list[SetStmt | RemoveStmt] = []
    while True:
        token = parser.tok
        if not parser.at_kw("set", "remove"):
            raise parser.fail("SET or REMOVE")
        if len(statements) == max_statements:
            raise SqlSyntaxError(
                f"an action may have at most {max_statements} statements; one more starts", token.pos
            )
        parser.advance()
        if parser.tok.kind not in (Tok.IDENT, Tok.NAME):
            raise parser.fail("a property name")
        target = parser.property()
        if token.value == "set":
            parser.expect_op("=")
            statements.append(SetStmt(token.pos, target, parser.value("to assign")))
        else:
            statements.append(RemoveStmt(token.pos, target))
        if parser.at_op(";", ","):
            parser.advance()
        elif not parser.at_kw("set", "remove"):
            parser.end("';' or the end of the action")
        if parser.at_end():
            return statements
