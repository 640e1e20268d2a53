"""Behaviour specs for the Config.json reader, its validators, durations and the cloud limits."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator import limits
from emulator.broker.properties import (
    CorrelationFilterConfig,
    EntityStatus,
    NamespaceConfig,
    QueueConfig,
    QueueProperties,
    RuleConfig,
    SubscriptionConfig,
    SubscriptionProperties,
    TopicConfig,
    TopicProperties,
    default_config,
)
from emulator.config import ConfigError, load_config, parse_config
from emulator.durations import MAX_VALUE_TEXT, format_duration, parse_duration
from emulator.jsonc import strip_json_comments
from emulator.validation import (
    validate_entity_name,
    validate_entity_path,
    validate_namespace,
    validate_queue_properties,
    validate_rule,
    validate_subscription_properties,
    validate_topic_properties,
)

SAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "emulator" / "sample-config.json"

# Verbatim from the official emulator's Config.json as transcribed in the reference notes (section 1.5).
OFFICIAL_SAMPLE = """
{
  "UserConfig": {
    "Namespaces": [
      {
        "Name": "sbemulatorns",
        "Queues": [
          { "Name": "queue.1",
            "Properties": {
              "DeadLetteringOnMessageExpiration": false,
              "DefaultMessageTimeToLive": "PT1H",
              "DuplicateDetectionHistoryTimeWindow": "PT20S",
              "ForwardDeadLetteredMessagesTo": "",
              "ForwardTo": "",
              "LockDuration": "PT1M",
              "MaxDeliveryCount": 3,
              "RequiresDuplicateDetection": false,
              "RequiresSession": false } } ],
        "Topics": [
          { "Name": "topic.1",
            "Properties": {
              "DefaultMessageTimeToLive": "PT1H",
              "DuplicateDetectionHistoryTimeWindow": "PT20S",
              "RequiresDuplicateDetection": false },
            "Subscriptions": [
              { "Name": "subscription.2",
                "Properties": {
                  "DeadLetteringOnMessageExpiration": false,
                  "DefaultMessageTimeToLive": "PT1H",
                  "LockDuration": "PT1M",
                  "MaxDeliveryCount": 3,
                  "ForwardDeadLetteredMessagesTo": "",
                  "ForwardTo": "",
                  "RequiresSession": false },
                "Rules": [
                  { "Name": "user-prop-filter-1",
                    "Properties": {
                      "FilterType": "Correlation",
                      "CorrelationFilter": { "Properties": { "prop1": "value1" } } } } ] },
              { "Name": "subscription.4",
                "Properties": { "DeadLetteringOnMessageExpiration": false, "DefaultMessageTimeToLive": "PT1H",
                  "LockDuration": "PT1M", "MaxDeliveryCount": 3, "ForwardDeadLetteredMessagesTo": "",
                  "ForwardTo": "", "RequiresSession": false },
                "Rules": [
                  { "Name": "sql-filter-1",
                    "Properties": {
                      "FilterType": "Sql",
                      "SqlFilter": { "SqlExpression": "sys.MessageId = '123456' AND userProp1 = 'value1'" },
                      "Action": { "SqlExpression": "SET sys.To = 'Entity'" } } } ] } ] } ] } ],
    "Logging": { "Type": "File" }
  }
}
"""


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def config_text(
    queues: list[dict[str, Any]] | None = None,
    topics: list[dict[str, Any]] | None = None,
    namespace: str = "sbemulatorns",
) -> str:
    document = {
        "UserConfig": {
            "Namespaces": [{"Name": namespace, "Queues": queues or [], "Topics": topics or []}],
            "Logging": {"Type": "Console"},
        }
    }
    return json.dumps(document, indent=2)


def queue(name: str, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": properties}


def topic(name: str, subscriptions: list[dict[str, Any]] | None = None, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": properties, "Subscriptions": subscriptions or []}


def subscription(name: str, rules: list[dict[str, Any]] | None = None, **properties: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"Name": name, "Properties": properties}
    if rules is not None:
        entry["Rules"] = rules
    return entry


def sql_rule(name: str, expression: str, action: str | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}}
    if action is not None:
        props["Action"] = {"SqlExpression": action}
    return {"Name": name, "Properties": props}


def correlation_rule(name: str, **filter_fields: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": {"FilterType": "Correlation", "CorrelationFilter": filter_fields}}


def problems_of(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.problems


def single_problem(text: str) -> str:
    problems = problems_of(text)
    assert len(problems) == 1, problems
    return problems[0]


def one_queue(**properties: Any) -> QueueProperties:
    return parse_config(config_text([queue("q", **properties)])).namespace.queues[0].properties


# --------------------------------------------------------------------------------------------------
# durations
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT30S", timedelta(seconds=30)),
        ("PT1M", timedelta(minutes=1)),
        ("PT1H", timedelta(hours=1)),
        ("P1D", timedelta(days=1)),
        ("P1DT2H3M4.5S", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("PT0S", timedelta(0)),
        ("P2W", timedelta(days=14)),
        ("P1Y", timedelta(days=365)),  # XmlConvert: a year is 365 days
        ("P1M", timedelta(days=30)),  # ... and a month 30 days
        ("PT1.5M", timedelta(seconds=90)),
        ("pt90s", timedelta(seconds=90)),
        ("  PT5M  ", timedelta(minutes=5)),
        ("PT0.0000001S", timedelta(0)),  # one .NET tick rounds to zero microseconds
    ],
)
def test_iso8601_durations_parse_to_timedeltas(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00:05:00", timedelta(minutes=5)),
        ("00:00:00.80", timedelta(milliseconds=800)),
        ("1.02:03:04", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("1.02:03:04.5000000", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
        ("02:30", timedelta(hours=2, minutes=30)),
        ("-00:00:00.0010000", timedelta(milliseconds=-1)),  # host.json's "infinite" lock renewal
    ],
)
def test_dotnet_timespan_text_as_used_by_host_json_parses(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_timespan_max_value_text_means_infinite() -> None:
    assert parse_duration("P10675199DT2H48M5.4775807S") is None


def test_any_duration_of_at_least_10675199_days_means_infinite() -> None:
    assert parse_duration("P10675199D") is None
    assert parse_duration("P99999999999D") is None
    assert parse_duration("P10675198D") == timedelta(days=10675198)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("P", "no components"),
        ("PT", "no components"),
        ("P1DT", "'T' must be followed"),
        ("P1H", "must follow the 'T' separator"),
        ("garbage", "expected an ISO-8601 duration"),
        ("PT1X", "expected an ISO-8601 duration"),
        ("30", "bare number has no unit"),
        ("PT1.5M30S", "only the last component may have a fraction"),
        ("25:00:00", "hours must be 0..23"),
        ("00:61:00", "minutes must be 0..59"),
        ("00:00:75", "seconds must be 0..59"),
        ("-P99999999999D", "cannot be represented"),
    ],
)
def test_garbage_durations_raise_value_error_naming_the_text(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert fragment in str(caught.value)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (timedelta(seconds=60), "PT1M"),
        (timedelta(seconds=90), "PT1M30S"),
        (timedelta(days=1), "P1D"),
        (timedelta(days=1, hours=2, minutes=3, seconds=4.5), "P1DT2H3M4.5S"),
        (timedelta(milliseconds=500), "PT0.5S"),
        (timedelta(hours=1), "PT1H"),
        (timedelta(0), "PT0S"),
        (timedelta(milliseconds=-1), "-PT0.001S"),
        (None, MAX_VALUE_TEXT),
        (timedelta(days=10675199), MAX_VALUE_TEXT),
    ],
)
def test_durations_format_the_way_azure_writes_them(value: timedelta | None, expected: str) -> None:
    assert format_duration(value) == expected


@pytest.mark.parametrize("text", ["PT30S", "PT1M", "P1D", "P1DT2H3M4.5S", "PT0.5S", "PT1H", MAX_VALUE_TEXT])
def test_canonical_duration_text_round_trips(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


@given(st.timedeltas(min_value=timedelta(days=-10675198), max_value=timedelta(days=10675198)))
def test_every_finite_timedelta_round_trips_through_its_text(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


# --------------------------------------------------------------------------------------------------
# limits
# --------------------------------------------------------------------------------------------------


def test_limits_are_the_cloud_limits_not_the_official_emulators() -> None:
    assert limits.MAX_ENTITY_PATH_LENGTH == 260
    assert limits.MAX_ENTITY_NAME_LENGTH == 50
    assert (
        timedelta(seconds=5),
        timedelta(minutes=5),
    ) == (limits.LOCK_DURATION_MIN, limits.LOCK_DURATION_MAX)
    assert limits.MAX_DELIVERY_COUNT_MAX == 2147483647  # the emulator caps it at 10
    assert timedelta(days=7) == limits.DUPLICATE_DETECTION_WINDOW_MAX  # the emulator caps it at 5 minutes
    assert limits.SUBSCRIPTIONS_PER_TOPIC == 2000  # the emulator allows 50
    assert limits.ENTITIES_PER_NAMESPACE == 10000  # the emulator allows 50
    assert limits.MAX_TRANSFER_HOPS == 4


# --------------------------------------------------------------------------------------------------
# loading: samples and defaults
# --------------------------------------------------------------------------------------------------


def test_official_emulator_sample_loads_unchanged() -> None:
    config = parse_config(OFFICIAL_SAMPLE)
    assert config.logging_type == "File"
    namespace = config.namespace
    assert namespace.name == "sbemulatorns"
    (q,) = namespace.queues
    assert q.name == "queue.1"
    assert q.properties.max_delivery_count == 3
    assert q.properties.lock_duration == timedelta(minutes=1)
    assert q.properties.default_message_time_to_live == timedelta(hours=1)
    assert q.properties.duplicate_detection_history_time_window == timedelta(seconds=20)
    assert q.properties.forward_to is None
    assert q.properties.forward_dead_lettered_messages_to is None
    (t,) = namespace.topics
    assert [s.name for s in t.subscriptions] == ["subscription.2", "subscription.4"]
    correlation = t.subscriptions[0].rules[0]
    assert correlation.filter_type == "Correlation"
    assert correlation.correlation is not None
    assert dict(correlation.correlation.properties) == {"prop1": "value1"}
    sql = t.subscriptions[1].rules[0]
    assert sql.filter_type == "Sql"
    assert sql.sql_expression == "sys.MessageId = '123456' AND userProp1 = 'value1'"
    assert sql.action_sql == "SET sys.To = 'Entity'"


def test_official_emulator_style_comments_inside_a_correlation_filter_are_tolerated() -> None:
    text = """
    {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [], "Topics": [{
        "Name": "topic.1",
        "Subscriptions": [{"Name": "subscription.3", "Rules": [{"Name": "sys-prop-filter-1", "Properties": {
            "FilterType": "Correlation",
            "CorrelationFilter": {
                "ContentType": "application/text",
                "CorrelationId": "id1",
                "Label": "subject1",
                "MessageId": "msgid1",
                "ReplyTo": "someQueue",
                "ReplyToSessionId": "sessionId",
                "SessionId": "session1",
                "To": "xyz"
                // "Properties": { "prop3": "value3" }   <- user properties can be added here
            }}}]}]}]}],
     "Logging": {"Type": "File"}}}
    """
    rule = parse_config(text).namespace.topics[0].subscriptions[0].rules[0]
    assert rule.correlation == CorrelationFilterConfig(
        content_type="application/text",
        correlation_id="id1",
        subject="subject1",
        message_id="msgid1",
        reply_to="someQueue",
        reply_to_session_id="sessionId",
        session_id="session1",
        to="xyz",
    )


def test_bundled_sample_config_loads_with_its_topology() -> None:
    config = load_config(SAMPLE_CONFIG)
    queues = {q.name: q.properties for q in config.namespace.queues}
    assert set(queues) == {"orders", "orders-errors", "wallet-transactions", "shipping"}
    assert queues["orders"].max_delivery_count == 10
    assert queues["orders"].lock_duration == timedelta(seconds=30)
    wallet = queues["wallet-transactions"]
    assert wallet.requires_session and wallet.requires_duplicate_detection
    assert wallet.duplicate_detection_history_time_window == timedelta(hours=1)
    (bundle,) = config.namespace.topics
    assert bundle.name == "bundle-1"
    (shipping,) = bundle.subscriptions
    assert shipping.name == "Shipping"
    assert shipping.properties.forward_to == "shipping"
    (rule,) = shipping.rules
    assert rule.filter_type == "Sql"
    assert rule.sql_expression == "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'"


def test_default_config_is_the_sbemulatorns_namespace_without_entities() -> None:
    config = default_config()
    assert config.namespace == NamespaceConfig(name="sbemulatorns", queues=(), topics=())
    assert config.logging_type == "Console"


def test_omitted_queue_properties_take_the_azure_defaults() -> None:
    config = parse_config(config_text([{"Name": "bare"}]))
    assert config.namespace.queues[0].properties == QueueProperties()
    props = QueueProperties()
    assert props.lock_duration == timedelta(seconds=60)
    assert props.max_delivery_count == 10
    assert props.default_message_time_to_live is None
    assert props.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert props.max_size_in_megabytes == 1024
    # Unset: the namespace gives its tier's default (256 KB Standard, 1024 KB Premium: test_namespace_tier).
    assert props.max_message_size_in_kilobytes is None
    assert props.status is EntityStatus.ACTIVE
    assert props.enable_batched_operations is True


def test_omitted_topic_and_subscription_properties_take_the_azure_defaults() -> None:
    config = parse_config(config_text(topics=[{"Name": "t", "Subscriptions": [{"Name": "s"}]}]))
    (t,) = config.namespace.topics
    assert t.properties == TopicProperties()
    assert t.subscriptions[0].properties == SubscriptionProperties()
    assert SubscriptionProperties().dead_lettering_on_filter_evaluation_exceptions is True


def test_json_null_property_means_use_the_default() -> None:
    assert one_queue(LockDuration=None, ForwardTo=None).lock_duration == timedelta(seconds=60)


def test_subscription_without_rules_keeps_an_empty_rule_list_for_the_broker_to_default() -> None:
    config = parse_config(config_text(topics=[topic("t", [subscription("s")])]))
    assert config.namespace.topics[0].subscriptions[0].rules == ()


def test_topic_without_subscriptions_is_accepted() -> None:
    config = parse_config(config_text(topics=[{"Name": "t"}]))
    assert config.namespace.topics[0].subscriptions == ()


def test_logging_section_is_optional_and_defaults_to_console() -> None:
    text = '{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns"}]}}'
    assert parse_config(text).logging_type == "Console"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("File", "File"),
        ("console", "Console"),
        ("File,Console", "File,Console"),
        ("Console, File", "Console,File"),
    ],
)
def test_logging_type_accepts_the_official_values(value: str, expected: str) -> None:
    text = json.dumps({"UserConfig": {"Namespaces": [{"Name": "sbemulatorns"}], "Logging": {"Type": value}}})
    assert parse_config(text).logging_type == expected


def test_unknown_logging_type_is_refused() -> None:
    text = json.dumps(
        {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns"}], "Logging": {"Type": "Syslog"}}}
    )
    assert "Logging.Type must be one of Console, File, File,Console, Console,File" in single_problem(text)


def test_extension_properties_are_read() -> None:
    props = one_queue(
        MaxSizeInMegabytes=1,
        MaxMessageSizeInKilobytes=1024,
        Status="SendDisabled",
        AutoDeleteOnIdle="PT5M",
        EnableBatchedOperations=False,
        UserMetadata="owner=payments",
    )
    assert props.max_size_in_megabytes == 1
    assert props.max_message_size_in_kilobytes == 1024
    assert props.status is EntityStatus.SEND_DISABLED
    assert props.auto_delete_on_idle == timedelta(minutes=5)
    assert props.enable_batched_operations is False
    assert props.user_metadata == "owner=payments"


def test_timespan_text_is_accepted_for_durations_too() -> None:
    assert one_queue(LockDuration="00:00:45").lock_duration == timedelta(seconds=45)


def test_max_value_ttl_means_infinite_time_to_live() -> None:
    assert one_queue(DefaultMessageTimeToLive=MAX_VALUE_TEXT).default_message_time_to_live is None


# --------------------------------------------------------------------------------------------------
# comments and JSON syntax
# --------------------------------------------------------------------------------------------------


def test_line_and_block_comments_are_tolerated() -> None:
    text = """
    // leading comment
    {
      /* block
         comment */
      "UserConfig": { // trailing comment
        "Namespaces": [ { "Name": "sbemulatorns", /* inline */ "Queues": [ { "Name": "q" } ] } ]
      }
    }
    // final comment without newline"""
    assert [q.name for q in parse_config(text).namespace.queues] == ["q"]


def test_double_slash_inside_a_string_value_is_not_a_comment() -> None:
    text = """{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": "q", "Properties": {"UserMetadata": "sb://x//y /* not a comment */"}} // real comment
    ]}]}}"""
    assert parse_config(text).namespace.queues[0].properties.user_metadata == "sb://x//y /* not a comment */"


def test_escaped_quote_does_not_end_a_string_for_the_comment_stripper() -> None:
    text = r'{"a": "say \"hi\" // still text", "b": 1} // comment'
    assert json.loads(strip_json_comments(text)) == {"a": 'say "hi" // still text', "b": 1}


def test_comment_stripping_keeps_line_and_column_positions() -> None:
    text = '{\n  /* one\n two */ "a": 1, // x\n  "b": 2\n}'
    stripped = strip_json_comments(text)
    assert len(stripped) == len(text)
    assert stripped.count("\n") == text.count("\n")


def test_unterminated_block_comment_is_reported_with_its_position() -> None:
    problem = single_problem('{\n  /* never closed\n "UserConfig": {}}')
    assert problem == "unterminated /* comment starting at line 2, column 3"


def test_invalid_json_is_reported_with_line_and_column() -> None:
    text = '{\n  "UserConfig": {\n    "Namespaces": [ { "Name": "sbemulatorns" } ]\n    "Logging": {}\n  }\n}'
    problem = single_problem(text)
    assert problem.startswith("invalid JSON at line 4, column 5:")
    assert "delimiter" in problem


def test_json_error_positions_count_lines_hidden_in_comments() -> None:
    text = '/* a\nb\nc */ {"UserConfig": oops}'
    assert single_problem(text).startswith("invalid JSON at line 3, column 21:")


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_bytes("\ufeff".encode() + config_text([queue("q")]).encode())
    assert load_config(path).namespace.queues[0].name == "q"


def test_missing_file_is_a_config_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value)
    assert caught.value.problems[0].startswith("cannot read configuration file")


def test_load_config_accepts_str_paths(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(config_text([queue("q")]), encoding="utf-8")
    assert load_config(str(path)).namespace.queues[0].name == "q"


def test_nan_is_not_accepted_as_a_value() -> None:
    text = config_text([queue("q")]).replace('"Properties": {}', '"Properties": {"MaxDeliveryCount": NaN}')
    assert single_problem(text) == "Queue 'q': MaxDeliveryCount must be an integer, got NaN"


# --------------------------------------------------------------------------------------------------
# keys
# --------------------------------------------------------------------------------------------------


def test_property_keys_are_matched_case_insensitively() -> None:
    props = one_queue(lockduration="PT20S", MAXDELIVERYCOUNT=4, requiresSession=True)
    assert props.lock_duration == timedelta(seconds=20)
    assert props.max_delivery_count == 4
    assert props.requires_session is True


def test_structural_keys_are_matched_case_insensitively() -> None:
    text = '{"userconfig": {"NAMESPACES": [{"name": "sbemulatorns", "queues": [{"NAME": "q"}]}]}}'
    assert parse_config(text).namespace.queues[0].name == "q"


def test_unknown_property_key_is_refused_naming_it_and_the_allowed_keys() -> None:
    problem = single_problem(config_text([queue("orders", LockDurationn="PT30S")]))
    assert problem.startswith("Queue 'orders': unknown key 'LockDurationn' in Properties (allowed: ")
    assert "LockDuration, MaxDeliveryCount" in problem
    assert "UserMetadata" in problem


def test_unknown_entity_key_is_refused() -> None:
    problem = single_problem(config_text([{"Name": "orders", "Propertes": {}}]))
    assert problem == "Queue 'orders': unknown key 'Propertes' (allowed: Name, Properties)"


def test_unknown_key_on_a_subscription_names_its_full_path() -> None:
    text = config_text(topics=[topic("t", [{"Name": "s", "Filters": []}])])
    assert single_problem(text) == (
        "Subscription 't/Subscriptions/s': unknown key 'Filters' (allowed: Name, Properties, Rules)"
    )


def test_topic_only_property_on_a_queue_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", SupportOrdering=True)]))
    assert "unknown key 'SupportOrdering' in Properties" in problem


def test_the_same_key_twice_in_different_case_is_refused() -> None:
    text = config_text([queue("orders")]).replace(
        '"Properties": {}', '"Properties": {"LockDuration": "PT30S", "lockduration": "PT40S"}'
    )
    assert single_problem(text) == "Queue 'orders': key 'LockDuration' appears more than once in Properties"


def test_schema_key_at_the_top_level_is_allowed() -> None:
    text = '{"$schema": "./Config-schema.json", "UserConfig": {"Namespaces": [{"Name": "sbemulatorns"}]}}'
    assert parse_config(text).namespace.name == "sbemulatorns"


# --------------------------------------------------------------------------------------------------
# types
# --------------------------------------------------------------------------------------------------


def test_non_boolean_flag_is_refused_with_the_value_shown() -> None:
    problem = single_problem(config_text([queue("orders", RequiresSession="yes")]))
    assert problem == "Queue 'orders': RequiresSession must be a boolean, got \"yes\""


@pytest.mark.parametrize(
    ("value", "shown"), [("10", '"10"'), (10.5, "10.5"), (True, "true"), ([1], "an array")]
)
def test_non_integer_max_delivery_count_is_refused(value: Any, shown: str) -> None:
    problem = single_problem(config_text([queue("orders", MaxDeliveryCount=value)]))
    assert problem == f"Queue 'orders': MaxDeliveryCount must be an integer, got {shown}"


def test_number_where_a_duration_is_expected_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", LockDuration=30)]))
    assert problem == "Queue 'orders': LockDuration must be an ISO-8601 duration string such as PT30S, got 30"


def test_malformed_duration_is_refused_naming_property_and_text() -> None:
    problem = single_problem(config_text([queue("orders", LockDuration="30 seconds")]))
    assert problem.startswith(
        "Queue 'orders': LockDuration is not a valid duration: invalid duration '30 seconds'"
    )


def test_non_string_forward_to_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", ForwardTo=5)]))
    assert problem == "Queue 'orders': ForwardTo must be a string, got 5"


def test_unknown_status_is_refused_listing_the_statuses() -> None:
    problem = single_problem(config_text([queue("orders", Status="Paused")]))
    assert problem == (
        "Queue 'orders': Status must be one of Active, Disabled, SendDisabled, ReceiveDisabled, "
        'got "Paused"'
    )


def test_properties_that_are_not_an_object_are_refused() -> None:
    problem = single_problem(config_text([{"Name": "orders", "Properties": []}]))
    assert problem == "Queue 'orders': Properties must be an object, got an array"


def test_queues_that_are_not_an_array_are_refused() -> None:
    text = '{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": {"Name": "q"}}]}}'
    assert single_problem(text) == "Namespace 'sbemulatorns': Queues must be an array, got an object"


def test_entity_without_a_name_is_refused_by_position() -> None:
    problem = single_problem(config_text([queue("a"), {"Properties": {}}]))
    assert problem == "Queue #2: Name is required"


# --------------------------------------------------------------------------------------------------
# ranges
# --------------------------------------------------------------------------------------------------


def test_lock_duration_above_five_minutes_is_refused_naming_queue_property_and_range() -> None:
    problem = single_problem(config_text([queue("orders", LockDuration="PT10M")]))
    assert problem == "Queue 'orders': LockDuration PT10M is out of range (allowed PT5S..PT5M)"


def test_lock_duration_below_five_seconds_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", LockDuration="PT4S")]))
    assert problem == "Queue 'orders': LockDuration PT4S is out of range (allowed PT5S..PT5M)"


@pytest.mark.parametrize("value", ["PT5S", "PT5M"])
def test_lock_duration_bounds_are_inclusive(value: str) -> None:
    assert one_queue(LockDuration=value).lock_duration == parse_duration(value)


def test_infinite_lock_duration_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", LockDuration=MAX_VALUE_TEXT)]))
    assert problem == f"Queue 'orders': LockDuration {MAX_VALUE_TEXT} is out of range (allowed PT5S..PT5M)"


def test_zero_max_delivery_count_on_a_subscription_is_refused_naming_its_path() -> None:
    problem = single_problem(
        config_text(topics=[topic("orders", [subscription("billing", MaxDeliveryCount=0)])])
    )
    assert problem == (
        "Subscription 'orders/Subscriptions/billing': "
        "MaxDeliveryCount 0 is out of range (allowed 1..2147483647)"
    )


def test_max_delivery_count_above_int32_is_refused_but_int32_max_is_accepted() -> None:
    assert one_queue(MaxDeliveryCount=2147483647).max_delivery_count == 2147483647
    problem = single_problem(config_text([queue("orders", MaxDeliveryCount=2147483648)]))
    assert problem == "Queue 'orders': MaxDeliveryCount 2147483648 is out of range (allowed 1..2147483647)"


@pytest.mark.parametrize("value", ["PT19S", "P7DT1S"])
def test_duplicate_detection_window_outside_20_seconds_to_7_days_is_refused(value: str) -> None:
    problem = single_problem(config_text([queue("orders", DuplicateDetectionHistoryTimeWindow=value)]))
    assert problem == (
        f"Queue 'orders': DuplicateDetectionHistoryTimeWindow {value} is out of range (allowed PT20S..P7D)"
    )


def test_duplicate_detection_window_is_checked_on_topics_too() -> None:
    problem = single_problem(config_text(topics=[topic("t", DuplicateDetectionHistoryTimeWindow="PT5S")]))
    assert (
        problem == "Topic 't': DuplicateDetectionHistoryTimeWindow PT5S is out of range (allowed PT20S..P7D)"
    )


def test_ttl_below_one_second_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", DefaultMessageTimeToLive="PT0.5S")]))
    assert problem == (
        "Queue 'orders': DefaultMessageTimeToLive PT0.5S is out of range (allowed at least PT1S, or infinite)"
    )


def test_auto_delete_on_idle_below_five_minutes_is_refused() -> None:
    problem = single_problem(config_text(topics=[topic("t", [subscription("s", AutoDeleteOnIdle="PT4M")])]))
    assert problem == (
        "Subscription 't/Subscriptions/s': "
        "AutoDeleteOnIdle PT4M is out of range (allowed at least PT5M, or infinite)"
    )


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("MaxSizeInMegabytes", 0, "1..81920"),
        ("MaxSizeInMegabytes", 81921, "1..81920"),
        ("MaxMessageSizeInKilobytes", 0, "1..102400"),
        ("MaxMessageSizeInKilobytes", 102401, "1..102400"),
    ],
)
def test_sizes_outside_the_cloud_range_are_refused(key: str, value: int, allowed: str) -> None:
    problem = single_problem(config_text([queue("orders", **{key: value})]))
    assert problem == f"Queue 'orders': {key} {value} is out of range (allowed {allowed})"


def test_tiny_entity_sizes_are_accepted_so_tests_can_fill_a_queue() -> None:
    props = one_queue(MaxSizeInMegabytes=1, MaxMessageSizeInKilobytes=1)
    assert (props.max_size_in_megabytes, props.max_message_size_in_kilobytes) == (1, 1)


def test_user_metadata_longer_than_1024_characters_is_refused() -> None:
    problem = single_problem(config_text([queue("orders", UserMetadata="x" * 1025)]))
    assert problem == "Queue 'orders': UserMetadata is 1025 characters long (allowed 0..1024)"


def test_receive_disabled_is_not_a_topic_status() -> None:
    problem = single_problem(config_text(topics=[topic("t", Status="ReceiveDisabled")]))
    assert problem == (
        "Topic 't': Status ReceiveDisabled is not allowed for a topic "
        "(allowed Active, Disabled, SendDisabled)"
    )


def test_send_disabled_is_not_a_subscription_status() -> None:
    problem = single_problem(config_text(topics=[topic("t", [subscription("s", Status="SendDisabled")])]))
    assert "Status SendDisabled is not allowed for a subscription" in problem


# --------------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------------


def test_queue_path_of_260_characters_is_accepted_and_261_refused() -> None:
    assert validate_entity_path("Queue", "q" * 260) == []
    problems = validate_entity_path("Queue", "q" * 261)
    assert problems == [f"Queue '{'q' * 261}': name is 261 characters long (allowed 1..260)"]


@pytest.mark.parametrize("name", ["orders", "a", "queue.1", "my_queue", "sales/orders/eu-west", "A1"])
def test_valid_queue_and_topic_paths_are_accepted(name: str) -> None:
    assert validate_entity_path("Topic", name) == []


@pytest.mark.parametrize(
    "name", ["-orders", "orders-", "orders.", "_q", "has space", "caf\u00e9", "q$", "/q", "q/"]
)
def test_queue_paths_must_use_allowed_characters_and_start_and_end_alphanumeric(name: str) -> None:
    (problem,) = validate_entity_path("Queue", name)
    assert problem == (
        f"Queue '{name}': name may contain only letters, digits, periods, hyphens, underscores and slashes, "
        "and must start and end with a letter or digit"
    )


def test_queue_path_with_an_empty_segment_is_refused() -> None:
    assert validate_entity_path("Queue", "a//b") == [
        "Queue 'a//b': name must not contain an empty path segment ('//')"
    ]


def test_invalid_queue_name_in_a_config_is_reported() -> None:
    problem = single_problem(config_text([queue("bad name")]))
    assert problem.startswith("Queue 'bad name': name may contain only letters")


def test_subscription_name_must_not_contain_a_slash() -> None:
    problem = single_problem(config_text(topics=[topic("t", [subscription("a/b")])]))
    assert problem == "Subscription 't/Subscriptions/a/b': name must not contain '/'"


def test_subscription_name_longer_than_50_characters_is_refused() -> None:
    assert validate_entity_name("Subscription", "s" * 50) == []
    assert validate_entity_name("Subscription", "s" * 51) == [
        f"Subscription '{'s' * 51}': name is 51 characters long (allowed 1..50)"
    ]


def test_rule_name_longer_than_50_characters_is_refused_in_a_config() -> None:
    name = "r" * 51
    problem = single_problem(config_text(topics=[topic("t", [subscription("s", [sql_rule(name, "1=1")])])]))
    assert problem == f"Rule 't/Subscriptions/s/Rules/{name}': name is 51 characters long (allowed 1..50)"


def test_default_rule_name_is_accepted_for_rules_only() -> None:
    assert validate_entity_name("Rule", "$Default") == []
    assert validate_entity_name("Subscription", "$Default") != []
    config = parse_config(
        config_text(topics=[topic("t", [subscription("s", [sql_rule("$Default", "1=1")])])])
    )
    assert config.namespace.topics[0].subscriptions[0].rules[0].name == "$Default"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("short", "name is 5 characters long (allowed 6..50)"),
        ("1namespace", "must start with a letter"),
        ("namespace-", "must start with a letter"),
        ("name_space", "only letters, digits and hyphens"),
        ("mynamespace-sb", "must not end with '-sb' or '-mgmt'"),
        ("n" * 51, "name is 51 characters long (allowed 6..50)"),
    ],
)
def test_namespace_names_follow_the_azure_naming_rules(name: str, fragment: str) -> None:
    problems = problems_of(config_text(namespace=name))
    assert any(problem.startswith(f"Namespace '{name}': ") and fragment in problem for problem in problems), (
        problems
    )


def test_any_valid_namespace_name_is_accepted() -> None:
    assert parse_config(config_text(namespace="contoso-dev-01")).namespace.name == "contoso-dev-01"


# --------------------------------------------------------------------------------------------------
# namespaces and duplicates
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 2])
def test_exactly_one_namespace_is_required(count: int) -> None:
    namespaces = [{"Name": f"namespace{i}"} for i in range(count)]
    text = json.dumps({"UserConfig": {"Namespaces": namespaces}})
    assert f"Namespaces must contain exactly one namespace, got {count}" in problems_of(text)[0]


def test_missing_user_config_is_refused() -> None:
    assert problems_of('{"Namespaces": []}') == (
        "Config: unknown key 'Namespaces' in the top level (allowed: UserConfig, $schema)",
        "Config: UserConfig is required at the top level",
    )


def test_queue_names_are_unique_case_insensitively() -> None:
    problem = single_problem(config_text([queue("orders"), queue("Orders")]))
    assert (
        problem
        == "Queue 'Orders': name is already used by Queue 'orders' (entity names are case-insensitive)"
    )


def test_a_queue_and_a_topic_may_not_share_a_name() -> None:
    problem = single_problem(config_text([queue("orders")], [topic("ORDERS")]))
    assert (
        problem
        == "Topic 'ORDERS': name is already used by Queue 'orders' (entity names are case-insensitive)"
    )


def test_subscription_names_are_unique_within_a_topic() -> None:
    problem = single_problem(
        config_text(topics=[topic("t", [subscription("billing"), subscription("Billing")])])
    )
    assert problem.startswith(
        "Subscription 't/Subscriptions/Billing': name is already used by subscription 'billing'"
    )


def test_the_same_subscription_name_under_two_topics_is_fine() -> None:
    config = parse_config(
        config_text(topics=[topic("a", [subscription("s")]), topic("b", [subscription("s")])])
    )
    assert len(config.namespace.topics) == 2


def test_rule_names_are_unique_within_a_subscription() -> None:
    rules = [sql_rule("r1", "a = 1"), sql_rule("R1", "a = 2")]
    problem = single_problem(config_text(topics=[topic("t", [subscription("s", rules)])]))
    assert problem.startswith("Rule 't/Subscriptions/s/Rules/R1': name is already used by rule 'r1'")


# --------------------------------------------------------------------------------------------------
# forwarding
# --------------------------------------------------------------------------------------------------


def test_forward_to_must_name_a_queue_or_topic_in_the_config() -> None:
    problem = single_problem(config_text([queue("orders", ForwardTo="nowhere")]))
    assert problem == "Queue 'orders': ForwardTo 'nowhere' does not name a queue or topic in this namespace"


def test_forward_dead_lettered_messages_to_must_exist_too() -> None:
    text = config_text(topics=[topic("t", [subscription("s", ForwardDeadLetteredMessagesTo="gone")])])
    assert single_problem(text) == (
        "Subscription 't/Subscriptions/s': "
        "ForwardDeadLetteredMessagesTo 'gone' does not name a queue or topic in this namespace"
    )


def test_forward_to_the_entity_itself_is_accepted_as_azure_accepts_it() -> None:
    """Azure accepts a queue that forwards (and forwards its dead letters) to itself; hop counting ends it."""
    config = parse_config(
        config_text([queue("orders", ForwardTo="ORDERS", ForwardDeadLetteredMessagesTo="orders")])
    )
    props = config.namespace.queues[0].properties
    assert (props.forward_to, props.forward_dead_lettered_messages_to) == ("orders", "orders")


def test_forward_to_from_a_session_enabled_queue_is_accepted_as_azure_accepts_it() -> None:
    config = parse_config(config_text([queue("a", RequiresSession=True, ForwardTo="b"), queue("b")]))
    props = config.namespace.queues[0].properties
    assert props.requires_session and props.forward_to == "b"


def test_forward_to_from_a_session_enabled_subscription_is_accepted_too() -> None:
    text = config_text([queue("b")], [topic("t", [subscription("s", RequiresSession=True, ForwardTo="b")])])
    props = parse_config(text).namespace.topics[0].subscriptions[0].properties
    assert props.requires_session and props.forward_to == "b"


def test_dead_letter_forwarding_from_a_session_enabled_queue_is_allowed() -> None:
    config = parse_config(
        config_text([queue("a", RequiresSession=True, ForwardDeadLetteredMessagesTo="b"), queue("b")])
    )
    assert config.namespace.queues[0].properties.forward_dead_lettered_messages_to == "b"


def test_empty_forward_strings_mean_unset() -> None:
    props = one_queue(ForwardTo="", ForwardDeadLetteredMessagesTo="")
    assert props.forward_to is None
    assert props.forward_dead_lettered_messages_to is None


def test_forward_targets_match_case_insensitively_and_take_the_declared_spelling() -> None:
    config = parse_config(
        config_text([queue("Shipping")], [topic("t", [subscription("s", ForwardTo="SHIPPING")])])
    )
    assert config.namespace.topics[0].subscriptions[0].properties.forward_to == "Shipping"


def test_forwarding_to_a_topic_including_the_subscriptions_own_topic_is_allowed() -> None:
    config = parse_config(config_text(topics=[topic("t", [subscription("s", ForwardTo="t")])]))
    assert config.namespace.topics[0].subscriptions[0].properties.forward_to == "t"


# --------------------------------------------------------------------------------------------------
# quotas
# --------------------------------------------------------------------------------------------------


def test_more_than_2000_subscriptions_on_a_topic_are_refused() -> None:
    subs = [{"Name": f"s{i}"} for i in range(2001)]
    problems = problems_of(config_text(topics=[topic("t", subs)]))
    assert "Topic 't': 2001 subscriptions exceed the limit of 2000 per topic" in problems


def test_sql_filters_per_topic_are_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "SQL_FILTERS_PER_TOPIC", 2)
    rules = [sql_rule("a", "x = 1"), sql_rule("b", "x = 2")]
    text = config_text(topics=[topic("t", [subscription("s1", rules), subscription("s2")])])
    assert single_problem(text) == (
        "Topic 't': 3 SQL filters (including implicit $Default rules) exceed the limit of 2 per topic"
    )


def test_correlation_filters_per_topic_are_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "CORRELATION_FILTERS_PER_TOPIC", 1)
    rules = [correlation_rule("a", To="x"), correlation_rule("b", To="y")]
    text = config_text(topics=[topic("t", [subscription("s", rules)])])
    assert single_problem(text) == "Topic 't': 2 correlation filters exceed the limit of 1 per topic"


def test_real_quota_values_are_the_cloud_ones() -> None:
    assert limits.SQL_FILTERS_PER_TOPIC == 2000
    assert limits.CORRELATION_FILTERS_PER_TOPIC == 100000


def test_entities_per_namespace_are_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "ENTITIES_PER_NAMESPACE", 2)
    problem = single_problem(config_text([queue("a"), queue("b")], [topic("c")]))
    assert problem == "Namespace 'sbemulatorns': 3 queues and topics exceed the limit of 2 per namespace"


# --------------------------------------------------------------------------------------------------
# rules
# --------------------------------------------------------------------------------------------------


def rule_problem(rule: dict[str, Any]) -> str:
    return single_problem(config_text(topics=[topic("t", [subscription("s", [rule])])]))


def parsed_rule(rule: dict[str, Any]) -> RuleConfig:
    return (
        parse_config(config_text(topics=[topic("t", [subscription("s", [rule])])]))
        .namespace.topics[0]
        .subscriptions[0]
        .rules[0]
    )


def test_sql_filter_type_requires_an_sql_expression() -> None:
    problem = rule_problem({"Name": "r", "Properties": {"FilterType": "Sql"}})
    assert (
        problem
        == "Rule 't/Subscriptions/s/Rules/r': FilterType Sql requires a non-empty SqlFilter.SqlExpression"
    )


def test_correlation_filter_type_requires_a_correlation_filter() -> None:
    problem = rule_problem({"Name": "r", "Properties": {"FilterType": "Correlation"}})
    assert problem == "Rule 't/Subscriptions/s/Rules/r': FilterType Correlation requires a CorrelationFilter"


def test_empty_correlation_filter_is_refused() -> None:
    problem = rule_problem(correlation_rule("r", Properties={}))
    assert problem.startswith("Rule 't/Subscriptions/s/Rules/r': CorrelationFilter must set at least one of")


def test_correlation_filter_with_only_system_fields_is_accepted() -> None:
    rule = parsed_rule(correlation_rule("r", Label="OrderAccepted", Properties={}))
    assert rule.correlation == CorrelationFilterConfig(subject="OrderAccepted")


def test_subject_is_accepted_as_an_alias_of_label() -> None:
    assert parsed_rule(correlation_rule("r", Subject="s1")).correlation == CorrelationFilterConfig(
        subject="s1"
    )


def test_correlation_user_properties_keep_their_json_types() -> None:
    rule = parsed_rule(correlation_rule("r", Properties={"s": "v", "i": 3, "f": 1.5, "b": True}))
    assert rule.correlation is not None
    properties = dict(rule.correlation.properties)
    assert properties == {"s": "v", "i": 3, "f": 1.5, "b": True}
    assert type(properties["b"]) is bool and type(properties["i"]) is int


def test_correlation_user_property_values_must_be_scalars() -> None:
    problem = rule_problem(correlation_rule("r", To="x", Properties={"nested": {"a": 1}}))
    assert problem == (
        "Rule 't/Subscriptions/s/Rules/r': "
        "CorrelationFilter.Properties['nested'] must be a string, number or boolean, got an object"
    )


def test_correlation_system_fields_must_be_strings() -> None:
    problem = rule_problem(correlation_rule("r", To=5))
    assert problem == "Rule 't/Subscriptions/s/Rules/r': CorrelationFilter.To must be a string, got 5"


def test_empty_correlation_system_field_means_unset() -> None:
    assert parsed_rule(correlation_rule("r", To="", Label="x")).correlation == CorrelationFilterConfig(
        subject="x"
    )


def test_sql_expression_longer_than_1024_characters_is_refused() -> None:
    expression = "a = '" + "x" * 1020 + "'"
    problem = rule_problem(sql_rule("r", expression))
    assert problem == (
        f"Rule 't/Subscriptions/s/Rules/r': "
        f"SqlFilter.SqlExpression is {len(expression)} characters long (allowed 1..1024)"
    )


def test_sql_expression_of_exactly_1024_characters_is_accepted() -> None:
    expression = "a = '" + "x" * 1018 + "'"
    assert len(expression) == 1024
    assert parsed_rule(sql_rule("r", expression)).sql_expression == expression


def test_action_longer_than_1024_characters_is_refused() -> None:
    action = "SET a = '" + "x" * 1020 + "'"
    problem = rule_problem(sql_rule("r", "1=1", action))
    assert problem.startswith(
        "Rule 't/Subscriptions/s/Rules/r': Action.SqlExpression is 1030 characters long"
    )


def test_action_with_more_than_32_statements_is_refused() -> None:
    action = "; ".join(f"SET p{i} = 1" for i in range(33))
    assert rule_problem(sql_rule("r", "1=1", action)) == (
        "Rule 't/Subscriptions/s/Rules/r': Action.SqlExpression has 33 statements (allowed 1..32)"
    )


def test_semicolons_inside_action_string_literals_are_not_statement_separators() -> None:
    action = "SET a = ';;;;'; " + "; ".join(f"SET p{i} = 1" for i in range(31)) + ";"
    assert parsed_rule(sql_rule("r", "1=1", action)).action_sql == action


@pytest.mark.parametrize("action", ["", None, {"SqlExpression": ""}])
def test_empty_action_means_no_action(action: Any) -> None:
    rule = {
        "Name": "r",
        "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=1"}, "Action": action},
    }
    assert parsed_rule(rule).action_sql is None


def test_action_on_a_correlation_filter_is_kept() -> None:
    rule = correlation_rule("r", To="x")
    rule["Properties"]["Action"] = {"SqlExpression": "SET routed = 1"}
    assert parsed_rule(rule).action_sql == "SET routed = 1"


@pytest.mark.parametrize(
    ("given", "expected"), [("sql", "Sql"), ("CORRELATION", "Correlation"), ("TrueFilter", "True")]
)
def test_filter_type_is_matched_case_insensitively(given: str, expected: str) -> None:
    props: dict[str, Any] = {"FilterType": given}
    if expected == "Sql":
        props["SqlFilter"] = {"SqlExpression": "1=1"}
    if expected == "Correlation":
        props["CorrelationFilter"] = {"To": "x"}
    assert parsed_rule({"Name": "r", "Properties": props}).filter_type == expected


def test_true_and_false_filters_need_no_expression() -> None:
    assert parsed_rule({"Name": "r", "Properties": {"FilterType": "False"}}) == RuleConfig(
        name="r", filter_type="False"
    )


def test_unknown_filter_type_is_refused() -> None:
    problem = rule_problem({"Name": "r", "Properties": {"FilterType": "Regex"}})
    assert problem == (
        "Rule 't/Subscriptions/s/Rules/r': "
        'FilterType must be one of Sql, Correlation, True, False (got "Regex")'
    )


def test_mismatched_filter_sections_are_refused() -> None:
    rule = {
        "Name": "r",
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "1=1"},
            "CorrelationFilter": {"To": "x"},
        },
    }
    assert (
        rule_problem(rule)
        == "Rule 't/Subscriptions/s/Rules/r': CorrelationFilter is not allowed with FilterType Sql"
    )


def test_rule_without_properties_is_refused() -> None:
    assert (
        rule_problem({"Name": "r"})
        == "Rule 't/Subscriptions/s/Rules/r': Properties with a FilterType is required"
    )


# --------------------------------------------------------------------------------------------------
# all problems at once
# --------------------------------------------------------------------------------------------------


def test_every_problem_is_reported_at_once_each_on_its_own_line() -> None:
    text = config_text(
        [
            queue("orders", LockDuration="PT10M", RequiresSession="yes"),
            queue("Orders"),
            queue("x", ForwardTo="nope"),
        ],
        [topic("t", [subscription("billing", MaxDeliveryCount=0)])],
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="Config.json")
    error = caught.value
    assert error.problems == (
        "Queue 'orders': RequiresSession must be a boolean, got \"yes\"",
        "Queue 'orders': LockDuration PT10M is out of range (allowed PT5S..PT5M)",
        "Subscription 't/Subscriptions/billing': MaxDeliveryCount 0 is out of range (allowed 1..2147483647)",
        "Queue 'Orders': name is already used by Queue 'orders' (entity names are case-insensitive)",
        "Queue 'x': ForwardTo 'nope' does not name a queue or topic in this namespace",
    )
    lines = str(error).splitlines()
    assert lines[0] == "Config.json: 5 configuration problems:"
    assert lines[1:] == [f"  - {problem}" for problem in error.problems]
    assert isinstance(error, ValueError)


# --------------------------------------------------------------------------------------------------
# validators on dataclasses (shared with the management API)
# --------------------------------------------------------------------------------------------------


def test_validators_accept_the_defaults() -> None:
    assert validate_queue_properties("q", QueueProperties()) == []
    assert validate_topic_properties("t", TopicProperties()) == []
    assert validate_subscription_properties("t", "s", SubscriptionProperties()) == []
    assert validate_rule("t", "s", RuleConfig(name="$Default", filter_type="True")) == []


def test_queue_validator_reports_every_bad_property() -> None:
    props = QueueProperties(
        lock_duration=timedelta(minutes=6), max_delivery_count=0, status=EntityStatus.DISABLED
    )
    assert validate_queue_properties("q", props) == [
        "Queue 'q': LockDuration PT6M is out of range (allowed PT5S..PT5M)",
        "Queue 'q': MaxDeliveryCount 0 is out of range (allowed 1..2147483647)",
    ]


def test_rule_validator_checks_correlation_content() -> None:
    rule = RuleConfig(name="r", filter_type="Correlation", correlation=CorrelationFilterConfig())
    (problem,) = validate_rule("t", "s", rule)
    assert problem.startswith("Rule 't/Subscriptions/s/Rules/r': CorrelationFilter must set at least one of")


def test_validate_namespace_checks_names_properties_and_cross_references() -> None:
    namespace = NamespaceConfig(
        name="sbemulatorns",
        queues=(QueueConfig("q", QueueProperties(forward_to="missing")),),
        topics=(
            TopicConfig(
                "t",
                TopicProperties(),
                (SubscriptionConfig("s", SubscriptionProperties(max_delivery_count=0), ()),),
            ),
        ),
    )
    assert validate_namespace(namespace) == [
        "Subscription 't/Subscriptions/s': MaxDeliveryCount 0 is out of range (allowed 1..2147483647)",
        "Queue 'q': ForwardTo 'missing' does not name a queue or topic in this namespace",
    ]


# --------------------------------------------------------------------------------------------------
# data model
# --------------------------------------------------------------------------------------------------


def test_config_dataclasses_are_frozen() -> None:
    props = QueueProperties()
    with pytest.raises(dataclasses.FrozenInstanceError):
        props.max_delivery_count = 3  # type: ignore[misc]


def test_correlation_filter_is_hashable_even_when_built_from_a_dict() -> None:
    a = CorrelationFilterConfig(to="x", properties={"k": "v"})
    b = CorrelationFilterConfig(to="x", properties={"k": "v"})
    assert a == b
    assert hash(a) == hash(b)
    assert {a, b} == {a}
    with pytest.raises(TypeError):
        a.properties["k"] = "w"  # type: ignore[index]


def test_whole_config_is_hashable() -> None:
    assert isinstance(hash(load_config(SAMPLE_CONFIG)), int)


def test_entity_status_compares_equal_to_its_wire_text() -> None:
    assert EntityStatus("SendDisabled") is EntityStatus.SEND_DISABLED
    assert isinstance(EntityStatus.SEND_DISABLED, str)
    assert str(EntityStatus.RECEIVE_DISABLED) == "ReceiveDisabled"
    assert f"{EntityStatus.DISABLED}" == "Disabled"


def test_sql_filter_or_action_that_does_not_parse_is_refused_naming_the_rule_and_position() -> None:
    text = config_text(
        topics=[
            topic(
                "t",
                [
                    subscription("a", [sql_rule("bad-filter", "color = ")]),
                    subscription("b", [sql_rule("bad-action", "1=1", action="SET = 2")]),
                ],
            )
        ]
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    message = str(caught.value)
    assert "t/Subscriptions/a/Rules/bad-filter" in message and "SQL filter" in message
    assert "t/Subscriptions/b/Rules/bad-action" in message and "SQL action" in message
    assert message.count("position") == 2
