"""Ordered endpoints through the app's provisioning paths: the provisioning API's PUT (the HTTP route's
service, with a catalog holding an ordered endpoint of the test's own; the foreign-endpoint refusal through
HTTP itself) and the start-up hook's ``provision_endpoints``. An ordered endpoint gets a session-enabled
input queue and its hold queue; an existing queue whose ``RequiresSession`` differs is refused (409 /
start-up failure) naming it, and nothing is provisioned."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping

import httpx
import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties

from app.bootstrap import provision_endpoints
from app.endpoints.sample.events import SAMPLE_EVENTS, CustomerUpdated, sample_registry
from app.services import provisioning_from_settings
from devhost.testing import start_host
from shared.api import ApiRequest, ApiResponse, guarded
from shared.api.provisioning.service import entity_defaults
from shared.contracts import ContractRegistry
from shared.handlers import Endpoint, EndpointCatalog, HandlerContext, HandlerRegistry
from shared.management import ManagementClient
from shared.topology import load_topology_options
from shared.topology.errors import QueueNeedsRecreatingError
from shared.topology.queue_move import SecondSubscriptionError
from tests.functions.busbar_app import APP, HOST_JSON, management_for
from tests.shared.topology.loyalty_contracts import CampaignStarted, PointsExpired

pytestmark = pytest.mark.timeout(90)

UPDATED = "Tenant.CustomerUpdated"


def _ignore(event: CustomerUpdated, context: HandlerContext) -> None:
    """The handler is never run here: only the endpoint's queues matter."""


def _ordered_endpoint(queue: str, contracts: ContractRegistry | None = None) -> Endpoint:
    handlers = HandlerRegistry()
    handlers.register(CustomerUpdated, _ignore)
    # Named after its fresh queue: an endpoint's queue defaults to its name.
    return Endpoint(queue, contracts or sample_registry(), handlers, ordered=True)


@pytest.fixture
def management(settings: dict[str, str]) -> Iterator[ManagementClient]:
    with management_for(settings) as client:
        yield client


def _put(
    settings: dict[str, str],
    endpoint: Endpoint,
    *,
    dry_run: bool = False,
    events: tuple[str, ...] = (UPDATED,),
) -> ApiResponse:
    service = provisioning_from_settings(settings, EndpointCatalog(endpoint), endpoint.contracts)
    body = json.dumps({"events": list(events), "dryRun": dry_run}).encode()
    request = ApiRequest("PUT", {"endpoint": endpoint.name}, body=body)
    return guarded(lambda: service.put_subscriptions(request))


def _forwarding_to(management: ManagementClient, queue: str) -> list[str]:
    """The subscriptions in the namespace that forward to ``queue``."""
    return [
        f"{topic.name}/{sub.name}"
        for topic in management.topics.list_by_namespace(*management.scope)
        for sub in management.subscriptions.list_by_topic(*management.scope, topic.name)
        if (sub.forward_to or "").lower() == queue.lower()
    ]


def _queue_items(response: ApiResponse) -> list[tuple[str, str, bool]]:
    return [
        (i["action"], i["path"], i["details"]["requiresSession"])
        for i in response.body["plan"]["items"]
        if i["kind"] == "queue"
    ]


def test_put_for_an_ordered_endpoint_creates_its_session_queue_and_hold_queue(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"

    response = _put(settings, _ordered_endpoint(queue))

    assert response.status == 201, response.body
    assert response.body["ordered"] is True
    assert _queue_items(response) == [("create", queue, True), ("create", f"{queue}.held", True)]
    assert response.body["desired"]["queueProperties"][f"{queue}.held"]["requiresDuplicateDetection"] is True
    assert management.queues.get(*management.scope, queue).requires_session is True
    hold = management.queues.get(*management.scope, f"{queue}.held")
    assert (hold.requires_session, hold.requires_duplicate_detection) == (True, True)
    again = _put(settings, _ordered_endpoint(queue))
    assert again.status == 200 and again.body["outcome"] == "unchanged"


def test_put_for_an_ordered_endpoint_whose_queue_exists_without_sessions_is_409_and_provisions_nothing(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"
    management.queues.create_or_update(*management.scope, queue, SBQueue())

    for dry_run in (True, False):
        response = _put(settings, _ordered_endpoint(queue), dry_run=dry_run)
        assert response.status == 409, response.body
        error = response.body["error"]
        assert error["code"] == "QueueNeedsNewName"
        (reason,) = error["details"]
        assert f"queue {queue} (the endpoint's input queue) exists" in reason
        assert "RequiresSession is False, the endpoint needs True" in reason
        assert "needs a new queue" in reason
        assert [i["path"] for i in error["plan"]["items"] if i["action"] == "refused"] == [queue]
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, f"{queue}.held")
    assert _forwarding_to(management, queue) == []


def test_put_over_http_for_an_endpoint_whose_queue_requires_sessions_it_does_not_use_is_409(
    http: httpx.Client, management: ManagementClient
) -> None:
    endpoint = f"partner-{uuid.uuid4().hex[:8]}"  # not hosted: an unordered endpoint
    management.queues.create_or_update(
        *management.scope, endpoint, SBQueue(properties=SBQueueProperties(requires_session=True))
    )

    response = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": [UPDATED]})

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "QueueNeedsNewName"
    assert f"queue {endpoint} (the endpoint's input queue) exists" in error["details"][0]
    assert "RequiresSession is True, the endpoint needs False" in error["details"][0]
    assert http.get(f"/api/endpoints/{endpoint}/subscriptions").json()["subscriptions"] == []


def test_start_up_provisioning_creates_an_ordered_endpoints_queues(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"
    endpoint = _ordered_endpoint(queue)

    provision_endpoints(
        management, load_topology_options(settings), entity_defaults(settings), settings, [endpoint]
    )

    assert management.queues.get(*management.scope, queue).requires_session is True
    assert management.queues.get(*management.scope, f"{queue}.held").requires_session is True
    assert _forwarding_to(management, queue) != []


def test_start_up_provisioning_fails_naming_a_queue_that_needs_a_new_name_and_provisions_nothing(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"
    management.queues.create_or_update(*management.scope, queue, SBQueue())

    with pytest.raises(QueueNeedsRecreatingError) as raised:
        provision_endpoints(
            management,
            load_topology_options(settings),
            entity_defaults(settings),
            settings,
            [_ordered_endpoint(queue)],
        )

    assert f"queue {queue} (the endpoint's input queue) exists" in str(raised.value)
    assert "needs a new queue" in str(raised.value)
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, f"{queue}.held")
    assert _forwarding_to(management, queue) == []


def test_a_host_whose_start_up_hook_meets_a_queue_that_needs_a_new_name_does_not_start(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"
    management.queues.create_or_update(*management.scope, queue, SBQueue())

    def hook(env: Mapping[str, str]) -> None:  # make run's hook, with the test's ordered endpoint
        with management_for(env) as client:
            options, defaults = load_topology_options(env), entity_defaults(env)
            provision_endpoints(client, options, defaults, env, [_ordered_endpoint(queue)])

    with pytest.raises(QueueNeedsRecreatingError, match=f"queue {queue} .* needs a new queue"):
        start_host(APP, settings=settings, host_json=HOST_JSON, startup_hook=hook)


def test_put_subscribing_an_ordered_endpoint_to_an_unkeyed_contract_is_409_and_provisions_nothing(
    settings: dict[str, str], management: ManagementClient
) -> None:
    queue = f"ordered-{uuid.uuid4().hex[:8]}"
    # The app knows Loyalty.IAuditable through two implementers: PointsExpired keyed, CampaignStarted not.
    contracts = ContractRegistry(*SAMPLE_EVENTS, PointsExpired, CampaignStarted)
    endpoint = _ordered_endpoint(queue, contracts)

    for dry_run in (True, False):
        response = _put(settings, endpoint, dry_run=dry_run, events=(UPDATED, "Loyalty.IAuditable"))
        assert response.status == 409, response.body
        error = response.body["error"]
        assert error["code"] == "ContractWithoutOrderingKey"
        assert endpoint.name in error["message"] and "Loyalty.IAuditable" in error["message"]
        (reason,) = error["details"]
        assert f"endpoint {queue} is ordered, but it would subscribe to Loyalty.IAuditable" in reason
        assert "Loyalty.CampaignStarted have no ordering key" in reason
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, queue)
    assert _forwarding_to(management, queue) == []


def test_put_over_http_subscribing_the_ordered_crm_to_an_unknown_contract_on_a_topic_is_409(
    http: httpx.Client, settings: dict[str, str], management: ManagementClient
) -> None:
    topic = f"partner-{uuid.uuid4().hex[:8]}"
    before = http.get("/api/endpoints/crm/subscriptions").json()["subscriptions"]

    response = http.put(
        "/api/endpoints/crm/subscriptions",
        json={"events": [UPDATED, {"type": "Partner.Untyped", "topic": topic}]},
    )

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "ContractWithoutOrderingKey"
    assert "endpoint crm is ordered, but it would subscribe to Partner.Untyped" in error["details"][0]
    assert "not a contract the app knows" in error["details"][0]
    with pytest.raises(ResourceNotFoundError):
        management.topics.get(*management.scope, topic)
    assert http.get("/api/endpoints/crm/subscriptions").json()["subscriptions"] == before


def test_put_with_move_from_redirects_the_old_queues_subscriptions_to_the_new_ordered_queue_in_place(
    settings: dict[str, str], management: ManagementClient
) -> None:
    old = f"plain-{uuid.uuid4().hex[:8]}"
    new = f"{old}-ordered"
    # The old endpoint, unordered, subscribed through the PUT of a non-hosted endpoint's service.
    unordered = Endpoint(old, sample_registry(), HandlerRegistry())
    assert _put(settings, unordered).status == 201
    (path,) = _forwarding_to(management, old)
    mapped = {
        **settings,
        "AzureServiceBus__TopologyOptions": json.dumps({"QueueNameToSubscriptionNameMap": {new: old}}),
    }
    service = provisioning_from_settings(mapped, EndpointCatalog(_ordered_endpoint(new)), sample_registry())

    def put(dry_run: bool) -> ApiResponse:
        body = json.dumps({"events": [UPDATED], "moveFrom": old, "dryRun": dry_run}).encode()
        return guarded(lambda: service.put_subscriptions(ApiRequest("PUT", {"endpoint": new}, body=body)))

    planned = put(True)
    assert planned.status == 200, planned.body
    updates = [i for i in planned.body["plan"]["items"] if i["action"] == "update"]
    assert [u["details"]["forwardTo"] for u in updates] == [{"existing": old, "desired": new}]
    assert _forwarding_to(management, old) == [path]  # a dry run changes nothing

    response = put(False)

    assert response.status == 201, response.body
    assert response.body["outcome"] == "changed"
    assert response.body["result"]["updated"] == [updates[0]["path"]]
    assert _forwarding_to(management, old) == []
    assert _forwarding_to(management, new) == [path]  # the same subscription, redirected
    assert management.queues.get(*management.scope, new).requires_session is True


def test_put_with_move_from_that_leaves_an_event_on_the_old_queue_is_409_and_changes_nothing(
    settings: dict[str, str], management: ManagementClient
) -> None:
    old = f"plain-{uuid.uuid4().hex[:8]}"
    new = f"{old}-ordered"
    unordered = Endpoint(old, sample_registry(), HandlerRegistry())
    created = "Tenant.CustomerCreated"
    assert _put(settings, unordered, events=(UPDATED, created)).status == 201
    options = json.dumps({"QueueNameToSubscriptionNameMap": {new: old}})
    mapped = {**settings, "AzureServiceBus__TopologyOptions": options}
    endpoint = _ordered_endpoint(new)
    service = provisioning_from_settings(mapped, EndpointCatalog(endpoint), sample_registry())
    body = json.dumps({"events": [UPDATED], "moveFrom": old}).encode()

    response = guarded(
        lambda: service.put_subscriptions(ApiRequest("PUT", {"endpoint": endpoint.name}, body=body))
    )

    assert response.status == 409, response.body
    error = response.body["error"]
    assert error["code"] == "IncompleteMove"
    (reason,) = error["details"]
    assert f"the move off {old} is incomplete" in reason
    assert f"/{old}/{created} would be redirected to {new}" in reason
    assert len(_forwarding_to(management, old)) == 1
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, new)


def test_start_up_after_a_move_fails_without_the_subscription_name_map_and_finds_all_unchanged_with_it(
    settings: dict[str, str], management: ManagementClient
) -> None:
    old = f"plain-{uuid.uuid4().hex[:8]}"
    new = f"{old}-ordered"
    assert _put(settings, Endpoint(old, sample_registry(), HandlerRegistry())).status == 201
    mapped = {
        **settings,
        "AzureServiceBus__TopologyOptions": json.dumps({"QueueNameToSubscriptionNameMap": {new: old}}),
    }
    service = provisioning_from_settings(mapped, EndpointCatalog(_ordered_endpoint(new)), sample_registry())
    body = json.dumps({"events": [UPDATED], "moveFrom": old}).encode()
    request = ApiRequest("PUT", {"endpoint": new}, body=body)
    moved = guarded(lambda: service.put_subscriptions(request))
    assert moved.status == 201, moved.body
    (path,) = _forwarding_to(management, new)

    # The next version starts, its endpoint on the new queue, but its options lost the map.
    with pytest.raises(SecondSubscriptionError) as raised:
        options, defaults = load_topology_options(settings), entity_defaults(settings)
        provision_endpoints(management, options, defaults, settings, [_ordered_endpoint(new)])

    (reason,) = raised.value.errors
    assert f"/{new} would be created beside " in reason
    assert f"/{old}, which forwards to {new} already" in reason
    assert "keep QueueNameToSubscriptionNameMap" in reason
    assert _forwarding_to(management, new) == [path]  # nothing created
    provision_endpoints(
        management, load_topology_options(mapped), entity_defaults(mapped), mapped, [_ordered_endpoint(new)]
    )
    assert _forwarding_to(management, new) == [path]
