"""Entity-name rules, rule-name hashing and the hierarchy prefix, as NServiceBus has them."""

from __future__ import annotations

import pytest

from shared.topology.names import (
    HierarchyNamespace,
    is_valid_queue_name,
    is_valid_rule_name,
    is_valid_subscription_name,
    is_valid_topic_name,
    rule_name,
)


def test_a_90_character_type_name_gets_the_hashed_rule_name_recorded_by_nservicebus() -> None:
    name = "NServiceBus.Transport.AzureServiceBus.Tests.TopicPerEventSubscriptionManagerTests+MyEvent1"
    assert len(name) == 90
    assert rule_name(name) == "Rule-db44afc39bdcd4d7"


def test_rule_names_of_50_characters_or_fewer_are_the_name_itself_even_with_invalid_characters() -> None:
    assert rule_name("x" * 50) == "x" * 50
    assert rule_name("Outer+Inner") == "Outer+Inner"
    assert rule_name("x" * 51).startswith("Rule-") and len(rule_name("x" * 51)) == 21


@pytest.mark.parametrize("name", ["a", "Shipping.OrderAccepted", "ns/topic_1-x", "A" * 260])
def test_valid_topic_names(name: str) -> None:
    assert is_valid_topic_name(name)


@pytest.mark.parametrize("name", ["", "-a", "a-", "a?b", "a#b", "a\\b", "Outer+Inner", "A" * 261, "$x"])
def test_invalid_topic_names(name: str) -> None:
    assert not is_valid_topic_name(name)


def test_queue_names_may_start_with_a_dollar_as_for_dead_letter_queues() -> None:
    assert is_valid_queue_name("$DeadLetterQueue")
    assert is_valid_queue_name("$")
    assert not is_valid_queue_name("q$")  # only first (or only) character


@pytest.mark.parametrize("name", ["a", "billing", "a.b_c-d", "x" * 50])
def test_valid_subscription_and_rule_names(name: str) -> None:
    assert is_valid_subscription_name(name) and is_valid_rule_name(name)


@pytest.mark.parametrize("name", ["", "$Default", "a/b", "x" * 51, "-a", "a.", "a+b"])
def test_invalid_subscription_and_rule_names(name: str) -> None:
    assert not is_valid_subscription_name(name) and not is_valid_rule_name(name)


def test_hierarchy_prefixing_is_idempotent_and_nests_other_prefixes() -> None:
    hierarchy = HierarchyNamespace("my-hierarchy")
    assert hierarchy.apply("dest") == "my-hierarchy/dest"
    assert hierarchy.apply("my-hierarchy/dest") == "my-hierarchy/dest"
    assert hierarchy.apply("other/dest") == "my-hierarchy/other/dest"
    assert HierarchyNamespace("my-hierarchy/").prefix == "my-hierarchy/"
    assert hierarchy.unprefixed("my-hierarchy/Name") == "Name"


def test_no_hierarchy_leaves_names_alone() -> None:
    hierarchy = HierarchyNamespace(None)
    assert not hierarchy.enabled
    assert hierarchy.apply("dest") == "dest" and hierarchy.unprefixed("a/b") == "a/b"
