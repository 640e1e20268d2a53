"""Public API of the SQL filter and rule-action engine: compile once at rule creation, evaluate per message.

>>> f = compile_filter("color = 'red' AND quantity > 10")
>>> f.matches(MessageProperties(system={}, user={"color": "red", "quantity": 11}))
True
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator import limits
from emulator.filters import sql_runtime as rt
from emulator.filters.sql_compiler import (
    Compiled,
    compile_condition,
    compile_value,
    normalise_parameters,
    unknown_system_property,
)
from emulator.filters.sql_lexer import FilterEvaluationError, SqlSyntaxError
from emulator.filters.sql_parser import Prop, RemoveStmt, parse_action, parse_filter

__all__ = [
    "FALSE_FILTER",
    "SETTABLE_SYSTEM_PROPERTIES",
    "TRUE_FILTER",
    "CompiledAction",
    "CompiledFilter",
    "FilterEvaluationError",
    "MessageProperties",
    "SqlSyntaxError",
    "compile_action",
    "compile_filter",
]

# System properties an action may SET or REMOVE (all strings); the others are the broker's.
SETTABLE_SYSTEM_PROPERTIES = frozenset(
    {"To", "Label", "ReplyTo", "ReplyToSessionId", "ContentType", "CorrelationId", "MessageId", "SessionId"}
)


@dataclass
class MessageProperties:
    """What a filter sees and an action edits.

    ``system`` uses the canonical names (``Label`` for Subject, ``EnqueuedTimeUtc`` as a datetime,
    ``TimeToLive`` as a timedelta, ...) and holds only the properties the message has; ``user`` holds
    the application properties.
    """

    system: dict[str, Any] = field(default_factory=dict)
    user: dict[Any, Any] = field(default_factory=dict)


def _check_length(expression: str, what: str, limit: int) -> None:
    if len(expression) > limit:
        raise SqlSyntaxError(
            f"the {what} is {len(expression)} characters long but Service Bus allows at most {limit}; "
            "the excess starts",
            limit + 1,
        )


class CompiledFilter:
    """A SQL filter, parsed and compiled once. ``matches`` is True only when the filter is TRUE."""

    __slots__ = ("_fn", "expression", "source")

    def __init__(self, expression: str, fn: Compiled, source: str) -> None:
        self.expression = expression
        self.source = source  # the generated Python, for debugging
        self._fn = fn

    def matches(self, props: MessageProperties) -> bool:
        """Whether the message satisfies the filter (UNKNOWN does not). Raises FilterEvaluationError."""
        try:
            return bool(self._fn(props.system, props.user))
        except FilterEvaluationError:
            raise
        except Exception as exc:  # a value the engine does not model; report it as Azure would
            raise FilterEvaluationError(f"evaluating {self.expression!r} failed: {exc!r}") from exc

    def __repr__(self) -> str:
        return f"CompiledFilter({self.expression!r})"


def compile_filter(expression: str, parameters: Mapping[str, Any] | None = None) -> CompiledFilter:
    """Parse and compile a SQL filter; raises SqlSyntaxError (with a 1-based position) if it is invalid."""
    _check_length(expression, "filter expression", limits.MAX_FILTER_EXPRESSION_LENGTH)
    fn, source = compile_condition(parse_filter(expression), normalise_parameters(parameters))
    return CompiledFilter(expression, fn, source)


_Statement = Callable[[dict[str, Any], dict[Any, Any]], None]


def _fail(message: str) -> _Statement:
    def statement(system: dict[str, Any], user: dict[Any, Any]) -> None:
        raise FilterEvaluationError(message)

    return statement


def _system_target(target: Prop, verb: str) -> str | _Statement:
    """The canonical name of a settable system property, or a statement that fails when applied."""
    canonical = rt.SYSTEM_PROPERTIES.get(target.name.lower())
    if canonical is None:
        return _fail(unknown_system_property(target))
    if canonical not in SETTABLE_SYSTEM_PROPERTIES:
        return _fail(f"{verb} cannot change sys.{canonical}: it is set by the broker")
    return canonical


def _set_system(name: str, value_fn: Compiled) -> _Statement:
    def statement(system: dict[str, Any], user: dict[Any, Any]) -> None:
        value = value_fn(system, user)
        if value is None:
            system.pop(name, None)
        elif isinstance(value, str):
            system[name] = str(value)
        elif isinstance(value, uuid.UUID):
            system[name] = str(value)  # Guid.ToString(): lower-case, hyphenated
        else:
            raise FilterEvaluationError(
                f"SET sys.{name}: cannot assign a {type(value).__name__} to a string property"
            )

    return statement


def _set_user(name: str, value_fn: Compiled) -> _Statement:
    def statement(system: dict[str, Any], user: dict[Any, Any]) -> None:
        value = value_fn(system, user)
        key = rt.find_user_key(user, name)
        if key is rt.MISSING:
            key = name
        elif isinstance(user[key], float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # the one implicit conversion: Int64 into an existing Double
        user[key] = value

    return statement


def _remove_user(name: str) -> _Statement:
    lname = name.lower()

    def statement(system: dict[str, Any], user: dict[Any, Any]) -> None:
        for key in [k for k in user if isinstance(k, str) and k.lower() == lname]:
            del user[key]

    return statement


class CompiledAction:
    """A SQL rule action, parsed and compiled once. ``apply`` returns an edited copy of the properties."""

    __slots__ = ("_statements", "expression")

    def __init__(self, expression: str, statements: list[_Statement]) -> None:
        self.expression = expression
        self._statements = statements

    def apply(self, props: MessageProperties) -> MessageProperties:
        """Run the statements in order on a copy; later statements see earlier ones' changes."""
        result = MessageProperties(system=dict(props.system), user=dict(props.user))
        try:
            for statement in self._statements:
                statement(result.system, result.user)
        except FilterEvaluationError:
            raise
        except Exception as exc:
            raise FilterEvaluationError(f"applying {self.expression!r} failed: {exc!r}") from exc
        return result

    def __repr__(self) -> str:
        return f"CompiledAction({self.expression!r})"


def compile_action(expression: str, parameters: Mapping[str, Any] | None = None) -> CompiledAction:
    """Parse and compile a SQL rule action (``SET p = expr`` / ``REMOVE p``; at most 32 statements)."""
    _check_length(expression, "action expression", limits.MAX_ACTION_EXPRESSION_LENGTH)
    params = normalise_parameters(parameters)
    statements: list[_Statement] = []
    for stmt in parse_action(expression, limits.MAX_ACTION_STATEMENTS):
        target = stmt.target
        if isinstance(stmt, RemoveStmt):
            if target.scope == "user":
                statements.append(_remove_user(target.name))
                continue
            name = _system_target(target, "REMOVE")
            statements.append(_set_system(name, lambda s, u: None) if isinstance(name, str) else name)
            continue
        value_fn, _ = compile_value(stmt.value, params)
        if target.scope == "user":
            statements.append(_set_user(target.name, value_fn))
        else:
            name = _system_target(target, "SET")
            statements.append(_set_system(name, value_fn) if isinstance(name, str) else name)
    return CompiledAction(expression, statements)


TRUE_FILTER = compile_filter("1=1")
FALSE_FILTER = compile_filter("1=0")
