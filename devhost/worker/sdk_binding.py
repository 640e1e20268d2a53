"""SDK-type Service Bus parameters on the worker's side: the ``model_binding_data`` contents the host sends
(``devhost.model_binding_data``) wrapped as the worker protocol's messages and decoded by the converter that
``azurefunctions-extensions-bindings-servicebus`` registered in ``azurefunctions.extensions.base``'s
registry, as the Python worker does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azurefunctions.extensions.base import Datum, get_binding_registry

MODEL_BINDING_DATA_VERSION = "1.0"
MODEL_BINDING_DATA_SOURCE = "AzureServiceBusReceivedMessage"
MODEL_BINDING_DATA_CONTENT_TYPE = "application/octet-stream"
SERVICE_BUS_TRIGGER = "serviceBusTrigger"


@dataclass(frozen=True, slots=True)
class ModelBindingData:
    """The worker protocol's ``ModelBindingData`` message (same field names as the protobuf)."""

    version: str
    source: str
    content_type: str
    content: bytes


@dataclass(frozen=True, slots=True)
class CollectionModelBindingData:
    """The worker protocol's ``CollectionModelBindingData``: a batch trigger's messages."""

    model_binding_data: list[ModelBindingData]


def model_binding_data(content: bytes) -> ModelBindingData:
    """The ``ModelBindingData`` the host's Service Bus extension sends with ``content``."""
    return ModelBindingData(
        MODEL_BINDING_DATA_VERSION, MODEL_BINDING_DATA_SOURCE, MODEL_BINDING_DATA_CONTENT_TYPE, content
    )


def trigger_datum(contents: Sequence[bytes], *, batch: bool) -> Datum:
    """The trigger's ``Datum``: ``model_binding_data``, or ``collection_model_binding_data`` for a batch."""
    if batch:
        collection = CollectionModelBindingData([model_binding_data(c) for c in contents])
        return Datum(collection, "collection_model_binding_data")
    return Datum(model_binding_data(contents[0]), "model_binding_data")


def decode_with_extension(datum: Datum, pytype: Any) -> Any:
    """Decode ``datum`` with the converter the extension registered, as the worker does."""
    converter = get_binding_registry().get(SERVICE_BUS_TRIGGER)
    if converter is None:
        raise RuntimeError(
            "no converter registered for 'serviceBusTrigger':"
            " import azurefunctions.extensions.bindings.servicebus"
        )
    return converter.decode(datum, trigger_metadata={}, pytype=pytype)
