"""Handler registry and message dispatch: decode, validate, find handlers, classify the outcome.

Dispatch is pure: it takes an :class:`~shared.messages.IncomingMessage` and returns what should happen to it.

- **Type resolution** follows NServiceBus: the ``NServiceBus.EnclosedMessageTypes`` header lists the concrete
  type first, then its interfaces; the first name this endpoint knows is the type the body is validated
  against. A receiver that only knows ``Shipping.IOrderAccepted`` still handles an ``OrderAcceptedV3`` it has
  never heard of, as an ``IOrderAccepted``.
- **Polymorphic dispatch:** every handler registered for any contract the message encloses runs, once each,
  in registration order. A handler for ``IOrderStatusChanged`` receives ``OrderAccepted`` and
  ``OrderDeclined``.
- **Outcome:** :class:`Complete` (with what the handlers published and sent), :class:`DeadLetter` with a
  stable reason and a precise description for a message that can never succeed, or :class:`Retry` for
  anything else, left to the broker's redelivery (``MaxDeliveryCount``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from shared.contracts import ContractRegistry, Event, enclosed_types
from shared.handlers.conditions import handler_condition
from shared.handlers.context import HandlerContext, Outgoing
from shared.handlers.store import HandlerStore
from shared.messages import IncomingMessage
from shared.topology.content_filters import ContentFilter

# Stable dead-letter reasons: operators filter and alert on them, so they never change.
PAYLOAD_VALIDATION_FAILED = "PayloadValidationFailed"
UNSUPPORTED_CONTENT_TYPE = "UnsupportedContentType"
UNKNOWN_MESSAGE_TYPE = "UnknownMessageType"
NO_HANDLER = "NoHandler"
PERMANENT_HANDLER_ERROR = "PermanentHandlerError"
UNREADABLE_MESSAGE = "UnreadableMessage"

MAX_DEAD_LETTER_TEXT = 4096
"""Service Bus limits DeadLetterReason and DeadLetterErrorDescription to 4096 characters each."""

JSON_CONTENT_TYPES = frozenset({"application/json", "text/json"})

E = TypeVar("E", bound=Event)
Handler = Callable[[Any, HandlerContext], None]


class PermanentHandlerError(Exception):
    """Raised by a handler for a message that can never succeed: it is dead-lettered at once, not retried."""


@dataclass(frozen=True, slots=True)
class Complete:
    """Every handler succeeded: dispatch ``outgoing``, then complete the message."""

    event_type: str
    handlers: tuple[str, ...]
    outgoing: tuple[Outgoing, ...] = ()
    correlation_id: str | None = None
    conversation_id: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    writes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The rows the handlers wrote (``context.store``), committed with the message's record."""
    read_versions: Mapping[str, str | None] = field(default_factory=dict)
    """The version each row had when the handlers read it (None: absent): written rows must still have it."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """The message can never succeed: dead-letter it now with this reason and description."""

    reason: str
    description: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", truncate(self.reason))
        object.__setattr__(self, "description", truncate(self.description))


@dataclass(frozen=True, slots=True)
class Retry:
    """A handler failed transiently: abandon the message so the broker redelivers it."""

    error: BaseException = field(compare=False)
    handler: str

    @property
    def description(self) -> str:
        return f"{self.handler} raised {type(self.error).__name__}: {self.error}"


Outcome = Complete | DeadLetter | Retry


def truncate(text: str, limit: int = MAX_DEAD_LETTER_TEXT) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_validation_error(error: ValidationError) -> str:
    """Every pydantic error as ``location: message``, joined by ``; `` (no documentation URLs)."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '<body>'}: {item['msg']}" for item in error.errors()
    ]
    return f"{len(problems)} error(s): " + "; ".join(problems)


@dataclass(frozen=True, slots=True)
class Registration:
    """One handler for one contract, with the condition its endpoint subscribes under (None: every event)."""

    contract: str
    handler: Handler
    name: str
    condition: ContentFilter | None = None


class HandlerRegistry:
    """Handlers per contract (concrete event or interface), in registration order."""

    def __init__(self) -> None:
        self._registrations: list[Registration] = []

    def register(
        self,
        event_type: type[E],
        handler: Callable[[E, HandlerContext], None],
        *,
        where: str | Mapping[str, str | int | float | bool] | None = None,
    ) -> None:
        """Run ``handler`` for every message enclosing ``event_type``'s contract; with ``where``, the
        endpoint subscribes to the event only when its content matches: SQL over the contract's promoted
        properties and system properties (``"amount >= 1000"``) or a correlation filter of promoted
        properties to the values they must equal (``{"region": "emea"}``, the cheapest; prefer it when
        equality is enough). A condition that does not parse, or that reads a property the contract does
        not promote, raises :class:`~shared.contracts.ContractError` naming the problem."""
        if not event_type.contract_name:
            raise ValueError(f"{event_type.__qualname__} has no contract name and cannot be handled")
        name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"
        condition = None if where is None else handler_condition(event_type, where)
        self._registrations.append(Registration(event_type.contract_name, handler, name, condition))

    def handles(
        self,
        event_type: type[E],
        *,
        where: str | Mapping[str, str | int | float | bool] | None = None,
    ) -> Callable[[Callable[[E, HandlerContext], None]], Callable[[E, HandlerContext], None]]:
        """Decorator form of :meth:`register`."""

        def decorate(handler: Callable[[E, HandlerContext], None]) -> Callable[[E, HandlerContext], None]:
            self.register(event_type, handler, where=where)
            return handler

        return decorate

    def registrations(self) -> list[Registration]:
        """Every registration, in order."""
        return list(self._registrations)

    def handled_contracts(self) -> list[str]:
        """The contract names with at least one handler, in first-registration order (the subscriptions)."""
        names: list[str] = []
        for registration in self._registrations:
            if registration.contract not in names:
                names.append(registration.contract)
        return names

    def for_contracts(self, contracts: list[str]) -> list[tuple[str, Handler]]:
        """``(name, handler)`` of every registration matching any of ``contracts``, each handler once."""
        wanted = set(contracts)
        seen: set[int] = set()
        found: list[tuple[str, Handler]] = []
        for registration in self._registrations:
            if registration.contract in wanted and id(registration.handler) not in seen:
                seen.add(id(registration.handler))
                found.append((registration.name, registration.handler))
        return found


class Dispatcher:
    """Turns incoming messages into handler calls for one endpoint."""

    def __init__(self, endpoint_name: str, contracts: ContractRegistry, handlers: HandlerRegistry) -> None:
        self.endpoint_name = endpoint_name
        self.contracts = contracts
        self.handlers = handlers

    def dispatch(self, message: IncomingMessage, store: HandlerStore | None = None) -> Outcome:
        """Decode ``message``, run its handlers (``store``: their rows) and say how to settle it. Never
        raises for bad input."""
        content_type = (message.content_type or "").split(";")[0].strip().lower()
        if content_type and content_type not in JSON_CONTENT_TYPES:
            return DeadLetter(
                UNSUPPORTED_CONTENT_TYPE,
                f"content type {message.content_type!r} is not JSON; Busbar events are application/json",
            )
        names = message.enclosed_types
        if not names:
            return DeadLetter(
                UNKNOWN_MESSAGE_TYPE,
                "the message has no NServiceBus.EnclosedMessageTypes header, so its contract is unknown",
            )
        event_type = next((t for t in map(self.contracts.get, names) if t is not None), None)
        if event_type is None:
            return DeadLetter(
                UNKNOWN_MESSAGE_TYPE,
                f"none of the enclosed types {names} is a contract endpoint {self.endpoint_name!r} knows",
            )
        # The header may name interfaces the resolved class does not declare (a newer publisher) and the class
        # may declare ancestors the header omits (an older one): a handler for either runs.
        contracts = list(dict.fromkeys([*names, *enclosed_types(event_type)]))
        handlers = self.handlers.for_contracts(contracts)
        if not handlers:
            return DeadLetter(
                NO_HANDLER,
                f"endpoint {self.endpoint_name!r} has no handler for {names[0]!r} "
                f"(enclosed types {names}); it handles {self.handlers.handled_contracts()}",
            )
        try:
            event = event_type.model_validate_json(message.body)
        except ValidationError as error:
            return DeadLetter(
                PAYLOAD_VALIDATION_FAILED,
                f"body does not validate as {event_type.contract_name}: {describe_validation_error(error)}",
            )
        context = HandlerContext(message, self.endpoint_name, store)
        for name, handler in handlers:
            try:
                handler(event, context)
            except PermanentHandlerError as error:
                return DeadLetter(
                    PERMANENT_HANDLER_ERROR,
                    f"{name} gave up on {event_type.contract_name}: {type(error).__name__}: {error}",
                )
            except Exception as error:  # any other failure may be transient: let the broker redeliver
                return Retry(error, name)
        return Complete(
            event_type.contract_name,
            tuple(name for name, _ in handlers),
            context.outgoing,
            context.correlation_id,
            context.conversation_id,
            context.outgoing_headers(),
            context.store.writes,
            context.store.versions,
        )
