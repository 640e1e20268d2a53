"""The sample: four endpoints over the seeds' events (billing, crm, shipping, sales), so ``make run`` shows
real traffic, and the app's own tests and the guides have an app to exercise.

- :mod:`app.endpoints.sample.events`: the contracts (``Shipping.*``, ``Tenant.*``, ``Billing.*``);
- :mod:`app.endpoints.sample.endpoints`: the handlers and the four :class:`~shared.handlers.Endpoint`\\ s;
- :mod:`app.endpoints.sample.journal`: what the handlers handled (logged, and in the test probe).

Hosted like any endpoint module (:mod:`app.discovery`), unless ``BUSBAR_SAMPLE_ENDPOINTS`` is ``false``:
then the app serves only your endpoints. Deleting this directory removes the sample for good, together
with the tests that exercise it (docs/endpoints.md lists them).
"""

from __future__ import annotations

from app.endpoints.sample.endpoints import (
    BILLING,
    CRM,
    ENDPOINTS,
    HIGH_VALUE,
    SALES,
    SHIPPING,
    sample_catalog,
)
from app.endpoints.sample.events import SAMPLE_EVENTS, sample_registry
from app.endpoints.sample.journal import JOURNAL, HandledEvent, Journal

__all__ = [
    "BILLING",
    "CRM",
    "ENDPOINTS",
    "HIGH_VALUE",
    "JOURNAL",
    "SALES",
    "SAMPLE_EVENTS",
    "SHIPPING",
    "HandledEvent",
    "Journal",
    "sample_catalog",
    "sample_registry",
]
