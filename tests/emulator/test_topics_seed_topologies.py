"""The seed topologies, built from Config.json text and proven through the real azure-servicebus SDK.

* NServiceBus ForwardingTopology (seed 001): topic ``bundle-1``, one subscription per endpoint forwarding
  to the endpoint's queue, one SQL rule per subscribed event,
  ``[NServiceBus.EnclosedMessageTypes] LIKE '%<FullName>%'``, with the interface case (a subscriber of
  ``IOrderStatusChanged`` gets ``OrderDeclined`` without a topology change) and the versioning case
  (``OrderAcceptedV2`` still reaches ``OrderAccepted`` subscribers; ``V2`` subscribers get only V2).
* The hierarchy (seed 001): ``bundle-1`` forwards everything to ``bundle-2`` through ``forwardTo-bundle-2``;
  endpoints added later subscribe on ``bundle-2``.
* Topic-per-event (seed 000): one topic per concrete event, catch-all ``1=1`` subscriptions; publishing
  to an event nobody subscribed to (no topic) is a 404.
* The fallback topic (seed 000): ``CorrelationFilter`` mode (the publisher stamps every enclosed type as a
  boolean application property; subscriptions hold ``$default`` = FalseFilter plus one correlation rule
  per event, hashed ``Rule-xxxxxxxxxxxxxxxx`` names past 50 characters) and ``SqlLikeFilter`` mode.
* The ERP case (seed 002): three module topics forward into Alice's and Bob's personal queues; Alice's
  queue fills up and only her messages are dead-lettered, in her own subscriptions; no topic refuses a
  message.
* A 5-hop chain mixing topics and queues: entered at the top, the message stops after four transfers and
  is dead-lettered in the entity that could not make the fifth; entered one step lower, it arrives.

The NServiceBus details (header format, rule names, subscription properties) follow the NServiceBus Azure
Service Bus transport, as ``shared.topology`` reproduces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from emulator.config import parse_config
from tests.emulator.sdk_helpers import (
    SendProperties,
    app_properties,
    message_id,
    opened,
    peek,
    sdk_client,
    unrouted_count,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

    MakeEmulator = Callable[..., EmulatorHandle]

DLQ = ServiceBusSubQueue.DEAD_LETTER
ENCLOSED = "NServiceBus.EnclosedMessageTypes"
ASSEMBLY = "Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ"

# The events of the seeds, as NServiceBus core writes their EnclosedMessageTypes header: the concrete type
# first, then its interfaces, each assembly-qualified, separated by ';'.
ORDER_ACCEPTED = ["Shipping.OrderAccepted", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"]
ORDER_DECLINED = ["Shipping.OrderDeclined", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"]
ORDER_ACCEPTED_V2 = ["Shipping.OrderAcceptedV2", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"]
PRICE_CHANGED = ["Sales.PriceChanged"]
ORDER_SHIPPED = ["Shipping.OrderShipped"]
# Longer than 50 characters: its rule name is hashed.
DISPATCHED = ["Contoso.Fulfilment.Warehousing.Events.ShipmentDispatchedToCarrier"]


# --------------------------------------------------------------------------------------------- helpers


def _enclosed(types: Sequence[str]) -> str:
    return ";".join(f"{name}, {ASSEMBLY}" for name in types)


def _parse_enclosed(header: str) -> list[str]:
    """EnclosedMessageTypesParser: split on ';', trim, drop '__impl', strip the assembly qualification."""
    names = []
    for entry in (part.strip() for part in header.split(";")):
        if not entry or "__impl" in entry:
            continue
        names.append(entry[: entry.rindex("]") + 1] if "]" in entry else entry.split(",", 1)[0])
    return names


def _event(body: str, types: Sequence[str], stamp_types: bool = False) -> ServiceBusMessage:
    """A published NServiceBus event; ``stamp_types`` is the CorrelationFilter routing mode's publisher."""
    header = _enclosed(types)
    properties: SendProperties = {
        ENCLOSED: header,
        "NServiceBus.MessageIntent": "Publish",
        "NServiceBus.ContentType": "application/json",
        "NServiceBus.MessageId": f"id-{body}",
    }
    if stamp_types:
        properties.update({name: True for name in _parse_enclosed(header)})
    return ServiceBusMessage(
        json.dumps({"event": body}), content_type="application/json", application_properties=properties
    )


def _rule_name(full_name: str) -> str:
    """NServiceBus 6.4 rule naming: the full name, or a SHA-256 based name past 50 characters."""
    if len(full_name) <= 50:
        return full_name
    return "Rule-" + hashlib.sha256(full_name.encode()).hexdigest()[:16]


def _like(full_name: str) -> dict[str, Any]:
    return {
        "Name": _rule_name(full_name),
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": f"[{ENCLOSED}] LIKE '%{full_name}%'"},
        },
    }


def _flag(full_name: str) -> dict[str, Any]:
    return {
        "Name": _rule_name(full_name),
        "Properties": {"FilterType": "Correlation", "CorrelationFilter": {"Properties": {full_name: True}}},
    }


FALSE_DEFAULT = {"Name": "$default", "Properties": {"FilterType": "False"}}


def _endpoint_subscription(queue: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A subscription as the NServiceBus transport creates it for the endpoint ``queue``."""
    return {
        "Name": queue,
        "Properties": {
            "ForwardTo": queue,
            "LockDuration": "PT5M",
            "MaxDeliveryCount": 10,
            "DeadLetteringOnFilterEvaluationExceptions": False,
            "UserMetadata": queue,
        },
        "Rules": rules,
    }


def _config(queues: list[dict[str, Any]], topics: list[dict[str, Any]]) -> str:
    """Config.json text in the official emulator's format."""
    document = {
        "UserConfig": {
            "Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": topics}],
            "Logging": {"Type": "Console"},
        }
    }
    return json.dumps(document, indent=2)


def _endpoint_queue(name: str, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": {"LockDuration": "PT5M", "MaxDeliveryCount": 10, **properties}}


def _start(make_emulator: MakeEmulator, text: str) -> EmulatorHandle:
    return make_emulator(config=parse_config(text, "Config.json"))


def _events(messages: Sequence[ServiceBusReceivedMessage]) -> list[str]:
    """The event bodies' names, sorted (a duplicate copy would show twice)."""
    return sorted(json.loads(str(m))["event"] for m in messages)


def _subscription_counts(emulator: EmulatorHandle, topic: str) -> dict[str, tuple[int, int]]:
    """(active, dead-lettered) per subscription of ``topic``, as the management plane reports them."""
    ns = emulator.emulator.namespace

    def read() -> dict[str, tuple[int, int]]:
        counts = {}
        for subscription in ns.topics[topic.lower()].subscriptions.values():
            c = ns.counts(subscription)
            counts[subscription.subscription_name] = (c["activeMessageCount"], c["deadLetterMessageCount"])
        return counts

    result = emulator.call(read)
    assert isinstance(result, dict)
    return result


# ---------------------------------------------------------------------------------- ForwardingTopology

FORWARDING_ENDPOINTS = {
    # endpoint queue: the events (full names) its handlers subscribe to
    "Shipping": ["Shipping.OrderAccepted"],
    "Billing": ["Shipping.OrderAccepted", "Shipping.OrderDeclined"],
    "StatusWatcher": ["Shipping.IOrderStatusChanged"],
    "AcceptanceAudit": ["Shipping.IOrderAccepted", "Shipping.OrderAccepted"],
    "ShippingV2": ["Shipping.OrderAcceptedV2"],
    "Sales": ["Sales.PriceChanged"],
}


def _forwarding_topology() -> str:
    queues = [_endpoint_queue(name) for name in FORWARDING_ENDPOINTS] + [{"Name": "error"}]
    subscriptions = [
        _endpoint_subscription(queue, [FALSE_DEFAULT, *(_like(event) for event in events)])
        for queue, events in FORWARDING_ENDPOINTS.items()
    ]
    return _config(queues, [{"Name": "bundle-1", "Subscriptions": subscriptions}])


@pytest.mark.emulator_only
def test_forwarding_topology_routes_events_to_endpoint_queues(make_emulator: MakeEmulator) -> None:
    emulator = _start(make_emulator, _forwarding_topology())
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender("bundle-1")
        receivers = {queue: client.get_queue_receiver(queue) for queue in FORWARDING_ENDPOINTS}
        with opened(sender, *receivers.values()):
            sender.send_messages(
                [
                    _event("accepted", ORDER_ACCEPTED),
                    _event("declined", ORDER_DECLINED),
                    _event("accepted-v2", ORDER_ACCEPTED_V2),
                    _event("price", PRICE_CHANGED),
                    _event("shipped", ORDER_SHIPPED),  # nobody subscribes
                ]
            )
            delivered = {queue: _events(peek(receiver)) for queue, receiver in receivers.items()}
            sample = peek(receivers["Shipping"])[0]

    assert delivered == {
        # LIKE '%Shipping.OrderAccepted%' also matches OrderAcceptedV2: the versioning case.
        "Shipping": ["accepted", "accepted-v2"],
        # Two rules, one copy of each event.
        "Billing": ["accepted", "accepted-v2", "declined"],
        # The interface case: OrderDeclined arrives without any topology change.
        "StatusWatcher": ["accepted", "accepted-v2", "declined"],
        # An event matching both of its rules still arrives once.
        "AcceptanceAudit": ["accepted", "accepted-v2", "declined"],
        # The new contract's subscribers get only the new contract.
        "ShippingV2": ["accepted-v2"],
        "Sales": ["price"],
    }
    assert app_properties(sample)[ENCLOSED] == _enclosed(ORDER_ACCEPTED)
    assert sample.content_type == "application/json"
    assert unrouted_count(emulator, "bundle-1") == 1
    # The subscriptions only forward: nothing stays in them, nothing is dead-lettered.
    assert set(_subscription_counts(emulator, "bundle-1").values()) == {(0, 0)}


@pytest.mark.emulator_only
def test_hierarchy_forwards_bundle_1_into_bundle_2(make_emulator: MakeEmulator) -> None:
    text = _config(
        [_endpoint_queue("Shipping"), _endpoint_queue("NewEndpoint"), _endpoint_queue("NewStatusWatcher")],
        [
            {"Name": "bundle-2"},  # the order of definition does not matter to the config
            {
                "Name": "bundle-1",
                "Subscriptions": [
                    _endpoint_subscription("Shipping", [FALSE_DEFAULT, _like("Shipping.OrderAccepted")]),
                    {
                        "Name": "forwardTo-bundle-2",
                        "Properties": {"ForwardTo": "bundle-2"},
                        "Rules": [{"Name": "$default", "Properties": {"FilterType": "True"}}],
                    },
                ],
            },
        ],
    )
    # Subscribers added later subscribe on bundle-2.
    document = json.loads(text)
    bundle_2 = document["UserConfig"]["Namespaces"][0]["Topics"][0]
    bundle_2["Subscriptions"] = [
        _endpoint_subscription("NewEndpoint", [FALSE_DEFAULT, _like("Shipping.OrderAccepted")]),
        _endpoint_subscription("NewStatusWatcher", [FALSE_DEFAULT, _like("Shipping.IOrderStatusChanged")]),
    ]
    emulator = _start(make_emulator, json.dumps(document))
    with sdk_client(emulator) as client:
        bundle_1 = client.get_topic_sender("bundle-1")
        bundle_2_sender = client.get_topic_sender("bundle-2")
        receivers = {q: client.get_queue_receiver(q) for q in ("Shipping", "NewEndpoint", "NewStatusWatcher")}
        with opened(bundle_1, bundle_2_sender, *receivers.values()):
            bundle_1.send_messages(
                [
                    _event("accepted", ORDER_ACCEPTED),
                    _event("declined", ORDER_DECLINED),
                    _event("price", PRICE_CHANGED),
                ]
            )
            # Publishing on bundle-2 directly reaches only bundle-2's subscribers (no way back up).
            bundle_2_sender.send_messages(_event("accepted-direct", ORDER_ACCEPTED))
            delivered = {queue: _events(peek(receiver)) for queue, receiver in receivers.items()}

    assert delivered == {
        "Shipping": ["accepted"],
        "NewEndpoint": ["accepted", "accepted-direct"],
        "NewStatusWatcher": ["accepted", "accepted-direct", "declined"],
    }
    # bundle-1 hands everything to bundle-2, which drops what nobody wants.
    assert unrouted_count(emulator, "bundle-1") == 0
    assert unrouted_count(emulator, "bundle-2") == 1
    assert set(_subscription_counts(emulator, "bundle-1").values()) == {(0, 0)}
    assert set(_subscription_counts(emulator, "bundle-2").values()) == {(0, 0)}


# ------------------------------------------------------------------------------------- topic-per-event


@pytest.mark.emulator_only
def test_topic_per_event_with_catch_all_subscriptions(make_emulator: MakeEmulator) -> None:
    catch_all_sql = {
        "Name": "$Default",
        "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=1"}},
    }
    text = _config(
        [_endpoint_queue("Billing"), _endpoint_queue("StatusWatcher")],
        [
            {
                "Name": "Shipping.OrderAccepted",
                "Subscriptions": [
                    # Created without rules: the broker adds $Default (1=1).
                    {"Name": "Billing", "Properties": {"ForwardTo": "Billing", "LockDuration": "PT5M"}},
                    _endpoint_subscription("StatusWatcher", [catch_all_sql]),
                ],
            },
            {
                # The interface subscriber maps IOrderStatusChanged to both concrete topics.
                "Name": "Shipping.OrderDeclined",
                "Subscriptions": [_endpoint_subscription("StatusWatcher", [catch_all_sql])],
            },
        ],
    )
    emulator = _start(make_emulator, text)
    with sdk_client(emulator) as client:
        accepted = client.get_topic_sender("Shipping.OrderAccepted")
        declined = client.get_topic_sender("Shipping.OrderDeclined")
        billing = client.get_queue_receiver("Billing")
        watcher = client.get_queue_receiver("StatusWatcher")
        with opened(accepted, declined, billing, watcher):
            # No filtering is needed: every message on a topic is of that topic's event type.
            accepted.send_messages(
                [_event("accepted-1", ORDER_ACCEPTED), _event("accepted-2", ORDER_ACCEPTED)]
            )
            declined.send_messages(_event("declined-1", ORDER_DECLINED))
            assert _events(peek(billing)) == ["accepted-1", "accepted-2"]
            assert _events(peek(watcher)) == ["accepted-1", "accepted-2", "declined-1"]

        # Topics are created by subscribers only: an event nobody subscribed to has no topic.
        with (
            pytest.raises(ServiceBusAuthenticationError),  # no topic: its token is refused (404)
            client.get_topic_sender("Shipping.OrderShipped") as s,
        ):
            s.send_messages(_event("shipped", ORDER_SHIPPED))
    for topic in ("Shipping.OrderAccepted", "Shipping.OrderDeclined"):
        assert unrouted_count(emulator, topic) == 0


# -------------------------------------------------------------------------------------- fallback topic


@pytest.mark.emulator_only
def test_fallback_topic_with_correlation_filter_routing_mode(make_emulator: MakeEmulator) -> None:
    [long_name] = DISPATCHED
    assert _rule_name(long_name).startswith("Rule-") and len(_rule_name(long_name)) == 21
    text = _config(
        [_endpoint_queue(q) for q in ("Shipping", "StatusWatcher", "Dispatch", "Everything", "SqlMode")],
        [
            {
                "Name": "SharedEvents",
                "Subscriptions": [
                    _endpoint_subscription("Shipping", [FALSE_DEFAULT, _flag("Shipping.OrderAccepted")]),
                    _endpoint_subscription(
                        "StatusWatcher", [FALSE_DEFAULT, _flag("Shipping.IOrderStatusChanged")]
                    ),
                    _endpoint_subscription("Dispatch", [FALSE_DEFAULT, _flag(long_name)]),
                    # NotMultiplexed and CorrelationFilter entries on one subscription: catch-all plus flags.
                    _endpoint_subscription(
                        "Everything",
                        [
                            {"Name": "$Default", "Properties": {"FilterType": "True"}},
                            _flag("Shipping.OrderAccepted"),
                            _flag("Shipping.IOrderAccepted"),
                        ],
                    ),
                    # A subscriber configured for SqlLikeFilter still matches on the header itself.
                    _endpoint_subscription("SqlMode", [FALSE_DEFAULT, _like("Shipping.OrderDeclined")]),
                ],
            }
        ],
    )
    emulator = _start(make_emulator, text)
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender("SharedEvents")
        receivers = {
            q: client.get_queue_receiver(q)
            for q in ("Shipping", "StatusWatcher", "Dispatch", "Everything", "SqlMode")
        }
        with opened(sender, *receivers.values()):
            sender.send_messages(
                [
                    _event("accepted", ORDER_ACCEPTED, stamp_types=True),
                    _event("declined", ORDER_DECLINED, stamp_types=True),
                    _event("dispatched", DISPATCHED, stamp_types=True),
                    # A publisher that does not stamp (NotMultiplexed / SqlLikeFilter) reaches no
                    # correlation-filtered subscriber: the modes must match.
                    _event("accepted-unstamped", ORDER_ACCEPTED),
                ]
            )
            delivered = {queue: _events(peek(receiver)) for queue, receiver in receivers.items()}
            stamped = app_properties(peek(receivers["Shipping"])[0])

    assert delivered == {
        "Shipping": ["accepted"],
        "StatusWatcher": ["accepted", "declined"],
        "Dispatch": ["dispatched"],
        "Everything": ["accepted", "accepted-unstamped", "declined", "dispatched"],
        "SqlMode": ["declined"],
    }
    assert {k: v for k, v in stamped.items() if not k.startswith("NServiceBus.")} == dict.fromkeys(
        ORDER_ACCEPTED, True
    )
    assert unrouted_count(emulator, "SharedEvents") == 0
    assert set(_subscription_counts(emulator, "SharedEvents").values()) == {(0, 0)}


@pytest.mark.emulator_only
def test_fallback_topic_with_sql_like_filter_routing_mode(make_emulator: MakeEmulator) -> None:
    text = _config(
        [_endpoint_queue(q) for q in ("Shipping", "ShippingV2", "Acceptance", "Pricing", "FlagsOnly")],
        [
            {
                "Name": "SharedEvents",
                "Subscriptions": [
                    _endpoint_subscription("Shipping", [FALSE_DEFAULT, _like("Shipping.OrderAccepted")]),
                    _endpoint_subscription("ShippingV2", [FALSE_DEFAULT, _like("Shipping.OrderAcceptedV2")]),
                    _endpoint_subscription("Acceptance", [FALSE_DEFAULT, _like("Shipping.IOrderAccepted")]),
                    _endpoint_subscription("Pricing", [FALSE_DEFAULT, _like("Sales.PriceChanged")]),
                    # Mismatched subscriber (CorrelationFilter mode) on a SqlLikeFilter publisher's topic.
                    _endpoint_subscription("FlagsOnly", [FALSE_DEFAULT, _flag("Shipping.OrderAccepted")]),
                ],
            }
        ],
    )
    emulator = _start(make_emulator, text)
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender("SharedEvents")
        receivers = {
            q: client.get_queue_receiver(q)
            for q in ("Shipping", "ShippingV2", "Acceptance", "Pricing", "FlagsOnly")
        }
        with opened(sender, *receivers.values()):
            sender.send_messages(
                [
                    _event("accepted", ORDER_ACCEPTED),
                    _event("accepted-v2", ORDER_ACCEPTED_V2),
                    _event("declined", ORDER_DECLINED),
                    _event("price", PRICE_CHANGED),
                    _event("shipped", ORDER_SHIPPED),
                ]
            )
            delivered = {queue: _events(peek(receiver)) for queue, receiver in receivers.items()}

    assert delivered == {
        # '%Shipping.OrderAccepted%' over-matches OrderAcceptedV2 (by design: contract evolution).
        "Shipping": ["accepted", "accepted-v2"],
        "ShippingV2": ["accepted-v2"],
        "Acceptance": ["accepted", "accepted-v2", "declined"],
        "Pricing": ["price"],
        "FlagsOnly": [],
    }
    assert unrouted_count(emulator, "SharedEvents") == 1


# -------------------------------------------------------------------------------------- ERP (seed 002)

ERP_TOPICS = ("erp-orders", "erp-inventory", "erp-crm")
BODY = b"x" * 100_000  # Alice's 1 MB queue holds ten of these


def _erp_topology() -> str:
    def personal(rep: str) -> dict[str, Any]:
        return {
            "Name": rep,
            "Properties": {"ForwardTo": rep},
            "Rules": [
                {
                    "Name": "my-customers",
                    "Properties": {
                        "FilterType": "Correlation",
                        "CorrelationFilter": {"Properties": {"SalesRep": rep}},
                    },
                }
            ],
        }

    return _config(
        [
            {"Name": "alice", "Properties": {"MaxSizeInMegabytes": 1}},  # she is on vacation
            {"Name": "bob"},
        ],
        [{"Name": topic, "Subscriptions": [personal("alice"), personal("bob")]} for topic in ERP_TOPICS],
    )


@pytest.mark.emulator_only
def test_erp_a_full_personal_queue_dead_letters_only_its_own_messages(make_emulator: MakeEmulator) -> None:
    emulator = _start(make_emulator, _erp_topology())
    per_topic = 6  # per sales representative: 18 for Alice (1.8 MB) and 18 for Bob
    with sdk_client(emulator) as client:
        senders = [client.get_topic_sender(topic) for topic in ERP_TOPICS]
        alice = client.get_queue_receiver("alice", max_wait_time=1)
        bob = client.get_queue_receiver("bob")
        dead_letters = {
            (topic, rep): client.get_subscription_receiver(topic, rep, sub_queue=DLQ)
            for topic in ERP_TOPICS
            for rep in ("alice", "bob")
        }
        with opened(*senders, alice, bob, *dead_letters.values()):
            for i in range(per_topic):
                for topic, sender in zip(ERP_TOPICS, senders, strict=True):
                    for rep in ("alice", "bob"):
                        # Every send succeeds: no module topic ever reaches its quota.
                        sender.send_messages(
                            ServiceBusMessage(
                                BODY,
                                message_id=f"{topic}/{rep}/{i}",
                                application_properties={"SalesRep": rep, "Customer": f"c{i}"},
                            )
                        )

            bob_ids = sorted(message_id(m) for m in peek(bob))
            alice_ids = [message_id(m) for m in peek(alice)]
            dead = {key: peek(receiver) for key, receiver in dead_letters.items()}

            # Bob gets every one of his messages, and nothing of his is dead-lettered.
            assert bob_ids == sorted(f"{t}/bob/{i}" for t in ERP_TOPICS for i in range(per_topic))
            assert all(dead[(topic, "bob")] == [] for topic in ERP_TOPICS)

            # Alice's queue took what fitted, in order; the rest waits in HER subscriptions' DLQs.
            alice_dead_ids = [message_id(m) for topic in ERP_TOPICS for m in dead[(topic, "alice")]]
            assert len(alice_ids) == 10
            assert alice_ids == [f"{t}/alice/{i}" for i in range(per_topic) for t in ERP_TOPICS][:10]
            assert sorted(alice_ids + alice_dead_ids) == sorted(
                f"{t}/alice/{i}" for t in ERP_TOPICS for i in range(per_topic)
            )
            for topic in ERP_TOPICS:
                for message in dead[(topic, "alice")]:
                    assert message_id(message).startswith(f"{topic}/alice/")
                    assert message.dead_letter_reason

            # Back from vacation: once she reads her queue, new messages reach her again.
            for message in alice.receive_messages(max_message_count=10, max_wait_time=1):
                alice.complete_message(message)
            senders[0].send_messages(
                ServiceBusMessage(
                    BODY, message_id="welcome-back", application_properties={"SalesRep": "alice"}
                )
            )
            assert [m.message_id for m in peek(alice)] == ["welcome-back"]

    for topic in ERP_TOPICS:
        assert unrouted_count(emulator, topic) == 0
        counts = _subscription_counts(emulator, topic)
        assert counts["bob"] == (0, 0)
        assert counts["alice"][0] == 0  # the forwarding subscription holds nothing active


# ----------------------------------------------------------------------------------------- 5-hop chain


@pytest.mark.emulator_only
def test_a_five_hop_chain_of_topics_and_queues(make_emulator: MakeEmulator) -> None:
    def forwarding_topic(name: str, target: str) -> dict[str, Any]:
        return {"Name": name, "Subscriptions": [{"Name": "next", "Properties": {"ForwardTo": target}}]}

    # chain-a (topic) -> chain-b (queue) -> chain-c (topic) -> chain-d -> chain-e -> chain-f (queues)
    text = _config(
        [
            {"Name": "chain-b", "Properties": {"ForwardTo": "chain-c"}},
            {"Name": "chain-d", "Properties": {"ForwardTo": "chain-e"}},
            {"Name": "chain-e", "Properties": {"ForwardTo": "chain-f"}},
            {"Name": "chain-f"},
        ],
        [forwarding_topic("chain-a", "chain-b"), forwarding_topic("chain-c", "chain-d")],
    )
    emulator = _start(make_emulator, text)
    with sdk_client(emulator) as client:
        top = client.get_topic_sender("chain-a")
        one_lower = client.get_queue_sender("chain-b")
        end = client.get_queue_receiver("chain-f")
        queue_dlqs = {
            q: client.get_queue_receiver(q, sub_queue=DLQ) for q in ("chain-b", "chain-d", "chain-e")
        }
        sub_dlqs = {
            t: client.get_subscription_receiver(t, "next", sub_queue=DLQ) for t in ("chain-a", "chain-c")
        }
        with opened(top, one_lower, end, *queue_dlqs.values(), *sub_dlqs.values()):
            # a/next -> b -> c/next -> d -> e: four transfers; e cannot make the fifth (to f).
            top.send_messages(ServiceBusMessage("from-the-top", message_id="top"))
            assert peek(end) == []
            stopped = peek(queue_dlqs["chain-e"])
            assert [m.message_id for m in stopped] == ["top"]
            assert stopped[0].dead_letter_reason == "MaxTransferHopCountExceeded"
            assert all(peek(r) == [] for q, r in queue_dlqs.items() if q != "chain-e")
            assert all(peek(r) == [] for r in sub_dlqs.values())

            # Entered one step lower the same route is four transfers: b -> c/next -> d -> e -> f.
            one_lower.send_messages(ServiceBusMessage("one-lower", message_id="lower"))
            assert [m.message_id for m in peek(end)] == ["lower"]
