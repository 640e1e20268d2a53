"""Re-drive policy: which dead-letter reasons are re-driven, archived or left alone. Pure.

``BUSBAR_REDRIVE_POLICY`` is JSON merged over :data:`DEFAULT_POLICY_JSON`; every key is optional::

    {
        "default": "archive",  # unknown reasons
        "reasons": {"OrderLocked": "redrive"},  # dead-letter reason -> redrive | archive | leave
        "transient_exceptions": ["SqlDeadlock"],  # exception names that are re-driven
        "permanent_exceptions": ["OrderInvalid"],  # exception names that are archived
        "duplicate_window": "hold",  # re-send still inside the target's dedup window: hold | archive
        "no_private_target": "archive",  # subscription without a forward-to queue: archive | leave
    }

``reasons`` entries are added to (and override) the defaults; a name in one exception list is removed from
the other. An *exception name* is matched against the framework failure headers
(``NServiceBus.ExceptionInfo.ExceptionType``, ``MT-Fault-ExceptionType``) and against the dead-letter reason
itself (Microsoft recommends putting the exception type there), by full name or by the part after the last
dot. Precedence: failure-header exception name, then the ``reasons`` table, then the reason as an exception
name, then ``default``.

Unknown reasons are archived by default: that removes them from the dead-letter queue without losing them
(the replay job can re-send them after a fix) and cannot start a re-drive loop.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class Action(StrEnum):
    """What the policy says to do with a dead-lettered message."""

    REDRIVE = "redrive"
    ARCHIVE = "archive"
    LEAVE = "leave"


class PolicyError(ValueError):
    """The policy JSON is invalid."""


DEFAULT_REASONS: Mapping[str, Action] = MappingProxyType(
    {
        # transient: the message itself is fine, the handler or the broker was not
        "MaxDeliveryCountExceeded": Action.REDRIVE,
        "TTLExpiredException": Action.REDRIVE,
        "MessageLockLost": Action.REDRIVE,
        "SessionLockLost": Action.REDRIVE,
        # auto-forward failures, named by the exception the destination raised: full or disabled for now
        "QuotaExceededException": Action.REDRIVE,
        "MessagingEntityDisabledException": Action.REDRIVE,
        # permanent: re-sending cannot help
        "MaxTransferHopCountExceeded": Action.ARCHIVE,
        "NoMatchingSubscription": Action.ARCHIVE,
        "HeaderSizeExceeded": Action.ARCHIVE,
        "Session ID is null.": Action.ARCHIVE,
        "FilterEvaluationException": Action.ARCHIVE,
        "MessagingEntityNotFoundException": Action.ARCHIVE,  # the forwarding destination is gone
        "MessageSizeExceededException": Action.ARCHIVE,  # too large for the destination
        "SchemaValidationFailed": Action.ARCHIVE,
        "ValidationFailed": Action.ARCHIVE,
        "DeserializationFailed": Action.ARCHIVE,
    }
)

DEFAULT_TRANSIENT_EXCEPTIONS = frozenset(
    {
        "TimeoutError",
        "TimeoutException",
        "OperationTimeoutError",
        "ServerBusyException",
        "ServiceBusServerBusyError",
        "MessageLockLostError",
        "MessageLockLostException",
        "SessionLockLostError",
        "ConnectionError",
    }
)

DEFAULT_PERMANENT_EXCEPTIONS = frozenset(
    {
        "ValidationError",
        "ValidationException",
        "SchemaValidationError",
        "JSONDecodeError",
        "JsonException",
        "SerializationException",
        "MessageDeserializationException",
        "MessageDeserializedException",
        "UnknownContractError",
    }
)

EXCEPTION_TYPE_PROPERTIES = ("NServiceBus.ExceptionInfo.ExceptionType", "MT-Fault-ExceptionType")
"""Application properties that carry the failing exception's type name."""


def _folded(names: Iterable[str]) -> frozenset[str]:
    return frozenset(name.strip().casefold() for name in names if name.strip())


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed policy (see the module docstring); the default instance is the default policy."""

    reasons: Mapping[str, Action] = field(default_factory=lambda: dict(DEFAULT_REASONS))
    transient_exceptions: frozenset[str] = DEFAULT_TRANSIENT_EXCEPTIONS
    permanent_exceptions: frozenset[str] = DEFAULT_PERMANENT_EXCEPTIONS
    default: Action = Action.ARCHIVE
    duplicate_window: Action = Action.LEAVE  # LEAVE = hold in the dead-letter queue; ARCHIVE = archive
    no_private_target: Action = Action.ARCHIVE
    default_rule: str = "default"  # how the audit names the rule behind ``default``

    def __post_init__(self) -> None:
        # Matching is case-insensitive; fold once here.
        folded = {reason.strip().casefold(): action for reason, action in self.reasons.items()}
        object.__setattr__(self, "reasons", MappingProxyType(folded))
        object.__setattr__(self, "transient_exceptions", _folded(self.transient_exceptions))
        object.__setattr__(self, "permanent_exceptions", _folded(self.permanent_exceptions))


@dataclass(frozen=True, slots=True)
class Classification:
    """The policy's answer for one message, and which rule gave it (for the audit)."""

    action: Action
    rule: str


def classify(policy: Policy, reason: str | None, exception_type: str | None = None) -> Classification:
    """What ``policy`` says to do with a message dead-lettered for ``reason`` (and ``exception_type``)."""
    if exception_type:
        found = _exception_action(policy, exception_type)
        if found is not None:
            return Classification(found, f"exception {exception_type}")
    key = (reason or "").strip().casefold()
    action = policy.reasons.get(key)
    if action is not None:
        return Classification(action, f"reason {reason}")
    if reason:
        found = _exception_action(policy, reason)
        if found is not None:
            return Classification(found, f"reason as exception {reason}")
    return Classification(
        policy.default, policy.default_rule if reason else f"{policy.default_rule} (no reason)"
    )


def _exception_action(policy: Policy, name: str) -> Action | None:
    full = name.strip().casefold()
    candidates = {full, full.rsplit(".", 1)[-1]}
    if candidates & policy.permanent_exceptions:
        return Action.ARCHIVE
    if candidates & policy.transient_exceptions:
        return Action.REDRIVE
    return None


def exception_type_of(properties: Mapping[str, Any]) -> str | None:
    """The failing exception's type from framework failure headers, if the message carries one."""
    for name in EXCEPTION_TYPE_PROPERTIES:
        value = properties.get(name)
        if isinstance(value, str) and value.strip():
            # NServiceBus writes the assembly-qualified name only in some versions; keep the type part.
            return value.split(",", 1)[0].strip()
    return None


_KEYS = {"default", "reasons", "transient_exceptions", "permanent_exceptions", "duplicate_window"}
_KEYS |= {"no_private_target"}


def parse_policy(text: str | None) -> Policy:
    """The policy ``text`` (JSON, see the module docstring) describes, merged over the defaults."""
    if text is None or not text.strip():
        return Policy()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise PolicyError(f"must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise PolicyError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    reasons = dict(DEFAULT_REASONS)
    raw_reasons = raw.get("reasons", {})
    if not isinstance(raw_reasons, dict):
        raise PolicyError("'reasons' must be an object of reason -> redrive | archive | leave")
    for reason, value in raw_reasons.items():
        reasons[reason] = _action(f"reasons[{reason!r}]", value, tuple(Action))
    transient = _names(raw, "transient_exceptions")
    permanent = _names(raw, "permanent_exceptions")
    both = _folded(transient) & _folded(permanent)
    if both:
        raise PolicyError(f"exception(s) listed as both transient and permanent: {', '.join(sorted(both))}")
    transient_set = (_folded(DEFAULT_TRANSIENT_EXCEPTIONS) - _folded(permanent)) | _folded(transient)
    permanent_set = (_folded(DEFAULT_PERMANENT_EXCEPTIONS) - _folded(transient)) | _folded(permanent)
    return Policy(
        reasons=reasons,
        transient_exceptions=transient_set,
        permanent_exceptions=permanent_set,
        default=_action("default", raw.get("default", "archive"), tuple(Action)),
        duplicate_window=_hold_or_archive(raw.get("duplicate_window", "hold")),
        no_private_target=_action(
            "no_private_target", raw.get("no_private_target", "archive"), (Action.ARCHIVE, Action.LEAVE)
        ),
    )


def operator_policy(policy: Policy, action: Action) -> Policy:
    """``policy`` with every reason and exception overridden by an operator's ``action`` (retry or archive
    from the console); the guards (loop limit, duplicate window, private target) stay ``policy``'s."""
    return Policy(
        reasons={},
        transient_exceptions=frozenset(),
        permanent_exceptions=frozenset(),
        default=action,
        duplicate_window=policy.duplicate_window,
        no_private_target=policy.no_private_target,
        default_rule=f"operator {action.value}",
    )


def _names(raw: Mapping[str, Any], key: str) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise PolicyError(f"'{key}' must be a list of non-empty exception names")
    return [v.strip() for v in value]


def _action(where: str, value: Any, allowed: tuple[Action, ...]) -> Action:
    if isinstance(value, str):
        for action in allowed:
            if value.strip().lower() == action.value:
                return action
    choices = " | ".join(a.value for a in allowed)
    raise PolicyError(f"{where} must be {choices}, got {value!r}")


def _hold_or_archive(value: Any) -> Action:
    if isinstance(value, str) and value.strip().lower() == "hold":
        return Action.LEAVE
    if isinstance(value, str) and value.strip().lower() == "archive":
        return Action.ARCHIVE
    raise PolicyError(f"duplicate_window must be hold | archive, got {value!r}")
