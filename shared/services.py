"""The app's services, composed from the app settings and the sample endpoints (what function code calls)."""

from __future__ import annotations

from shared import runtime
from shared.api import Misconfigured
from shared.management import SettingsError
from shared.provisioning_service import ProvisioningService, from_settings
from shared.publishing_service import PublishingService
from shared.publishing_service import from_settings as publishing_from_settings
from shared.sample_endpoints import sample_catalog
from shared.sample_events import sample_registry
from shared.topology import Publisher, TopologyValidationError

CATALOG = sample_catalog()
CONTRACTS = sample_registry()


def provisioning_service() -> ProvisioningService:
    """The provisioning service for the current settings (raises :class:`Misconfigured`)."""
    return from_settings(runtime.environment(), CATALOG, CONTRACTS)


def publishing_service() -> PublishingService:
    """The publishing service for the current settings: needs no management settings."""
    return publishing_from_settings(runtime.environment(), CONTRACTS)


def publisher() -> Publisher:
    """The publisher of events posted over HTTP (raises :class:`Misconfigured`)."""
    try:
        return runtime.publisher(runtime.api_endpoint_name())
    except TopologyValidationError as error:
        raise Misconfigured("the topology options app settings are invalid", error.errors) from None
    except SettingsError as error:
        raise Misconfigured("the app settings are incomplete", [str(error)]) from None
