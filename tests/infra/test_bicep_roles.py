"""The Function App's identity gets exactly the roles the code needs, each on the one resource it needs.

Role ids are Azure's built-in role definition ids (the same in every cloud), checked against Microsoft's
published role list and Microsoft's own Flex Consumption sample templates.
"""

from __future__ import annotations

from tests.infra.bicep_tree import BicepResource, accessor_path, is_reference, modules, string_variables
from tests.infra.infra_paths import bicep_resources, templates

SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"
SERVICE_BUS_DATA_RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"
STORAGE_BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
STORAGE_TABLE_DATA_CONTRIBUTOR = "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3"
MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"
# More than the app needs: never assigned.
SERVICE_BUS_DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
USER_ACCESS_ADMINISTRATOR = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"

NAMESPACE = "Microsoft.ServiceBus/namespaces"
STORAGE_ACCOUNT = "Microsoft.Storage/storageAccounts"
CONTAINER = "Microsoft.Storage/storageAccounts/blobServices/containers"
APP_INSIGHTS = "Microsoft.Insights/components"

# (role, type of the resource it is scoped to): everything the identity needs, and nothing more.
EXPECTED = {
    (SERVICE_BUS_DATA_SENDER, NAMESPACE),  # publish, re-drive
    (SERVICE_BUS_DATA_RECEIVER, NAMESPACE),  # triggers, dead-letter receivers
    (CONTRIBUTOR, NAMESPACE),  # provisioning through azure-mgmt-servicebus
    (STORAGE_BLOB_DATA_OWNER, STORAGE_ACCOUNT),  # identity-based AzureWebJobsStorage + deployment container
    (STORAGE_TABLE_DATA_CONTRIBUTOR, STORAGE_ACCOUNT),  # the endpoints' tables in AzureWebJobsStorage
    (STORAGE_BLOB_DATA_CONTRIBUTOR, CONTAINER),  # the Parquet archive
    (MONITORING_METRICS_PUBLISHER, APP_INSIGHTS),  # telemetry with Entra ID
}


def assignments() -> list[BicepResource]:
    return [r for r in bicep_resources() if r.type == "Microsoft.Authorization/roleAssignments"]


def role_of(assignment: BicepResource) -> str:
    """The role definition id, resolved through the file's ``var`` declarations."""
    definition = assignment.at("properties", "roleDefinitionId")
    function = definition.get("function", {}) if isinstance(definition, dict) else {}
    arguments = function.get("parameters", {})
    assert function.get("type") == "subscription_resource_id" and arguments["resource_type"] == (
        "Microsoft.Authorization/roleDefinitions"
    ), f"{assignment.symbol}: roleDefinitionId must be subscriptionResourceId('...roleDefinitions', <var>)"
    variable = arguments["resource_name_1"]
    variables = string_variables(templates()[assignment.file])
    assert is_reference(variable) and variable in variables, (
        f"{assignment.symbol}: {variable} is not a string var"
    )
    return variables[variable]


def scope_of(assignment: BicepResource) -> BicepResource:
    """The resource the assignment is scoped to (a declared resource of the same file)."""
    scope = assignment.config.get("scope")
    assert scope, f"{assignment.symbol} has no scope: it would apply to the whole resource group"
    assert is_reference(scope), f"{assignment.symbol}: scope must name a resource of the file"
    (resource,) = [r for r in bicep_resources() if r.file == assignment.file and r.symbol == scope]
    return resource


def test_the_identity_gets_exactly_the_roles_the_code_needs_on_the_right_resources() -> None:
    found = [(role_of(a), scope_of(a).type) for a in assignments()]
    assert len(found) == len(set(found)), "a role is assigned twice"
    assert set(found) == EXPECTED


def test_no_assignment_grants_ownership_or_the_right_to_grant_roles() -> None:
    roles = {role_of(a) for a in assignments()}
    assert roles.isdisjoint({SERVICE_BUS_DATA_OWNER, OWNER, USER_ACCESS_ADMINISTRATOR})


def test_contributor_is_scoped_to_the_service_bus_namespace_only() -> None:
    scopes = [scope_of(a) for a in assignments() if role_of(a) == CONTRIBUTOR]
    assert [s.type for s in scopes] == [NAMESPACE]
    assert accessor_path(scopes[0].at("name")) == ["serviceBusNamespaceName"]


def test_the_archive_role_is_scoped_to_the_archive_container_of_the_archive_account() -> None:
    (assignment,) = [a for a in assignments() if role_of(a) == STORAGE_BLOB_DATA_CONTRIBUTOR]
    container = scope_of(assignment)
    assert accessor_path(container.at("name")) == ["archiveContainerName"]
    by_symbol = {r.symbol: r for r in bicep_resources() if r.file == assignment.file}
    account = by_symbol[by_symbol[container.at("parent")].at("parent")]
    assert accessor_path(account.at("name")) == ["archiveAccountName"]


def test_the_host_storage_roles_are_scoped_to_the_host_account_not_the_archive() -> None:
    for role in (STORAGE_BLOB_DATA_OWNER, STORAGE_TABLE_DATA_CONTRIBUTOR):
        (assignment,) = [a for a in assignments() if role_of(a) == role]
        assert accessor_path(scope_of(assignment).at("name")) == ["hostStorageAccountName"], role


def test_every_assignment_is_for_the_function_apps_identity() -> None:
    for assignment in assignments():
        assert accessor_path(assignment.at("properties", "principalId")) == ["principalId"], assignment.symbol
        assert assignment.at("properties", "principalType") == "ServicePrincipal", assignment.symbol
    roles_module = modules(templates()["main.bicep"])["roles"]
    assert accessor_path(roles_module.params["principalId"]) == ["functionApp", "outputs", "principalId"]
    outputs = templates()["modules/functionapp.bicep"]["outputs"]
    assert accessor_path(outputs["principalId"]["value"]) == ["app", "identity", "principalId"]


def test_assignment_names_are_deterministic_so_redeploys_are_idempotent() -> None:
    for assignment in assignments():
        name = assignment.at("name")
        function = name.get("function", {}) if isinstance(name, dict) else {}
        assert function.get("type") == "guid", assignment.symbol
        arguments = function["parameters"]
        scope = assignment.at("scope")
        assert accessor_path(arguments["base_string"]) == [scope, "id"], assignment.symbol
        assert accessor_path(arguments["extra_string_1"]) == ["principalId"], assignment.symbol
        assert is_reference(arguments["extra_string_2"]), assignment.symbol
        assert sorted(arguments) == ["base_string", "extra_string_1", "extra_string_2"], assignment.symbol
