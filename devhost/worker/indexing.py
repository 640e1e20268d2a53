"""Indexing on the worker's side: import the app, describe each function, and tell the host what it needs
(``FunctionMetadata``) while the handler and the annotation classes stay with the worker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from devhost.worker.app_loader import FunctionSpec, load_functions
from devhost.worker.trigger_shape import trigger_shape
from devhost.worker_protocol import FunctionMetadata

SERVICE_BUS_TRIGGER = "serviceBusTrigger"


@dataclass(frozen=True, slots=True)
class WorkerFunction:
    """One indexed function as the worker keeps it."""

    spec: FunctionSpec
    metadata: FunctionMetadata
    payload_type: Any = None  # Service Bus: the trigger parameter's annotation (the converter's pytype)
    actions_type: Any = None  # Service Bus: the ``ServiceBusMessageActions`` class, if a parameter asks


def _plain(value: Any) -> Any:
    """A binding value without the library's enums (``AuthLevel.ANONYMOUS`` -> ``"anonymous"``)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def describe(spec: FunctionSpec) -> WorkerFunction:
    """The worker's view of ``spec`` and the metadata the host gets (a bad Service Bus shape: ValueError)."""
    metadata = FunctionMetadata(
        name=spec.name,
        trigger_type=spec.trigger_type,
        trigger=_plain(spec.trigger),
        trigger_arg=spec.trigger_arg,
        is_async=spec.is_async,
    )
    if spec.trigger_type != SERVICE_BUS_TRIGGER:
        return WorkerFunction(spec, metadata)
    shape = trigger_shape(spec)
    return WorkerFunction(
        spec,
        replace(metadata, service_bus=shape.service_bus),
        payload_type=shape.payload_type,
        actions_type=shape.actions_type,
    )


def index_functions(app_path: Path, settings: Mapping[str, str]) -> list[WorkerFunction]:
    """Import ``app_path`` and index its functions (AppLoadError, BindingError or ValueError if it cannot)."""
    return [describe(spec) for spec in load_functions(app_path, settings)]
