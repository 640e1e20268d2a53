"""Behaviour specs for SQL rule actions (emulator.filters.sql.compile_action).

Points the Azure documentation leaves open are marked "Decided:" with the reason.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from emulator.filters.sql import (
    SETTABLE_SYSTEM_PROPERTIES,
    FilterEvaluationError,
    MessageProperties,
    SqlSyntaxError,
    compile_action,
)


def props(user: dict[str, Any] | None = None, system: dict[str, Any] | None = None) -> MessageProperties:
    return MessageProperties(system=dict(system or {}), user=dict(user or {}))


def apply(action: str, user: dict[str, Any] | None = None, **kwargs: Any) -> MessageProperties:
    system = kwargs.pop("system", None)
    return compile_action(action, kwargs or None).apply(props(user, system))


def syntax_error(action: str) -> SqlSyntaxError:
    with pytest.raises(SqlSyntaxError) as info:
        compile_action(action)
    return info.value


class TestSetAndRemoveUserProperties:
    def test_set_creates_a_property(self) -> None:
        assert apply("SET importance = 'critical';").user == {"importance": "critical"}

    def test_set_updates_an_existing_property_keeping_its_spelling(self) -> None:
        # Decided: names are case-insensitive, so SET updates the property that is there, under its name.
        assert apply("SET COLOR = 'blue'", {"Color": "red"}).user == {"Color": "blue"}

    def test_set_evaluates_an_expression_over_the_message(self) -> None:
        out = apply(
            "SET total = price * quantity; SET label = sys.Label + '-' + region",
            {"price": 2.5, "quantity": 4, "region": "eu"},
            system={"Label": "order"},
        )
        assert out.user["total"] == 10.0
        assert out.user["label"] == "order-eu"  # string concatenation (azure-docs issue #87667)

    def test_statements_run_in_order_and_see_earlier_changes(self) -> None:
        # Decided: sequential semantics, as statements read like SQL executed one after another.
        out = apply("SET a = 1; SET b = a + 1; SET a = b * 10; REMOVE b")
        assert out.user == {"a": 20}

    def test_published_example(self) -> None:
        out = apply(
            "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';",
            {"quantity": 7, "priority": "high", "keep": 1},
            system={"CorrelationId": "c"},
        )
        assert out.user == {"quantity": 3, "keep": 1}  # Int64 division truncates
        assert out.system == {"CorrelationId": "low"}

    def test_set_from_a_missing_property_stores_null(self) -> None:
        # Decided: the docs say a missing user property is UNKNOWN and the action does not fail; the
        # UNKNOWN value is stored as a null-valued property (AMQP application properties allow null).
        out = apply("SET copy = missing + 1")
        assert out.user == {"copy": None}

    def test_set_converts_int64_into_an_existing_double(self) -> None:
        # "SET performs implicit conversion if possible": C# converts Int64 to Double implicitly, nothing
        # else; a value that cannot be converted replaces the old one with its own type.
        out = apply("SET d = 3; SET s = 4; SET i = 1.5", {"d": 1.0, "s": "text", "i": 1})
        assert out.user == {"d": 3.0, "s": 4, "i": 1.5}
        assert isinstance(out.user["d"], float)

    def test_set_newid_stores_a_guid(self) -> None:
        assert isinstance(apply("SET id = newid()").user["id"], uuid.UUID)

    def test_remove_deletes_a_property_in_any_case(self) -> None:
        # Decided: REMOVE deletes every case variant, since they all name the same property.
        assert apply("REMOVE color", {"Color": "red", "COLOR": "x", "size": 1}).user == {"size": 1}

    def test_remove_of_a_missing_property_is_a_no_op(self) -> None:
        assert apply("REMOVE nothing", {"a": 1}).user == {"a": 1}

    def test_bracketed_and_quoted_names(self) -> None:
        out = apply('SET [NServiceBus.Header] = \'v\'; SET "odd ""name""" = 1; REMOVE user.[x y]', {"x y": 1})
        assert out.user == {"NServiceBus.Header": "v", 'odd "name"': 1}

    def test_parameters(self) -> None:
        assert apply("SET a = @value + 1", value=41).user == {"a": 42}


class TestSystemProperties:
    @pytest.mark.parametrize("name", sorted(SETTABLE_SYSTEM_PROPERTIES))
    def test_settable_system_properties(self, name: str) -> None:
        assert apply(f"SET sys.{name} = 'v'").system == {name: "v"}

    def test_settable_set_is_the_documented_one(self) -> None:
        assert {
            "To",
            "Label",
            "ReplyTo",
            "ReplyToSessionId",
            "ContentType",
            "CorrelationId",
            "MessageId",
            "SessionId",
        } == SETTABLE_SYSTEM_PROPERTIES

    def test_sys_subject_sets_the_label(self) -> None:
        assert apply("SET sys.Subject = 'x'", system={"Label": "old"}).system == {"Label": "x"}

    def test_setting_null_or_removing_clears_a_system_property(self) -> None:
        # Decided: MessageProperties.system holds only present properties, so NULL removes the key.
        assert apply("SET sys.To = NULL", system={"To": "t", "Label": "l"}).system == {"Label": "l"}
        assert apply("REMOVE sys.Label", system={"To": "t", "Label": "l"}).system == {"To": "t"}

    def test_guid_value_is_stored_as_its_string(self) -> None:
        # Decided: MessageId is a string in every SDK; a Guid (newid()) is stored as Guid.ToString().
        value = apply("SET sys.MessageId = newid()").system["MessageId"]
        assert str(uuid.UUID(value)) == value

    def test_non_string_value_for_a_string_system_property_fails_when_applied(self) -> None:
        action = compile_action("SET sys.SessionId = customer")
        with pytest.raises(FilterEvaluationError, match="cannot assign a int"):
            action.apply(props({"customer": 42}))
        assert action.apply(props({"customer": "c42"})).system == {"SessionId": "c42"}

    @pytest.mark.parametrize(
        "action", ["SET sys.SequenceNumber = 1", "REMOVE sys.EnqueuedTimeUtc", "SET sys.DeliveryCount = 0"]
    )
    def test_broker_owned_system_properties_cannot_be_changed(self, action: str) -> None:
        # Decided: like unknown system properties, this fails when applied (the action compiles).
        compiled = compile_action(action)
        with pytest.raises(FilterEvaluationError, match="set by the broker"):
            compiled.apply(props(system={"SequenceNumber": 1}))

    def test_unknown_system_property_fails_when_applied(self) -> None:
        # "Action fails if non-existent system properties were referenced."
        for action in ["SET sys.Colour = 'x'", "REMOVE sys.Colour", "SET a = sys.Colour"]:
            compiled = compile_action(action)
            with pytest.raises(FilterEvaluationError, match=r"sys\.Colour"):
                compiled.apply(props())

    def test_reading_system_properties(self) -> None:
        out = apply(
            "SET seq = sys.SequenceNumber + 1; SET sys.To = sys.ReplyTo",
            system={"SequenceNumber": 9, "ReplyTo": "r"},
        )
        assert out.user == {"seq": 10}
        assert out.system == {"SequenceNumber": 9, "ReplyTo": "r", "To": "r"}


class TestApplySemantics:
    def test_apply_returns_a_copy_and_never_mutates_its_input(self) -> None:
        original = props({"a": 1, "b": 2}, {"To": "t"})
        out = compile_action("SET a = 5; REMOVE b; SET sys.To = 'u'").apply(original)
        assert original == props({"a": 1, "b": 2}, {"To": "t"})
        assert out == props({"a": 5}, {"To": "u"})
        assert out.user is not original.user and out.system is not original.system

    def test_evaluation_errors_surface_as_filter_evaluation_errors(self) -> None:
        with pytest.raises(FilterEvaluationError, match="division by zero"):
            apply("SET a = 1 / b", {"b": 0})

    def test_compiled_action_keeps_its_expression(self) -> None:
        assert compile_action("REMOVE a").expression == "REMOVE a"


class TestActionSyntax:
    @pytest.mark.parametrize(
        "action",
        [
            "SET a = 1",
            "SET a = 1;",
            "SET a = 1; SET b = 2",
            "SET a = 1;SET b = 2;",
            "SET a = 1, SET b = 2",
            "SET a = 1 SET b = 2",
            "set a = 1; remove b",
            "Set a = 1 ReMoVe b;",
        ],
    )
    def test_statement_separators(self, action: str) -> None:
        # Decided: ';' (used by every published example) and ',' (the grammar's "[, ...n]") separate
        # statements; the grammar's "Semicolon is optional" means no separator at all is accepted too.
        out = apply(action, {"b": 0})
        assert out.user["a"] == 1

    @pytest.mark.parametrize(
        ("action", "position", "message"),
        [
            ("", 1, "expected SET or REMOVE, found end of input"),
            ("SET a = 1;;", 11, "expected SET or REMOVE after ';'"),
            ("UPDATE a = 1", 1, "expected SET or REMOVE"),
            ("SET", 4, "expected a property name"),
            ("SET a", 6, "expected '=' after 'a'"),
            ("SET a = ", 9, "expected an expression after '='"),
            ("SET a = b = c", 11, "expected ';' or the end of the action"),
            ("SET a = (b = c)", 10, "expected a value to assign, found a condition"),
            ("SET p('x') = 1", 6, "expected '='"),
            ("REMOVE 1", 8, "expected a property name"),
            ("SET a = @p", 9, "no value was supplied for parameter @p"),
            ("SET foo.a = 1", 5, "unknown scope"),
        ],
    )
    def test_syntax_errors(self, action: str, position: int, message: str) -> None:
        err = syntax_error(action)
        assert (err.position, message in str(err)) == (position, True), str(err)

    def test_at_most_32_statements(self) -> None:
        # Quotas: "Number of expressions per rule action: 32".
        compile_action(";".join(f"SET a{i} = {i}" for i in range(32)))
        action = ";".join(f"SET a{i} = {i}" for i in range(33))
        err = syntax_error(action)
        assert "at most 32 statements" in str(err)
        assert err.position == action.index("SET a32") + 1

    def test_action_length_limit_is_1024_characters(self) -> None:
        ok = "SET a = '" + "x" * 1014 + "'"
        assert len(ok) == 1024
        compile_action(ok)
        err = syntax_error(ok + ";")
        assert err.position == 1025 and "at most 1024" in str(err)
