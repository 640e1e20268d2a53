"""The deployed app provisions the endpoints it hosts when it starts (``BUSBAR_PROVISION_ON_START``).

``function_app.py`` calls :func:`app.bootstrap.provision_on_start` at import (which reads this setting). The
Python worker imports it to index the functions (azure-functions-runtime 1.3.0,
``handle_event.worker_init_request`` → ``load_function_metadata`` → ``index_functions`` →
``loader.index_function_app``), and the host learns the functions, and so which Service Bus listeners to
start, only from that index (``functions_metadata_request`` answers with it). So the endpoints' queues, topics
and subscriptions exist before any trigger listens on them, and a start-up the planner refuses (a queue that
needs a new name, an event that would be delivered twice, a quota) fails the indexing with the planner's
message: the app does not run on a topology that would lose or double events.

Provisioning runs through the one planner (:func:`app.bootstrap.provision_app`) under every hosted
endpoint's provisioning lock (the HTTP API's session locks), so instances starting at once take turns and
the later ones find everything in place ("0 created"). It authenticates as the management client does:
the Function App's managed identity through ``DefaultAzureCredential`` (:mod:`shared.management`), which
needs a management-plane role on the namespace (the Bicep assigns Contributor there; Azure Service Bus Data
Owner covers the data plane only). Off by default: under ``make run`` devhost's start-up hook provisions.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.app_settings import AppSetting, read_switch
from shared.management import SettingsError

PROVISION_ON_START = AppSetting(
    "BUSBAR_PROVISION_ON_START",
    "true: the app provisions its hosted endpoints' queues, topics and subscriptions and the fallback "
    "router's when the worker loads function_app.py (in Azure; under the provisioning lock, with the "
    "managed identity). false: a deployment step or make run's start-up hook does it.",
    default="false",
)

SETTINGS: tuple[AppSetting, ...] = (PROVISION_ON_START,)


def enabled(settings: Mapping[str, str]) -> bool:
    """Whether ``BUSBAR_PROVISION_ON_START`` is on (``true``/``1``, any case); :class:`SettingsError` for
    another value than true/false/1/0 (:func:`shared.app_settings.read_switch`): a typo must not leave a
    deployed app on a topology nobody provisioned, nor provision one nobody asked for."""
    return read_switch(PROVISION_ON_START, settings, SettingsError)
