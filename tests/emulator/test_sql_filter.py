"""Behaviour specs for Service Bus SQL filters (emulator.filters.sql).

Points the Azure documentation leaves open are marked "Decided:" with the reason; the reference is the
Azure Service Bus SQL filter syntax documentation (learn.microsoft.com, "Subscription rule SQL filter
syntax").
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from emulator.filters.sql import (
    FALSE_FILTER,
    TRUE_FILTER,
    FilterEvaluationError,
    MessageProperties,
    SqlSyntaxError,
    compile_filter,
)

T, F, U = True, False, None  # TRUE, FALSE, UNKNOWN


def props(user: dict[str, Any] | None = None, system: dict[str, Any] | None = None) -> MessageProperties:
    return MessageProperties(system=dict(system or {}), user=dict(user or {}))


def match(expression: str, user: dict[str, Any] | None = None, **kwargs: Any) -> bool:
    system = kwargs.pop("system", None)
    return compile_filter(expression, kwargs or None).matches(props(user, system))


def truth(
    expression: str, user: dict[str, Any] | None = None, system: dict[str, Any] | None = None
) -> bool | None:
    """TRUE, FALSE or UNKNOWN: a condition is FALSE exactly when NOT(condition) matches."""
    p = props(user, system)
    is_true = compile_filter(expression).matches(p)
    is_false = compile_filter(f"NOT ({expression})").matches(p)
    assert not (is_true and is_false)
    return T if is_true else F if is_false else U


def syntax_error(expression: str, parameters: dict[str, Any] | None = None) -> SqlSyntaxError:
    with pytest.raises(SqlSyntaxError) as info:
        compile_filter(expression, parameters)
    return info.value


# --- constants --------------------------------------------------------------------------------------------
class TestConstants:
    @pytest.mark.parametrize(
        ("expression", "value"),
        [
            ("v = 1894", 1894),
            ("v = 2", 2),
            ("v = 9223372036854775807", 2**63 - 1),
            ("v = -9223372036854775808", -(2**63)),
            ("v = 1894.1204", 1894.1204),
            ("v = 2.0", 2.0),
            ("v = .5", 0.5),
            ("v = 101.5E5", 101.5e5),
            ("v = 0.5E-2", 0.005),
            ("v = 1e3", 1000.0),
            ("v = 'blue'", "blue"),
            ("v = 'it''s'", "it's"),
            ("v = ''", ""),
            ("v = 'ünïcødé ✓'", "ünïcødé ✓"),
            ("v = TRUE", True),
            ("v = false", False),
        ],
    )
    def test_each_constant_form_compares_equal_to_its_value(self, expression: str, value: Any) -> None:
        assert match(expression, {"v": value})

    def test_integer_and_decimal_constants_compare_numerically(self) -> None:
        assert match("v = 2.0", {"v": 2})
        assert match("v = 2", {"v": 2.0})

    def test_comparing_with_null_constant_is_unknown(self) -> None:
        assert truth("v = NULL", {"v": 1}) is U
        assert truth("v <> NULL", {"v": 1}) is U
        assert truth("NULL = NULL") is U

    def test_integer_constant_beyond_int64_is_a_syntax_error(self) -> None:
        err = syntax_error("v = 9223372036854775808")
        assert err.position == 5
        assert "Int64" in str(err)

    def test_unterminated_string_constant_names_where_it_starts(self) -> None:
        err = syntax_error("a = 'abc")
        assert err.position == 5
        assert "unterminated string" in str(err)

    def test_exponent_without_digits_is_a_syntax_error(self) -> None:
        assert syntax_error("a = 1e+").position == 8


# --- identifiers and scopes -------------------------------------------------------------------------------
class TestProperties:
    def test_user_scope_is_the_default(self) -> None:
        assert match("color = 'red'", {"color": "red"})
        assert match("user.color = 'red'", {"color": "red"})

    def test_property_names_are_case_insensitive(self) -> None:
        assert match("COLOR = 'red'", {"color": "red"})
        assert match("User.Color = 'red'", {"cOlOr": "red"})
        assert match("SYS.LABEL = 'x'", system={"Label": "x"})

    def test_exact_spelling_wins_over_other_case_variants(self) -> None:
        # Decided: an application property set twice with different case (legal in AMQP) resolves to the
        # exact spelling when there is one, else the first case-insensitive match in message order.
        user = {"Color": "blue", "color": "red"}
        assert match("color = 'red'", user)
        assert match("Color = 'blue'", user)
        assert match("COLOR = 'blue'", user)

    @pytest.mark.parametrize(
        ("expression", "name"),
        [
            ("[NServiceBus.EnclosedMessageTypes] = 'x'", "NServiceBus.EnclosedMessageTypes"),
            ("[Property With Space] = 'x'", "Property With Space"),
            ("[HR-EmployeeID] = 'x'", "HR-EmployeeID"),
            ("[a]]b] = 'x'", "a]b"),
            ("[in] = 'x'", "in"),
            ("\"Contoso & Northwind\" = 'x'", "Contoso & Northwind"),
            ('"say ""hi""" = \'x\'', 'say "hi"'),
            (
                "\"http://schemas.microsoft.com/xrm/2011/Claims/EntityLogicalName\" = 'x'",
                "http://schemas.microsoft.com/xrm/2011/Claims/EntityLogicalName",
            ),
            ("user.[a.b] = 'x'", "a.b"),
            ("größe_2 = 'x'", "größe_2"),
        ],
    )
    def test_delimited_and_quoted_identifiers_name_any_property(self, expression: str, name: str) -> None:
        assert match(expression, {name: "x"})

    def test_regular_identifier_must_start_with_a_letter(self) -> None:
        # Decided: the documented regex [[:IsLetter:]][_[:IsLetter:][:IsDigit:]]* is enforced as written.
        assert syntax_error("_private = 1").position == 1
        assert match("[_private] = 1", {"_private": 1})

    def test_reserved_keyword_as_a_name_needs_brackets(self) -> None:
        err = syntax_error("not = 1")
        assert err.position == 5
        err = syntax_error("a = like")
        assert "[like]" in str(err)

    def test_missing_user_property_is_unknown(self) -> None:
        assert truth("missing = 1") is U
        assert truth("missing <> 1") is U
        assert not match("missing = 1")

    def test_system_properties_need_the_sys_prefix(self) -> None:
        system = {"MessageId": "m1", "Label": "L"}
        assert match("sys.MessageId = 'm1'", system=system)
        assert truth("MessageId = 'm1'", system=system) is U  # a user property of that name

    def test_sys_label_and_sys_subject_are_aliases(self) -> None:
        # Decided: accept both (the docs use sys.Label; the current SDK calls it Subject).
        assert match("sys.Label = 'x'", system={"Label": "x"})
        assert match("sys.Subject = 'x'", system={"Label": "x"})

    def test_current_sdk_property_names_are_accepted_as_aliases(self) -> None:
        # Decided: the filter-examples page says to use the Azure.Messaging.ServiceBus names.
        when = datetime(2024, 1, 2, tzinfo=UTC)
        assert match("sys.EnqueuedTime = sys.EnqueuedTimeUtc", system={"EnqueuedTimeUtc": when})
        assert match("EXISTS(sys.ScheduledEnqueueTime)", system={"ScheduledEnqueueTimeUtc": when})

    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("MessageId", "m"),
            ("CorrelationId", "c"),
            ("To", "t"),
            ("ReplyTo", "r"),
            ("SessionId", "s"),
            ("ReplyToSessionId", "rs"),
            ("ContentType", "application/json"),
            ("SequenceNumber", 7),
            ("DeliveryCount", 2),
            ("Size", 300),
            ("EnqueuedSequenceNumber", 7),
            ("PartitionKey", "pk"),
            ("EnqueuedTimeUtc", datetime(2024, 5, 1, tzinfo=UTC)),
            ("TimeToLive", timedelta(minutes=5)),
            ("LockToken", uuid.UUID(int=5)),
            ("ExpiresAtUtc", datetime(2024, 5, 2, tzinfo=UTC)),
        ],
    )
    def test_each_system_property_is_readable(self, name: str, value: Any) -> None:
        assert compile_filter(f"sys.{name} = @v", {"v": value}).matches(props(system={name: value}))

    def test_system_property_the_message_lacks_is_null(self) -> None:
        assert match("sys.SessionId IS NULL")
        assert truth("sys.SessionId = 'x'") is U

    def test_unknown_system_property_fails_evaluation(self) -> None:
        f = compile_filter("sys.Colour = 'red'")  # compiles: Azure reports it per message
        with pytest.raises(FilterEvaluationError, match=r"sys\.Colour.*position 1"):
            f.matches(props())

    def test_unknown_system_property_fails_even_where_short_circuit_would_skip_it(self) -> None:
        # Decided: the error does not depend on the message's data, so it is raised on every evaluation.
        with pytest.raises(FilterEvaluationError):
            match("1 = 1 OR sys.Nope = 1")
        with pytest.raises(FilterEvaluationError):
            match("EXISTS(sys.Nope)")

    def test_unknown_scope_is_a_syntax_error(self) -> None:
        err = syntax_error("a = 1 AND foo.bar = 2")
        assert err.position == 11
        assert "expected sys or user" in str(err)

    def test_keyword_after_a_scope_is_a_property_name(self) -> None:
        # Decided: after "user." a reserved word is unambiguous, so it is accepted as the name.
        assert match("user.exists = 1", {"exists": 1})


# --- three-valued logic -----------------------------------------------------------------------------------
# Conditions that are TRUE, FALSE and UNKNOWN on the message {"one": 1} ("nothing" does not exist).
_TRI = {T: "one = 1", F: "one = 2", U: "nothing = 1"}
_AND = {(T, T): T, (T, F): F, (T, U): U, (F, T): F, (F, F): F, (F, U): F, (U, T): U, (U, F): F, (U, U): U}
_OR = {(T, T): T, (T, F): T, (T, U): T, (F, T): T, (F, F): F, (F, U): U, (U, T): T, (U, F): U, (U, U): U}


class TestThreeValuedLogic:
    @pytest.mark.parametrize(("operands", "result"), list(_AND.items()))
    def test_and_follows_the_documented_truth_table(self, operands: tuple[Any, Any], result: Any) -> None:
        assert truth(f"{_TRI[operands[0]]} AND {_TRI[operands[1]]}", {"one": 1}) is result

    @pytest.mark.parametrize(("operands", "result"), list(_OR.items()))
    def test_or_follows_the_documented_truth_table(self, operands: tuple[Any, Any], result: Any) -> None:
        assert truth(f"{_TRI[operands[0]]} OR {_TRI[operands[1]]}", {"one": 1}) is result

    @pytest.mark.parametrize(("operand", "result"), [(T, F), (F, T), (U, U)])
    def test_not_negates_and_keeps_unknown_unknown(self, operand: Any, result: Any) -> None:
        # Decided: NOT UNKNOWN is UNKNOWN (SQL-92), so NOT never makes a missing property match.
        assert truth(f"NOT {_TRI[operand]}", {"one": 1}) is result
        assert truth(f"NOT NOT {_TRI[operand]}", {"one": 1}) is operand

    def test_a_rule_matches_only_when_its_filter_is_true(self) -> None:
        assert match("one = 1", {"one": 1})
        assert not match("one = 2", {"one": 1})
        assert not match("nothing = 1", {"one": 1})
        assert not match("NOT nothing = 1", {"one": 1})


# --- precedence -------------------------------------------------------------------------------------------
class TestPrecedence:
    def test_and_binds_tighter_than_or(self) -> None:
        # Decided (undocumented): SQL-92 precedence. With AND first this is TRUE; OR first would be FALSE.
        assert match("1 = 1 OR 1 = 1 AND 1 = 0")
        assert not match("(1 = 1 OR 1 = 1) AND 1 = 0")

    def test_not_binds_tighter_than_and_but_looser_than_comparison(self) -> None:
        assert match("NOT a = 2 AND b = 3", {"a": 1, "b": 3})
        assert not match("NOT (a = 1 AND b = 3)", {"a": 1, "b": 3})

    def test_multiplication_binds_tighter_than_addition(self) -> None:
        assert match("2 + 3 * 4 = 14")
        assert match("(2 + 3) * 4 = 20")
        assert match("10 - 4 - 3 = 3")  # left-associative
        assert match("100 / 10 / 5 = 2")

    def test_unary_minus_binds_tightest(self) -> None:
        assert match("-2 * 3 = -6")
        assert match("- a + 5 = 3", {"a": 2})
        assert match("--2 = 2")

    def test_parentheses_may_wrap_either_values_or_conditions(self) -> None:
        assert match("((a + 1)) > 1 AND ((a = 1) OR (a = 2))", {"a": 1})

    def test_comparisons_do_not_chain(self) -> None:
        err = syntax_error("1 = 1 = 1")
        assert err.position == 7


# --- comparisons ------------------------------------------------------------------------------------------
class TestComparison:
    @pytest.mark.parametrize(
        ("expression", "result"),
        [
            ("5 = 5", T),
            ("5 <> 5", F),
            ("5 != 5", F),
            ("5 > 4", T),
            ("5 >= 5", T),
            ("4 < 5", T),
            ("5 <= 4", F),
            ("2 = 2.0", T),
            ("2 < 2.5", T),
            ("1.5 >= 1", T),
            ("'a' = 'a'", T),
            ("'a' <> 'b'", T),
            ("'abc' < 'abd'", T),
            ("'b' > 'abc'", T),
        ],
    )
    def test_operators_on_constants(self, expression: str, result: bool) -> None:
        assert truth(expression) is result

    def test_property_on_either_side(self) -> None:
        assert match("10 < quantity", {"quantity": 11})
        assert not match("10 > quantity", {"quantity": 11})

    def test_string_comparison_is_case_sensitive_and_ordinal(self) -> None:
        # Decided: ordinal comparison, as C# string equality is and as correlation filters are documented.
        assert truth("color = 'RED'", {"color": "red"}) is F
        assert truth("'B' < 'a'") is T  # ordinal: upper case sorts first

    def test_int_and_double_compare_as_double(self) -> None:
        # C#: long op double converts the long to double (so 2**53 + 1 equals 2.0**53).
        assert match("v = 9007199254740992.0", {"v": 2**53 + 1})
        assert match("v > 10", {"v": 10.5})

    def test_nan_is_unequal_to_everything(self) -> None:
        assert truth("v = v", {"v": math.nan}) is F
        assert truth("v <> 1", {"v": math.nan}) is T
        assert truth("v > 1", {"v": math.nan}) is F

    @pytest.mark.parametrize(
        ("expression", "value"),
        [
            ("v = 1", "1"),
            ("v > 1", "2"),
            ("v = '1'", 1),
            ("v = 1", True),
            ("v = TRUE", 1),
            ("v = 'x'", uuid.UUID(int=1)),
            ("v = 1", datetime(2024, 1, 1)),
            ("v = 'x'", b"x"),
            ("v = 1", [1]),
            ("v < 2", timedelta(1)),
        ],
    )
    def test_mismatched_types_compare_as_unknown(self, expression: str, value: Any) -> None:
        # Decided: C# has no implicit conversion between these types; rather than fail the message
        # (FilterException), the comparison is UNKNOWN, so neither it nor its negation matches.
        assert truth(expression, {"v": value}) is U

    def test_booleans_support_only_equality(self) -> None:
        # Decided: C# defines no < or > on bool; ordering booleans is UNKNOWN.
        assert truth("v = TRUE", {"v": True}) is T
        assert truth("v <> FALSE", {"v": True}) is T
        assert truth("v > FALSE", {"v": True}) is U

    def test_guid_and_bytes_support_only_equality(self) -> None:
        g = uuid.UUID(int=7)
        assert match("a = b", {"a": g, "b": uuid.UUID(int=7)})
        assert truth("a < b", {"a": g, "b": uuid.UUID(int=8)}) is U
        assert match("a = b", {"a": b"\x01", "b": b"\x01"})

    def test_datetimes_compare_as_instants_and_naive_means_utc(self) -> None:
        # Decided: a naive datetime (no tzinfo) is taken as UTC, as Service Bus times are.
        aware = datetime(2024, 1, 1, 12, tzinfo=UTC)
        assert match("a = b", {"a": aware, "b": datetime(2024, 1, 1, 12)})
        assert match(
            "a = b", {"a": aware, "b": datetime(2024, 1, 1, 14, tzinfo=timezone(timedelta(hours=2)))}
        )
        assert match("a < @t", {"a": aware}, t=datetime(2024, 1, 2, tzinfo=UTC))

    def test_timespans_compare(self) -> None:
        assert match(
            "sys.TimeToLive > @ttl", system={"TimeToLive": timedelta(minutes=5)}, ttl=timedelta(1 / 1440)
        )

    def test_int_subclasses_and_str_subclasses_behave_as_their_base_type(self) -> None:
        class Long(int):
            pass

        class Symbol(str):
            pass

        assert match("v > 1 AND s = 'x' AND s LIKE 'x%' AND s IN ('x')", {"v": Long(2), "s": Symbol("x")})


# --- IS NULL, IN, EXISTS ----------------------------------------------------------------------------------
class TestIsNullInExists:
    def test_is_null_is_true_for_missing_and_null_valued_properties(self) -> None:
        assert match("a IS NULL")
        assert match("a IS NULL", {"a": None})
        assert not match("a IS NULL", {"a": 0})
        assert match("a IS NOT NULL", {"a": ""})
        assert truth("a IS NULL") is T  # never UNKNOWN

    def test_is_null_accepts_any_expression(self) -> None:
        # Decided: the grammar says <property> IS NULL; any value expression is accepted (it is well-defined).
        assert match("a + 1 IS NULL")
        assert match("p('a') IS NOT NULL", {"a": 1})

    @pytest.mark.parametrize(
        ("expression", "user", "result"),
        [
            ("StoreId IN ('Store1', 'Store2', 'Store3')", {"StoreId": "Store2"}, T),
            ("StoreId IN('Store1', 'Store2', 'Store3')", {"StoreId": "Store9"}, F),
            ("StoreId NOT IN ('Store1', 'Store2')", {"StoreId": "Store9"}, T),
            ("StoreId NOT IN ('Store1', 'Store2')", {"StoreId": "Store1"}, F),
            ("v IN (1, 2, 3)", {"v": 2.0}, T),
            ("v IN (1.5, 2)", {"v": 2}, T),
            ("v IN (a, b + 1)", {"v": 3, "a": 1, "b": 2}, T),
            ("v IN ('x')", {}, U),
            ("v NOT IN ('x')", {}, U),
        ],
    )
    def test_in_lists(self, expression: str, user: dict[str, Any], result: Any) -> None:
        assert truth(expression, user) is result

    def test_in_is_unknown_only_when_the_left_operand_is(self) -> None:
        # Decided: the docs list only "left operand unknown -> unknown" for IN. NULL items and items of
        # another type never match, and do not make IN UNKNOWN (unlike SQL-92's expansion to OR of =).
        assert truth("v IN ('a', NULL)", {"v": "b"}) is F
        assert truth("v NOT IN ('a', missing)", {"v": "b"}) is T
        assert truth("v IN ('a', 1)", {"v": 1}) is T
        assert truth("v IN ('1')", {"v": 1}) is F

    def test_exists_is_true_for_a_present_property_even_when_null(self) -> None:
        # Decided: EXISTS tests presence of the key, so a property sent with a null value exists
        # (while "IS NULL" is also true for it).
        assert match("EXISTS(a)", {"a": None})
        assert match("EXISTS(user.A)", {"a": 1})
        assert not match("EXISTS([b c])", {"a": 1})
        assert match("NOT EXISTS(b)", {"a": 1})

    def test_exists_on_a_system_property_tests_that_the_message_has_it(self) -> None:
        assert match("EXISTS(sys.SessionId)", system={"SessionId": "s"})
        assert not match("EXISTS(sys.sessionid)", system={})

    def test_exists_takes_only_a_property(self) -> None:
        assert syntax_error("EXISTS(a + 1)").position == 10
        assert syntax_error("EXISTS(1)").position == 8
        assert syntax_error("EXISTS a").position == 8


# --- LIKE -------------------------------------------------------------------------------------------------
class TestLike:
    @pytest.mark.parametrize(
        ("pattern", "text", "result"),
        [
            ("%bus%", "service bus label", T),
            ("%bus%", "topic", F),
            ("bus%", "busbar", T),
            ("bus%", "a bus", F),
            ("%bus", "omnibus", T),
            ("%bus", "buses", F),
            ("bus", "bus", T),
            ("bus", "Bus", F),
            ("b_s", "bus", T),
            ("b_s", "bs", F),
            ("b_s", "buss", F),
            ("%", "", T),
            ("_", "", F),
            ("a%b%c", "a--b--c", T),
            ("a%b%c", "a--c--b", F),
            ("%%", "x", T),
            ("[a]%", "[a]x", T),
            ("[a]%", "ax", F),
            ("a.c", "abc", F),
            ("a.c", "a.c", T),
            ("(x)+?", "(x)+?", T),
            ("%\\d%", "a\\db", T),
            ("%", "line1\nline2", T),
            ("a_c", "a\nc", T),
            ("é%", "été", T),
        ],
    )
    def test_percent_and_underscore_are_the_only_wildcards(
        self, pattern: str, text: str, result: bool
    ) -> None:
        quoted = pattern.replace("'", "''")
        assert truth(f"v LIKE '{quoted}'", {"v": text}) is result
        assert truth(f"v NOT LIKE '{quoted}'", {"v": text}) is (not result)

    def test_like_is_case_sensitive(self) -> None:
        # Decided: ordinal (case-sensitive) like every other string comparison; NServiceBus's
        # "[NServiceBus.EnclosedMessageTypes] LIKE '%Type%'" relies on exact type names anyway.
        assert not match("sys.Label LIKE '%BUS%'", system={"Label": "service bus"})
        assert match("sys.label like '%bus%'", system={"Label": "service bus"})

    def test_escape_makes_a_wildcard_literal(self) -> None:
        assert match("v LIKE 'ABC\\%' ESCAPE '\\'", {"v": "ABC%"})
        assert not match("v LIKE 'ABC\\%' ESCAPE '\\'", {"v": "ABCD"})
        assert match("v LIKE '!_%' ESCAPE '!'", {"v": "_x"})
        assert not match("v LIKE '!_%' ESCAPE '!'", {"v": "ax"})
        assert match("v LIKE '100%%' ESCAPE '%'", {"v": "100%"})
        assert match("v LIKE 'a!!b' ESCAPE '!'", {"v": "a!b"})
        assert match("v LIKE '!a' ESCAPE '!'", {"v": "a"})  # escaping an ordinary character is allowed

    def test_escape_must_be_one_character(self) -> None:
        assert syntax_error("v LIKE 'a' ESCAPE 'ab'").position == 19
        assert syntax_error("v LIKE 'a' ESCAPE ''").position == 19
        assert syntax_error("v LIKE 'a' ESCAPE 1").position == 19

    def test_pattern_ending_in_its_escape_character_is_a_syntax_error(self) -> None:
        assert "ends with its escape" in str(syntax_error("v LIKE 'abc!' ESCAPE '!'"))

    def test_constant_pattern_must_be_a_string(self) -> None:
        assert syntax_error("v LIKE 5").position == 8

    def test_any_unknown_operand_makes_like_unknown(self) -> None:
        assert truth("v LIKE 'a%'") is U
        assert truth("v LIKE NULL", {"v": "a"}) is U
        assert truth("v LIKE p", {"v": "a"}) is U
        assert truth("v LIKE 'a%' ESCAPE e", {"v": "a"}) is U

    def test_non_string_operand_makes_like_unknown(self) -> None:
        # Decided: like a type-mismatched comparison (no implicit conversion to string).
        assert truth("v LIKE '1%'", {"v": 12}) is U
        assert truth("v LIKE p", {"v": "12", "p": 1}) is U

    def test_pattern_and_escape_may_come_from_properties(self) -> None:
        assert match("v LIKE p", {"v": "abc", "p": "a%"})
        assert match("v LIKE p ESCAPE e", {"v": "a%", "p": "a#%", "e": "#"})
        assert match("v LIKE 'pre' + '%'", {"v": "prefix"})

    def test_invalid_escape_from_a_property_fails_evaluation(self) -> None:
        with pytest.raises(FilterEvaluationError, match="single character"):
            match("v LIKE 'a' ESCAPE e", {"v": "a", "e": "ab"})
        with pytest.raises(FilterEvaluationError, match="ends with its escape"):
            match("v LIKE p ESCAPE '!'", {"v": "a", "p": "a!"})

    def test_nservicebus_enclosed_message_types_filter(self) -> None:
        f = compile_filter("[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'")
        types = "Shipping.OrderAccepted, Shipping.Messages, Version=1.0.0.0;Shipping.IOrderEvent, Shipping"
        assert f.matches(props({"NServiceBus.EnclosedMessageTypes": types}))
        assert not f.matches(props({"NServiceBus.EnclosedMessageTypes": "Billing.OrderBilled, Billing"}))
        assert not f.matches(props({}))


# --- arithmetic -------------------------------------------------------------------------------------------
class TestArithmetic:
    @pytest.mark.parametrize(
        ("expression", "value"),
        [
            ("7 + 2", 9),
            ("7 - 9", -2),
            ("7 * 3", 21),
            ("7 / 2", 3),
            ("-7 / 2", -3),
            ("7 / -2", -3),
            ("7 % 3", 1),
            ("-7 % 3", -1),
            ("7 % -3", 1),
            ("7 / 2.0", 3.5),
            ("1 + 0.5", 1.5),
            ("7.5 % 2", 1.5),
            ("-7.5 % 2", -1.5),
            ("+5", 5),
            ("-(2 - 5)", 3),
            ("9223372036854775807 + 1", -(2**63)),
            ("-9223372036854775808 - 1", 2**63 - 1),
            ("4611686018427387904 * 2", -(2**63)),
            ("-9223372036854775808 / -1", -(2**63)),
        ],
    )
    def test_numeric_operators_follow_csharp(self, expression: str, value: Any) -> None:
        # C#: Int64 arithmetic truncates division toward zero, the remainder takes the dividend's sign,
        # and (unchecked, decided) overflow wraps around; any Double operand makes the result Double.
        assert match(f"({expression}) = @v AND ({expression}) - @v = 0", v=value)

    def test_integer_division_by_zero_fails_evaluation(self) -> None:
        # C# throws DivideByZeroException for Int64 / 0, which Azure reports as a FilterException.
        with pytest.raises(FilterEvaluationError, match="division by zero"):
            match("a / 0 = 1", {"a": 1})
        with pytest.raises(FilterEvaluationError, match="modulo by zero"):
            match("a % b = 1", {"a": 1, "b": 0})

    def test_double_division_by_zero_is_infinite(self) -> None:
        assert match("a / 0.0 > 1e308 AND -a / 0 < -1e308", {"a": 1.0})
        assert match("(a / 0.0) <> (a / 0.0)", {"a": 0.0})  # NaN
        assert match("(a % 0.0) <> (a % 0.0)", {"a": 1.0})

    def test_plus_concatenates_strings(self) -> None:
        assert match("first + ' ' + last = 'Ada Lovelace'", {"first": "Ada", "last": "Lovelace"})

    @pytest.mark.parametrize(
        "expression", ["'a' + 1", "1 + 'a'", "'a' - 'b'", "'a' * 2", "TRUE + 1", "-'a'", "-TRUE", "+'a'"]
    )
    def test_arithmetic_on_mismatched_types_is_unknown(self, expression: str) -> None:
        # Decided: no implicit conversion (C# would format the number into the string, .NET-style, for
        # string + number; the emulator does not reproduce .NET number formatting).
        assert truth(f"{expression} IS NULL") is T

    def test_arithmetic_with_unknown_is_unknown(self) -> None:
        assert truth("missing + 1 = 1") is U
        assert truth("-missing = 1") is U
        assert truth("missing / 0 = 1") is U  # UNKNOWN before division by zero is considered

    def test_datetime_and_timespan_arithmetic(self) -> None:
        t1, t2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, 0, 30, tzinfo=UTC)
        user = {"DateTimeMp1": t1, "DateTimeMp2": t2}
        assert match("(DateTimeMp2-DateTimeMp1) <= @timespan", user, timespan=timedelta(hours=1))
        assert not match("(DateTimeMp2-DateTimeMp1) <= @timespan", user, timespan=timedelta(minutes=10))
        assert match(
            "DateTimeMp1 + @d = DateTimeMp2 AND DateTimeMp2 - @d = DateTimeMp1", user, d=timedelta(minutes=30)
        )
        assert match("@d + @d - @d = @d", user, d=timedelta(minutes=30))

    def test_datetime_overflow_fails_evaluation(self) -> None:
        with pytest.raises(FilterEvaluationError, match="overflow"):
            match("t + @d IS NULL", {"t": datetime.max}, d=timedelta(days=1))


# --- functions and parameters -----------------------------------------------------------------------------
class TestFunctionsAndParameters:
    def test_newid_returns_a_fresh_guid_each_call(self) -> None:
        assert match("newid() IS NOT NULL AND NEWID() <> newid()")

    def test_property_function_reads_a_property_by_computed_name(self) -> None:
        user = {"NServiceBus.MessageIntent": "Publish", "kind": "Intent"}
        assert match("property('NServiceBus.MessageIntent') = 'Publish'", user)
        assert match("p('NServiceBus.Message' + kind) = 'Publish'", user)
        assert match("P('nservicebus.messageintent') = 'Publish'", user)
        assert truth("p('absent') = 1", user) is U
        assert truth("p(1) = 1", user) is U

    def test_property_function_does_not_read_system_properties(self) -> None:
        # Decided: per MicrosoftDocs/azure-docs issue #87667, property('sys.Label') does not reach the
        # system property; the name is taken literally as an application property name.
        assert truth("property('sys.Label') = 'x'", system={"Label": "x"}) is U
        assert match("property('sys.Label') = 'y'", {"sys.Label": "y"}, system={"Label": "x"})

    def test_unknown_function_is_a_syntax_error(self) -> None:
        err = syntax_error("a = upper(b)")
        assert err.position == 5
        assert "newid()" in str(err)

    def test_function_arity_is_checked(self) -> None:
        assert syntax_error("newid(1) = 1").position == 7
        assert syntax_error("p() = 1").position == 3
        assert syntax_error("p('a', 'b') = 1").position == 6

    def test_parameters_supply_typed_constants(self) -> None:
        params: dict[str, Any] = {"@s": "blue", "@i": 10, "@d": 2.5, "@b": True, "@n": None}
        user = {"s": "blue", "i": 10, "d": 2.5, "b": True}
        f = compile_filter("s = @s AND i = @i AND d = @d AND b = @b AND @n IS NULL", params)
        assert f.matches(props(user))

    def test_parameter_names_may_omit_the_at_sign_and_ignore_case(self) -> None:
        # Decided: the Python SDK examples key parameters as "@name"; plain "name" is accepted too.
        assert compile_filter("a = @Color", {"color": "red"}).matches(props({"a": "red"}))
        assert compile_filter("a = @color", {"@COLOR": "red"}).matches(props({"a": "red"}))

    def test_missing_parameter_is_a_syntax_error_at_creation(self) -> None:
        err = syntax_error("a = 1 AND b = @missing", {"other": 1})
        assert err.position == 15
        assert "@missing" in str(err)

    def test_parameter_of_unsupported_type_is_rejected(self) -> None:
        assert "unsupported type" in str(syntax_error("a = @p", {"p": [1]}))
        assert "Int64" in str(syntax_error("a = @p", {"p": 2**64}))

    def test_parameter_in_like_pattern_is_compiled_once(self) -> None:
        assert compile_filter("a LIKE @p", {"p": "x%"}).matches(props({"a": "xyz"}))
        assert syntax_error("a LIKE @p", {"p": 5}).position == 8


# --- syntax -----------------------------------------------------------------------------------------------
class TestSyntax:
    def test_keywords_are_case_insensitive(self) -> None:
        user = {"a": 1, "b": "xy", "c": None}
        assert match(
            "a = 1 and NOT b like 'z%' Or c iS nOt NuLl AnD exists(a) and a In (1) and b not LIKE 'q'", user
        )

    def test_whitespace_is_free_form(self) -> None:
        assert match("\ta\n=\r\n1  AND(b)IN('x')", {"a": 1, "b": "x"})

    @pytest.mark.parametrize(
        ("expression", "position", "message"),
        [
            ("", 1, "found an empty filter"),
            ("a = 'x' AND", 12, "expected an expression after 'AND', found end of input"),
            ("color = 'red' AND", 18, "after 'AND'"),
            ("a = 1 OR OR b = 2", 10, "expected an expression after 'OR'"),
            ("(a = 1", 7, "expected ')' to close the '(' opened at position 1"),
            ("a = 1)", 6, "expected AND, OR or the end of the filter after '1', found ')'"),
            ("a = 1 b = 2", 7, "found 'b'"),
            ("a IN 1", 6, "expected '(' after 'IN'"),
            ("a IN ()", 7, "expected an expression"),
            ("a IN (1 2)", 9, "expected ',' or ')' in the IN list"),
            ("a IS 1", 6, "expected NULL after 'IS'"),
            ("a NOT 1", 3, "expected"),
            ("a ! b", 3, "unexpected character '!'"),
            ("a = 1 AND 2", 11, "expected a condition"),
            ("1", 1, "expected a condition"),
            ("(a = 1) + 2", 2, "expected a value before '+', found a condition"),
            ("NOT 5", 5, "after 'NOT', found a value"),
            ("a = @", 6, "expected a parameter name"),
            ("[abc = 1", 1, "unterminated delimited identifier"),
            ('"abc = 1', 1, "unterminated quoted identifier"),
            ("sys. = 1", 6, "expected a property name after 'sys.'"),
            ("a == 1", 4, "expected an expression after '='"),
        ],
    )
    def test_syntax_errors_say_what_was_expected_and_where(
        self, expression: str, position: int, message: str
    ) -> None:
        err = syntax_error(expression)
        assert err.position == position
        assert message in str(err)
        assert str(err).endswith(f"at position {position}")

    def test_long_and_or_chains_compile(self) -> None:
        chain = " OR ".join(f"a={i}" for i in range(100))
        assert len(chain) <= 1024
        assert match(chain, {"a": 99})  # 100 operands
        assert not match(chain.replace(" OR ", " AND "), {"a": 1})

    def test_nesting_is_limited_to_40_levels(self) -> None:
        # Decided: Azure's limit is undocumented; real filters nest a few levels. The bound keeps the
        # parser and the generated Python inside CPython's recursion and parenthesis limits.
        assert match("(" * 40 + "a = 1" + ")" * 40, {"a": 1})
        assert syntax_error("(" * 41 + "a = 1" + ")" * 41).position == 41
        assert syntax_error("-" * 41 + "a = 1").position == 41
        assert "40 levels" in str(syntax_error(" + ".join(["a"] * 42) + " = 1"))
        assert match(" + ".join(["a"] * 41) + " = 41", {"a": 1})

    def test_syntax_error_is_a_value_error(self) -> None:
        assert isinstance(syntax_error("a ="), ValueError)

    def test_filter_length_limit_is_1024_characters(self) -> None:
        ok = "a = '" + "x" * 1018 + "'"
        assert len(ok) == 1024
        compile_filter(ok)
        err = syntax_error(ok + " ")
        assert err.position == 1025
        assert "1025 characters" in str(err) and "at most 1024" in str(err)


# --- published examples, special filters, robustness ------------------------------------------------------
_EXAMPLES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("sys.Label LIKE '%bus%'", {}, {"Label": "service bus"}, True),
    ("sys.Label LIKE '%bus%' OR user.tag IN ('queue', 'topic', 'subscription')", {"tag": "topic"}, {}, True),
    ("StoreId IN('Store1', 'Store2', 'Store3')", {"StoreId": "Store3"}, {}, True),
    (
        "sys.To IN ('Store5','Store6','Store7') OR StoreId = 'Store8'",
        {"StoreId": "Store8"},
        {"To": "x"},
        True,
    ),
    (
        "sys.To NOT IN ('Store1','Store2','Store3','Store4','Store5','Store6','Store7','Store8') OR "
        "StoreId NOT IN ('Store1','Store2','Store3','Store4','Store5','Store6','Store7','Store8')",
        {"StoreId": "Store1"},
        {"To": "Store2"},
        False,
    ),
    ("MessageProperty = 1", {"MessageProperty": 1}, {}, True),
    ("MessageProperty > 1", {"MessageProperty": 1}, {}, False),
    ("MessageProperty > 2.08", {"MessageProperty": 3}, {}, True),
    ("MessageProperty = 1 AND MessageProperty2 = 3", {"MessageProperty": 1, "MessageProperty2": 3}, {}, True),
    ("MessageProperty = 1 OR MessageProperty2 = 3", {"MessageProperty2": 3}, {}, True),
    ("color='blue' AND quantity=10", {"color": "blue", "quantity": 10}, {}, True),
    ("user.color='red'", {"color": "red"}, {}, True),
    (
        "sys.CorrelationId = 'email' AND sender = 'joseph' AND (importance IS NULL OR importance = 'high')",
        {"sender": "joseph"},
        {"CorrelationId": "email"},
        True,
    ),
    (
        "sys.MessageId = '123456' AND userProp1 = 'value1'",
        {"userProp1": "value1"},
        {"MessageId": "123456"},
        True,
    ),
    ("sys.correlationid like 'abc-%'", {}, {"CorrelationId": "abc-1"}, True),
    ("user.SuperHero like 'SuperMan%'", {"SuperHero": "SuperManX"}, {}, True),
    ("sys.messageid = 'xxxx'", {}, {"MessageId": "xxxx"}, True),
    ("1=1", {}, {}, True),
    ("1=0", {}, {}, False),
]


class TestPublishedExamplesAndApi:
    @pytest.mark.parametrize(("expression", "user", "system", "result"), _EXAMPLES)
    def test_published_examples(
        self, expression: str, user: dict[str, Any], system: dict[str, Any], result: bool
    ) -> None:
        assert compile_filter(expression).matches(props(user, system)) is result

    def test_true_and_false_filters(self) -> None:
        assert TRUE_FILTER.expression == "1=1" and TRUE_FILTER.matches(props())
        assert FALSE_FILTER.expression == "1=0" and not FALSE_FILTER.matches(props())

    def test_compiled_filter_keeps_its_expression_and_is_reusable(self) -> None:
        f = compile_filter("a > 1")
        assert f.expression == "a > 1"
        assert [f.matches(props({"a": n})) for n in range(4)] == [False, False, True, True]

    def test_evaluation_never_mutates_the_message(self) -> None:
        p = props({"Color": "red", "n": 1}, {"Label": "x"})
        compile_filter("color = 'red' AND EXISTS(N) AND p('x') IS NULL AND sys.Label = 'x'").matches(p)
        assert p == props({"Color": "red", "n": 1}, {"Label": "x"})

    def test_values_of_unmodelled_types_are_unknown_not_a_crash(self) -> None:
        odd: dict[str, Any] = {"a": [1], "b": {"k": 1}, "c": object()}
        for name in "abc":
            assert truth(f"{name} = 1", odd) is U
            assert truth(f"{name} IN (1, 2)", odd) is F
            assert truth(f"{name} + 1 IS NULL", odd) is T


def test_two_spellings_of_a_name_each_prefer_their_exact_match_even_when_it_is_null() -> None:
    # Found by the property test: "X Y" and [x y] must not share one lookup.
    props = MessageProperties(system={}, user={"x y": None, "X Y": 0})
    assert compile_filter('"X Y" = 0').matches(props)
    assert compile_filter("[x y] IS NULL").matches(props)
    assert not compile_filter('NOT ((NULL = NULL) AND (("X Y" + [x y]) IN (NULL)))').matches(props)
