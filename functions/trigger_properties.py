"""The application properties of an SDK-type trigger's message, with the AMQP type each value arrived with.

The Service Bus binding extension (``azurefunctions-extensions-bindings-servicebus``) decodes the bytes the
host passes (``model_binding_data``) with uamqp and hands the function an azure-servicebus
``ServiceBusReceivedMessage`` around that uamqp message. Its ``application_properties`` are uamqp's plain
Python values: a long, a timestamp and an int are all ``int``, a binary and a string both ``bytes``, so a
copy Busbar sends on (the router's bridge, its archive rows) would lose the types. uamqp's C message still
holds every value with its AMQP type; encoded again (``c_uamqp.get_encoded_message_size`` on a clone, the
call uamqp's own ``Message.encode_message`` makes, without its re-population from the Python values) it
gives them back, and Busbar's codec reads them
(:func:`~shared.amqp.encoding.application_properties.application_properties_of`, which reads uamqp's
re-encoding too).

Anything else (a message not decoded by uamqp, a uamqp without these calls) gets ``None``: the caller keeps
the SDK's plain values. tests/shared/envelope/test_property_types.py and test_described_properties.py fail
if uamqp or the extension changes this.
"""

from __future__ import annotations

import logging
from typing import Any

from shared.amqp.encoding.application_properties import application_properties_of
from shared.amqp.encoding.types import Described as AnyDescribed
from shared.envelope.properties import PropertyTypeError, amqp_type

logger = logging.getLogger(__name__)


def _encoded(uamqp_message: Any) -> bytes | None:
    c_message = getattr(uamqp_message, "_message", None)  # uamqp.Message -> its c_uamqp.cMessage
    if c_message is None or not hasattr(c_message, "clone"):
        return None
    from uamqp import c_uamqp  # the extension's dependency: imported only when its message is at hand

    chunks: list[bytes] = []
    # A clone, as uamqp's encode_message takes: the encoder owns and frees what it is given.
    c_uamqp.get_encoded_message_size(c_message.clone(), chunks)
    return b"".join(chunks)


def _kept(value: Any) -> Any:
    """A described scalar whose descriptor Busbar cannot send (neither a symbol nor a ulong: no Service Bus
    client writes one) is kept as the value it describes, as docs/operations.md says; a list or a map
    described stays what the codec read, and its copy is refused by name."""
    if isinstance(value, AnyDescribed):
        try:
            amqp_type(value.value)
        except PropertyTypeError:
            return value
        return value.value
    return value


def typed_application_properties(message: Any) -> dict[Any, Any] | None:
    """``message``'s application properties with their AMQP types (``None``: keep the SDK's values)."""
    try:
        payload = _encoded(getattr(message, "_message", None))
        typed = None if payload is None else application_properties_of(payload)
        return None if typed is None else {key: _kept(value) for key, value in typed.items()}
    except Exception:  # the SDK's own reading is always there to fall back on
        logger.warning("application properties kept as the binding extension decoded them", exc_info=True)
        return None
