"""The start-up provisioning plans through the one planner (issue 39, item 4): it refuses, before changing
anything, a plan that would deliver an event to an endpoint twice, as the HTTP API and the CLI do.

After a declared migration moved shipping's ``Billing.InvoiceIssued`` to the event's own topic (the old
fallback rule deleted), the start-up's plan from shipping's handlers would add the fallback rule back beside
the new path: every invoice twice. It used to; now it fails naming both paths and the way out.
"""

from __future__ import annotations

from app.bootstrap import provision_endpoints
from app.endpoints.sample import sample_catalog
from emulator.server import EmulatorThread
from shared.api.provisioning.service import entity_defaults
from shared.handlers.endpoints import Endpoint
from shared.topology import EntityDefaults, Provisioner, desired_state, load_topology_options
from shared.topology.delivery_paths import DuplicateDeliveryError
from shared.topology.desired import parse_subscribed_events
from shared.topology.handover import snapshot_seconds
from shared.topology.single_delivery import Subscriber, plan_delivery
from tests.functions.busbar_app import app_settings, management_for

INVOICES = "Billing.InvoiceIssued"


def _shipping() -> Endpoint:
    [shipping] = [e for e in sample_catalog() if e.name == "shipping"]
    return shipping


def test_the_start_up_refuses_to_add_a_second_path_for_an_event_and_changes_nothing(
    private_emulator: EmulatorThread,
) -> None:
    # A one-second router snapshot: the migration's handover (snapshot + margin) then lasts 3 s, not 32 s.
    # It is over either way when apply returns (old rule deleted), which is all the start-up below meets.
    settings = app_settings(private_emulator, BUSBAR_ROUTER_SNAPSHOT_SECONDS="1")
    options, defaults = load_topology_options(settings), entity_defaults(settings)
    queue, fallback = settings["BUSBAR_SHIPPING_QUEUE"], settings["BUSBAR_FALLBACK_TOPIC"]
    with management_for(settings) as management:
        provision_endpoints(management, options, defaults, settings, [_shipping()])
        # The operator's declared migration: invoices on their own topic, the fallback rule deleted after.
        events = parse_subscribed_events([{"type": INVOICES, "topic": INVOICES}])
        provisioner = Provisioner(
            management, EntityDefaults(duplicate_detection_window=defaults.duplicate_detection_window)
        )
        wanted = desired_state(
            options, queue, events, duplicate_detection_window=defaults.duplicate_detection_window
        )
        migration = plan_delivery(
            provisioner,
            options,
            [Subscriber(queue, events)],
            wanted,
            migrate=True,
            router_snapshot_seconds=snapshot_seconds(settings),
        )
        provisioner.apply(migration)
        before = provisioner.describe(queue, options)

        refused = None
        try:
            provision_endpoints(management, options, defaults, settings, [_shipping()])
        except DuplicateDeliveryError as error:
            refused = error
        after = provisioner.describe(queue, options)

    assert refused is not None, "the start-up added a second path for the invoices"
    [reason] = refused.errors
    assert f"{queue} would receive {INVOICES} 2 times" in reason
    assert f"{INVOICES}/{queue}" in reason and f"{fallback}/{queue}/{INVOICES}" in reason
    assert "unsubscribe the existing path first" in reason
    assert after == before  # nothing changed
