"""Event contracts: pydantic models with a stable contract name and a polymorphic hierarchy.

A contract name is what NServiceBus calls the type's ``FullName`` (``Shipping.OrderAccepted``): it names
the default topic, the rule and the correlation property, and it is what ``NServiceBus.EnclosedMessageTypes``
lists. Python class names and modules never reach the wire, so contracts can move between modules freely.

Interfaces are contracts too, declared with ``abstract=True``: they are never published themselves but
appear in the enclosed-types header of every event that derives from them::

    class IOrderStatusChanged(Event, contract="Shipping.IOrderStatusChanged", abstract=True):
        order_id: str


    class IOrderAccepted(Event, contract="Shipping.IOrderAccepted", abstract=True):
        order_id: str


    class OrderAccepted(IOrderAccepted, IOrderStatusChanged, contract="Shipping.OrderAccepted"):
        amount: float

``enclosed_types(OrderAccepted)`` is ``["Shipping.OrderAccepted", "Shipping.IOrderAccepted",
"Shipping.IOrderStatusChanged"]``: the concrete type first, then its contracts in method-resolution order,
as NServiceBus core builds the header.

A contract may name the field that is its **ordering boundary** (``ordering_key="customer_id"``; an
interface's key is inherited by every event deriving from it). Every publish and send of such an event
carries that field's value as the Service Bus ``SessionId``, so an ordered endpoint (a session-enabled
input queue) handles the events of one key in publish order (:func:`ordering_key`). Choose a key that
names one thing with a history (a customer, an order, a device): never a constant (that serialises
everything) and never unique per message (that orders nothing).

A contract may also **promote** fields (``promoted=("amount", "region")``; an interface's promoted fields are
promoted by every event deriving from it): every publish and send copies their values into application
properties of the same names, with their AMQP types (:mod:`shared.promoted`), so a subscription can filter
on them (SQL ``amount >= 1000``, correlation ``{"region": "emea"}``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from shared.promoted import unpromotable_reason

ENCLOSED_MESSAGE_TYPES = "NServiceBus.EnclosedMessageTypes"
"""The header (application property) that lists a message's contract names, concrete type first."""

MAX_CONTRACT_NAME_LENGTH = 260
"""A contract name must fit an entity path (260 characters), since it is the default topic name."""

MAX_SESSION_ID_LENGTH = 128
"""Service Bus refuses a ``SessionId`` longer than 128 characters, so an ordering key's value must fit."""


class ContractError(ValueError):
    """A contract is declared wrongly, or a name does not resolve to one."""


class Event(BaseModel):
    """Base class of every event contract (concrete events and interfaces alike)."""

    # allow_inf_nan=False: JSON has no NaN or Infinity, yet pydantic's parser accepts the tokens; a
    # non-finite amount would pass the edge and then dead-letter at every subscriber (issue 17, point 12).
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    contract_name: ClassVar[str] = ""
    """The stable wire name, e.g. ``Shipping.OrderAccepted``. Empty on :class:`Event` itself."""

    is_abstract: ClassVar[bool] = True
    """True for interfaces: they can be subscribed to and handled, but not published."""

    ordering_key_field: ClassVar[str | None] = None
    """The field whose value is the event's ordering boundary (its ``SessionId``), or None: unordered."""

    promoted_fields: ClassVar[tuple[str, ...]] = ()
    """The fields copied into application properties of the same names (:mod:`shared.promoted`): the
    contract's own ``promoted=`` after every base's, each once."""

    def __init_subclass__(
        cls,
        contract: str | None = None,
        abstract: bool = False,
        ordering_key: str | None = None,
        promoted: tuple[str, ...] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(promoted, str):
            # ("amount") is a string, not a tuple: iterating it would promote one field per letter.
            raise ContractError(
                f"{cls.__qualname__}: promoted= takes a tuple of field names, e.g. ({promoted!r},)"
            )
        promoted_before: list[str] = []
        for base in cls.__mro__[1:]:
            for name in getattr(base, "promoted_fields", ()):
                if name not in promoted_before:
                    promoted_before.append(name)
        cls.promoted_fields = tuple(dict.fromkeys([*promoted_before, *(promoted or ())]))
        if ordering_key is not None:
            inherited = cls.ordering_key_field
            if inherited is not None and inherited != ordering_key:
                raise ContractError(
                    f"{cls.__qualname__}: ordering key {ordering_key!r} contradicts the inherited "
                    f"ordering key {inherited!r}"
                )
            cls.ordering_key_field = ordering_key
        if contract is None:
            # A helper base class without its own name (e.g. a mixin of fields): it stays abstract and
            # contributes no name to the enclosed types.
            cls.contract_name = ""
            cls.is_abstract = True
            return
        _check_name(contract, cls.__qualname__)
        cls.contract_name = contract
        cls.is_abstract = abstract

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # Fields exist only once pydantic has built the class: the key must name one of them.
        super().__pydantic_init_subclass__(**kwargs)
        key = cls.ordering_key_field
        if key is not None and key not in cls.model_fields:
            raise ContractError(
                f"{cls.__qualname__}: ordering key {key!r} is not a field of the contract "
                f"(fields: {', '.join(cls.model_fields) or 'none'})"
            )
        for name in cls.promoted_fields:
            field = cls.model_fields.get(name)
            if field is None:
                raise ContractError(
                    f"{cls.__qualname__}: promoted field {name!r} is not a field of the contract "
                    f"(fields: {', '.join(cls.model_fields) or 'none'})"
                )
            reason = unpromotable_reason(field.annotation)
            if reason is not None:
                raise ContractError(
                    f"{cls.__qualname__}: promoted field {name!r} cannot be promoted: {reason}"
                )


def _check_name(name: str, owner: str) -> None:
    if not name or name != name.strip():
        raise ContractError(f"{owner}: a contract name must be non-empty and have no surrounding spaces")
    if len(name) > MAX_CONTRACT_NAME_LENGTH:
        raise ContractError(f"{owner}: contract name {name!r} is longer than {MAX_CONTRACT_NAME_LENGTH}")
    if ";" in name or "," in name:
        # ';' separates entries of the enclosed-types header and ',' starts an assembly qualification.
        raise ContractError(f"{owner}: contract name {name!r} may not contain ';' or ','")


def ordering_key(event: Event) -> str | None:
    """The event's ordering key (its ``SessionId``): the text of its ordering-key field, or None when the
    contract has none. An empty value, or one longer than a ``SessionId`` may be, is a
    :class:`ContractError` naming the field: such an event cannot be put in order, so it is not sent."""
    field = type(event).ordering_key_field
    if field is None:
        return None
    value = getattr(event, field)
    text = "" if value is None else str(value)
    if not text.strip():
        raise ContractError(
            f"{type(event).contract_name}: ordering key field {field!r} is empty; the event's order "
            "cannot be kept without it"
        )
    if len(text) > MAX_SESSION_ID_LENGTH:
        raise ContractError(
            f"{type(event).contract_name}: ordering key field {field!r} is {len(text)} characters long; "
            f"a SessionId holds at most {MAX_SESSION_ID_LENGTH}"
        )
    return text


def enclosed_types(event_type: type[Event]) -> list[str]:
    """The contract names of ``event_type``: itself first, then every named ancestor in MRO order."""
    names: list[str] = []
    for klass in event_type.__mro__:
        if isinstance(klass, type) and issubclass(klass, Event):
            name = klass.__dict__.get("contract_name", "")
            if name and name not in names:
                names.append(name)
    return names


def enclosed_types_header(event_type: type[Event]) -> str:
    """The ``NServiceBus.EnclosedMessageTypes`` value Busbar writes: names joined by ``;``."""
    return ";".join(enclosed_types(event_type))


def parse_enclosed_types(header: str) -> list[str]:
    """Parse an ``NServiceBus.EnclosedMessageTypes`` value the way the NServiceBus transport does.

    Split on ``;``, trim, drop empty and ``__impl`` (proxy) entries, and strip the assembly
    qualification: after the last ``]`` for generic names, otherwise at the first ``,``.
    """
    names: list[str] = []
    for raw in header.split(";"):
        entry = raw.strip()
        if not entry or "__impl" in entry:
            continue
        bracket = entry.rfind("]")
        if bracket >= 0:
            entry = entry[: bracket + 1]
        else:
            comma = entry.find(",")
            if comma >= 0:
                entry = entry[:comma]
        entry = entry.strip()
        if entry:
            names.append(entry)
    return names


class ContractRegistry:
    """Contract names to classes, for turning an incoming message back into a typed event."""

    def __init__(self, *event_types: type[Event]) -> None:
        self._by_name: dict[str, type[Event]] = {}
        for event_type in event_types:
            self.register(event_type)

    def register(self, event_type: type[Event]) -> type[Event]:
        """Add ``event_type`` and every named ancestor; a name bound to another class is an error."""
        for klass in event_type.__mro__:
            if not (isinstance(klass, type) and issubclass(klass, Event)):
                continue
            name = klass.__dict__.get("contract_name", "")
            if not name:
                continue
            known = self._by_name.get(name)
            if known is not None and known is not klass:
                raise ContractError(
                    f"contract name {name!r} is declared by both "
                    f"{known.__qualname__} and {klass.__qualname__}"
                )
            self._by_name[name] = klass
        return event_type

    @classmethod
    def union(cls, *registries: ContractRegistry) -> ContractRegistry:
        """One registry holding every contract of ``registries``; a name two of them bind to different
        classes is a :class:`ContractError` naming both (as registering it twice in one would be)."""
        merged = cls()
        for registry in registries:
            for event_type in registry._by_name.values():
                merged.register(event_type)
        return merged

    def get(self, name: str) -> type[Event] | None:
        """The class registered for ``name``, or None."""
        return self._by_name.get(name)

    def resolve(self, name: str) -> type[Event]:
        """The class registered for ``name``; :class:`ContractError` if there is none."""
        found = self._by_name.get(name)
        if found is None:
            raise ContractError(f"unknown contract type {name!r}")
        return found

    def concrete(self) -> list[type[Event]]:
        """Every registered publishable (non-abstract) contract, sorted by name."""
        return sorted(
            (cls for cls in self._by_name.values() if not cls.is_abstract), key=lambda c: c.contract_name
        )

    def implementers(self, name: str) -> list[type[Event]]:
        """Registered concrete contracts whose enclosed types include ``name`` (itself included)."""
        return [cls for cls in self.concrete() if name in enclosed_types(cls)]

    def names(self) -> list[str]:
        """All registered contract names, sorted."""
        return sorted(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
