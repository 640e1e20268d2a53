"""How an entity that does not exist shows up in the azure-servicebus SDK.

Azure refuses the CBS token for a missing entity (status 404, "The messaging entity '…' could not be found"),
so opening a sender or receiver raises :class:`ServiceBusAuthenticationError`, with the put-token's status
in its ``inner_exception``, rather than :class:`MessagingEntityNotFoundError`; the latter comes from
operations on a connection that was authorised before the entity went away. Code that must tell "missing"
from "not allowed" asks :func:`is_entity_not_found`.
"""

from __future__ import annotations

from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusAuthenticationError


def is_entity_not_found(error: BaseException) -> bool:
    """True when ``error`` says the addressed queue, topic or subscription does not exist."""
    if isinstance(error, MessagingEntityNotFoundError):
        return True
    if isinstance(error, ServiceBusAuthenticationError):
        detail = str(getattr(error, "inner_exception", None) or error)
        return "Status code: 404" in detail or "could not be found" in detail
    return False
