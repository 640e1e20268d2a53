"""Which endpoints the provisioning API may provision: the ones this app hosts, and any other subscriber
on the namespace (another app, a .NET NServiceBus endpoint) that owns its input queue.

An endpoint the app does not host is named by its input queue (NServiceBus: the endpoint name is the queue
name). The name must be a valid Azure queue path (under the hierarchy prefix) and yield a valid
subscription name; the optional app setting ``BUSBAR_PROVISIONABLE_ENDPOINTS`` restricts which names may
be provisioned at all. Pure functions: no I/O.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from shared.app_settings import AppSetting, read
from shared.topology import HierarchyNamespace, TopologyOptions, subscription_name
from shared.topology.names import is_valid_queue_name, is_valid_subscription_name

PROVISIONABLE_ENDPOINTS = AppSetting(
    "BUSBAR_PROVISIONABLE_ENDPOINTS",
    "Comma-separated endpoint names or shell-style patterns (e.g. 'crm,partner-*') the provisioning API "
    "may provision besides the endpoints this app hosts. Empty: any valid endpoint name.",
)

SETTINGS: tuple[AppSetting, ...] = (PROVISIONABLE_ENDPOINTS,)

QUEUE_NAME_RULE = (
    "an endpoint name is its input queue's name: 1-260 characters of letters, digits, '.', '-', '_' and "
    "'/', starting with a letter, digit or '$' and ending with a letter or digit, without '\\', '?' or '#' "
    "(hierarchy prefix included)"
)
SUBSCRIPTION_NAME_RULE = (
    "the endpoint's subscriptions are named after it: at most 50 characters of letters, digits, '.', '-' "
    "and '_', starting and ending with a letter or digit, without '/'"
)


def name_problems(name: str, options: TopologyOptions) -> list[str]:
    """Every Azure naming rule the endpoint name ``name`` breaks, each stated with the rule."""
    problems: list[str] = []
    queue = HierarchyNamespace(options.hierarchy_namespace).apply(name)
    if not is_valid_queue_name(queue):
        problems.append(f"{queue!r}: {QUEUE_NAME_RULE}")
    subscription = subscription_name(options, name)
    if not is_valid_subscription_name(subscription):
        problems.append(f"{subscription!r}: {SUBSCRIPTION_NAME_RULE}")
    return problems


def allowed_patterns(env: Mapping[str, str]) -> list[str]:
    """The configured patterns; empty when every valid name is allowed."""
    raw = read(PROVISIONABLE_ENDPOINTS, env) or ""
    return [p.strip() for p in raw.split(",") if p.strip()]


def is_allowed(name: str, patterns: list[str]) -> bool:
    """True when ``patterns`` is empty or one of them matches ``name`` (case-insensitively, as Service Bus
    compares entity names)."""
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(name.lower(), pattern.lower()) for pattern in patterns)
