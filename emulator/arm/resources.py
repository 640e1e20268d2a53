"""The JSON ARM reports for the namespace and its entities: resource id, name, type, location and
properties, with live message counts from the broker and timestamps from the ARM metadata."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.arm import models
from emulator.arm.metadata import EntityMeta, Metadata
from emulator.broker.entities import MessageEntity, QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.namespace import Namespace
from emulator.broker.properties import RuleConfig
from emulator.tier import PREMIUM_MESSAGING_UNITS, Sku

PROVIDER = "Microsoft.ServiceBus"
_TYPES = {
    "namespace": "Microsoft.ServiceBus/Namespaces",
    "queue": "Microsoft.ServiceBus/Namespaces/Queues",
    "topic": "Microsoft.ServiceBus/Namespaces/Topics",
    "subscription": "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions",
    "rule": "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions/Rules",
}


def sku_json(sku: Sku) -> dict[str, Any]:
    """The namespace's ``sku`` as ARM reports it: a Premium namespace also has a capacity (messaging
    units)."""
    if sku is Sku.PREMIUM:
        return {"name": sku.value, "tier": sku.value, "capacity": PREMIUM_MESSAGING_UNITS}
    return {"name": sku.value, "tier": sku.value}


class Resources:
    """Renders entities; ``base`` arguments are the namespace's resource id as the client addressed it."""

    def __init__(
        self, namespace: Namespace, metadata: Metadata, location: str, endpoint: Callable[[], str]
    ) -> None:
        self.namespace = namespace
        self.metadata = metadata
        self.location = location
        self.endpoint = endpoint

    def counts(self, entity: MessageEntity) -> tuple[dict[str, int], int]:
        counts = self.namespace.counts(entity)
        return counts, sum(counts.values())

    def times(self, meta: EntityMeta) -> dict[str, str]:
        updated = models.timestamp(meta.updated_at)
        return {"createdAt": models.timestamp(meta.created_at), "updatedAt": updated, "accessedAt": updated}

    def resource(self, kind: str, rid: str, name: str, properties: dict[str, Any]) -> dict[str, Any]:
        document: dict[str, Any] = {"id": rid, "name": name, "type": _TYPES[kind]}
        if kind != "rule":
            document["location"] = self.location
        document["properties"] = properties
        return document

    def namespace_json(self, subscription_id: str, group: str) -> dict[str, Any]:
        started = models.timestamp(self.metadata.started_at)
        base = (
            f"/subscriptions/{subscription_id}/resourceGroups/{group}/providers/{PROVIDER}"
            f"/namespaces/{self.namespace.name}"
        )
        document = self.resource(
            "namespace",
            base,
            self.namespace.name,
            {
                "provisioningState": "Succeeded",
                "status": "Active",
                "createdAt": started,
                "updatedAt": started,
                "serviceBusEndpoint": self.endpoint(),
                "metricId": f"{subscription_id}:{self.namespace.name.lower()}",
                "disableLocalAuth": False,
                "zoneRedundant": False,
                "minimumTlsVersion": "1.2",
                "publicNetworkAccess": "Enabled",
            },
        )
        document["sku"] = sku_json(self.namespace.sku)
        document["tags"] = {}
        return document

    def queue_json(self, base: str, entity: QueueEntity) -> dict[str, Any]:
        meta = self.metadata.get(entity.name)
        counts, total = self.counts(entity)
        properties = models.queue_properties(entity.props, meta.extras)
        properties |= {"sizeInBytes": entity.size_bytes, "messageCount": total, "countDetails": counts}
        properties |= self.times(meta)
        return self.resource("queue", f"{base}/queues/{entity.name}", entity.name, properties)

    def topic_json(self, base: str, topic: TopicEntity) -> dict[str, Any]:
        meta = self.metadata.get(topic.name)
        properties = models.topic_properties(topic.props, meta.extras)
        # Messages pass through a topic at once, except those scheduled on it: they wait at topic level.
        counts = {
            "activeMessageCount": 0,
            "deadLetterMessageCount": 0,
            "scheduledMessageCount": len(topic.scheduled.messages),
            "transferMessageCount": 0,
            "transferDeadLetterMessageCount": 0,
        }
        properties |= {
            "sizeInBytes": topic.size_bytes,
            "subscriptionCount": len(topic.subscriptions),
            "countDetails": counts,
        }
        properties |= self.times(meta)
        return self.resource("topic", f"{base}/topics/{topic.name}", topic.name, properties)

    def subscription_json(self, base: str, subscription: SubscriptionEntity) -> dict[str, Any]:
        meta = self.metadata.get(subscription.path)
        counts, total = self.counts(subscription)
        properties = models.subscription_properties(subscription.props)
        properties |= {"messageCount": total, "countDetails": counts}
        properties |= self.times(meta)
        rid = f"{base}/topics/{subscription.topic.name}/subscriptions/{subscription.subscription_name}"
        return self.resource("subscription", rid, subscription.subscription_name, properties)

    def rule_json(self, base: str, subscription: SubscriptionEntity, rule: RuleConfig) -> dict[str, Any]:
        rid = (
            f"{base}/topics/{subscription.topic.name}/subscriptions/{subscription.subscription_name}"
            f"/rules/{rule.name}"
        )
        return self.resource("rule", rid, rule.name, models.rule_properties(rule))
