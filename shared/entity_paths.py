"""The entity paths the app's triggers bind to, under the hierarchy namespace.

With ``BUSBAR_HIERARCHY_NAMESPACE=team-a`` every queue and topic Busbar provisions is ``team-a/<name>``
(NServiceBus prefixes receive queues too), so the triggers must listen on ``team-a/billing``, not on the
``billing`` of ``BUSBAR_BILLING_QUEUE``. A binding expression (``%BUSBAR_BILLING_QUEUE%``) cannot add the
prefix, so the trigger declarations take the paths computed here from the app settings when the app is
indexed (``function_app.py`` is imported with the app settings in the environment, in Azure as under
devhost). The prefix is added idempotently: a setting that already holds ``team-a/billing`` stays as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.app_settings import read
from shared.handlers.endpoints import Endpoint
from shared.topology.names import HierarchyNamespace
from shared.topology.options import FALLBACK_TOPIC_SETTING, HIERARCHY_NAMESPACE_SETTING


def hierarchy(env: Mapping[str, str]) -> HierarchyNamespace:
    """The hierarchy namespace of ``BUSBAR_HIERARCHY_NAMESPACE`` (disabled when unset)."""
    return HierarchyNamespace(read(HIERARCHY_NAMESPACE_SETTING, env))


def endpoint_queue_path(endpoint: Endpoint, env: Mapping[str, str]) -> str:
    """The path of ``endpoint``'s input queue: its queue setting under the hierarchy prefix."""
    return hierarchy(env).apply(endpoint.queue(env))


def fallback_topic_binding(env: Mapping[str, str]) -> str:
    """The fallback router's topic: ``BUSBAR_FALLBACK_TOPIC`` under the hierarchy prefix; the binding
    expression itself when the setting is unset (the host then reports it as unresolvable, as before)."""
    topic = read(FALLBACK_TOPIC_SETTING, env)
    if not topic:
        return f"%{FALLBACK_TOPIC_SETTING.name}%"
    return hierarchy(env).apply(topic)
