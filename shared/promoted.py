"""Promoted properties: the fields of an event that every publisher copies into application properties, so
subscription rules (SQL and correlation filters) have something to match.

A contract names them with ``promoted=`` (an interface's promoted fields are promoted by every event deriving
from it)::

    class OrderAccepted(Event, contract="Shipping.OrderAccepted", promoted=("amount", "region")):
        order_id: str
        amount: float
        region: str

**Names.** Each property is named exactly as the field is (``amount``, ``region``), as Azure's own guide
sets them (``message.ApplicationProperties["amount"] = order.Total``) and as the seed's filters read them
(``amount > 1000``, ``{"region": "emea"}``): a filter reads the same word the contract declares. No prefix
is needed to keep them apart from NServiceBus's headers: those are dotted (``NServiceBus.MessageId``), and a
Python field name never holds a dot. (A contract name without a dot, stamped as a boolean property in the
CorrelationFilter routing mode, could collide: :func:`promoted_properties` refuses such an event.)

**Types.** Each value keeps its AMQP type, so a SQL filter compares numbers as numbers:

=====================  =====================================================================
field type             application property
=====================  =====================================================================
``int``                long (64-bit, whatever the value: ``amount >= 1000`` compares longs)
``float``, ``Decimal``  double (a SQL filter has no decimal type; Azure compares doubles)
``bool``               boolean
``str`` (and StrEnum)  string
``datetime``           timestamp (a naive value is taken as UTC)
=====================  =====================================================================

A field whose value is ``None`` is left out (a filter's ``EXISTS(amount)`` is then false, and
``amount IS NULL`` true). A .NET publisher gets the same effect by setting
``ServiceBusMessage.ApplicationProperties["amount"] = order.Amount`` (a ``long`` or ``double``) before
sending (see ``docs/topology-guide.md``, "Routing by content"). Pure.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any, Union, get_args, get_origin

from shared.envelope.properties import Long

PromotedValue = Long | float | bool | str | datetime
"""A promoted property's value, with its AMQP type (:class:`~shared.envelope.properties.Long` is a long)."""

PROMOTABLE_TYPES: tuple[type, ...] = (bool, int, float, Decimal, str, datetime)
"""The field types a contract may promote (and their subclasses, e.g. a ``StrEnum``)."""


def unpromotable_reason(annotation: Any) -> str | None:
    """Why a field annotated ``annotation`` cannot be promoted (None: it can). ``X | None`` is ``X``."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            return f"a union of several types ({annotation}) has no single AMQP type"
        annotation = members[0]
    if isinstance(annotation, type) and issubclass(annotation, PROMOTABLE_TYPES):
        return None
    names = ", ".join(t.__name__ for t in PROMOTABLE_TYPES)
    return f"its type {getattr(annotation, '__name__', annotation)} is not one of {names}"


def promoted_value(value: object) -> PromotedValue:
    """``value`` as its application property: int as long, float and Decimal as double, the rest as is."""
    if isinstance(value, bool | str | datetime):
        return value if not isinstance(value, str) else str(value)
    if isinstance(value, int):
        return Long(value)
    if isinstance(value, float | Decimal):
        return float(value)
    raise TypeError(f"a {type(value).__name__} cannot be promoted to an application property: {value!r}")


def promoted_properties(event: object, *, reserved: Iterable[str] = ()) -> dict[str, PromotedValue]:
    """The application properties ``event``'s contract (a :class:`~shared.contracts.Event`; not imported
    here, since contracts import this module) promotes: ``{field name: typed value}``, fields
    holding ``None`` left out. A name among ``reserved`` (the other properties of the message: headers and
    routing stamps) raises ``ValueError``, since one of the two would silently overwrite the other."""
    taken = {name.lower() for name in reserved}
    out: dict[str, PromotedValue] = {}
    contract = getattr(type(event), "contract_name", type(event).__qualname__)
    for field in getattr(type(event), "promoted_fields", ()):
        if field.lower() in taken:
            raise ValueError(
                f"{contract}: promoted field {field!r} has the name of another property "
                "the message carries (a header or a routing stamp)"
            )
        value = getattr(event, field)
        if value is not None:
            out[field] = promoted_value(value)
    return out
