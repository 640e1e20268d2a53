"""Writing an endpoint: contracts, handlers and the endpoint that hosts them.

This package's ``__all__`` is the whole API a handler author needs: declare contracts as :class:`Event`
subclasses in a :class:`ContractRegistry`, register handlers (``handler(event, context)``) in a
:class:`HandlerRegistry`, and name the endpoint that runs them with an :class:`Endpoint` in the app's
:class:`EndpointCatalog`. A handler publishes and sends through its :class:`HandlerContext` and raises
:class:`PermanentHandlerError` for a message that can never succeed. The other modules here
(:mod:`~shared.handlers.dispatch`, :mod:`~shared.handlers.outgoing`, :mod:`~shared.handlers.subscriber`)
are what the hosting function calls.
"""

from shared.contracts import ContractRegistry, Event
from shared.handlers.context import HandlerContext
from shared.handlers.dispatch import HandlerRegistry, PermanentHandlerError
from shared.handlers.endpoints import Endpoint, EndpointCatalog
from shared.messages import IncomingMessage

__all__ = [
    "ContractRegistry",
    "Endpoint",
    "EndpointCatalog",
    "Event",
    "HandlerContext",
    "HandlerRegistry",
    "IncomingMessage",
    "PermanentHandlerError",
]
