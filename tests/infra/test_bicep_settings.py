"""The Bicep template and local.settings.sample.json set every app setting the code reads, and the
template reaches Service Bus and storage through the managed identity, never through keys.

Everything is read at test time: the settings the code reads (an AST scan of function_app.py, functions/
and shared/), the declared ones (app.settings.all_settings()) and the templates as pycep parses them.
"""

from __future__ import annotations

import re

from tests.infra.app_settings_scan import scan_app
from tests.infra.bicep_tree import accessor_path, is_literal_string, is_reference, lookup, modules
from tests.infra.infra_paths import (
    AZURE_HOST_SETTINGS,
    LOCAL_HOST_SETTINGS,
    REPO,
    TELEMETRY_PLATFORM_SETTINGS,
    bicep_app_settings,
    bicep_resources,
    declared_settings,
    endpoint_queue_settings,
    sample_values,
    templates,
)

# A key or connection string in the template where the identity would do.
KEY_MATERIAL = re.compile(
    r"SharedAccessKey|AccountKey=|listKeys\(|listConnectionStrings\(|listSecrets\(", re.I
)
# Not allowed on Flex Consumption (the runtime comes from functionAppConfig), or key-based host storage.
FORBIDDEN_IN_AZURE = frozenset(
    {
        "FUNCTIONS_WORKER_RUNTIME",
        "FUNCTIONS_EXTENSION_VERSION",
        "WEBSITE_RUN_FROM_PACKAGE",
        "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
        "WEBSITE_CONTENTSHARE",
        "AzureWebJobsStorage",
        "ServiceBusConnection",
    }
)


def _strings(value: object) -> list[str]:
    """Every string (literal, interpolation, reference or function name) anywhere in a parsed template."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [str(key), *_strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def bicep_names() -> set[str]:
    return {entry.name for entry in bicep_app_settings()}


def test_every_setting_the_code_reads_is_declared() -> None:
    declared = declared_settings()
    undeclared = []
    for read in scan_app(REPO):
        if read.kind == "connection":
            # A binding's connection names a setting prefix: a connection string or an identity section.
            if read.name not in declared and f"{read.name}__fullyQualifiedNamespace" not in declared:
                undeclared.append(read)
        elif read.name not in declared and read.name not in TELEMETRY_PLATFORM_SETTINGS:
            undeclared.append(read)
    assert not undeclared, "read but not declared in app.settings.all_settings(): " + ", ".join(
        f"{r.name} ({r.path}:{r.line}, {r.kind})" for r in undeclared
    )


def test_each_app_setting_is_set_once_in_the_template() -> None:
    names = [entry.name for entry in bicep_app_settings()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_declared_setting_except_local_only_ones_is_set_in_the_template() -> None:
    missing = sorted(
        name
        for name, setting in declared_settings().items()
        if not setting.local_only and name not in bicep_names()
    )
    assert missing == [], f"declared settings missing from the Bicep appSettings: {missing}"


def test_local_only_and_secret_settings_are_not_set_in_azure() -> None:
    leaked = sorted(
        name
        for name, setting in declared_settings().items()
        if (setting.local_only or setting.secret) and name in bicep_names()
    )
    assert leaked == []


def test_every_template_setting_is_declared_or_read_by_the_functions_host() -> None:
    # A hosted endpoint's queue setting may be set (it defaults to the endpoint's name): one of an endpoint
    # no module under app/endpoints/ declares any more is stale.
    known = set(declared_settings()) | set(endpoint_queue_settings()) | AZURE_HOST_SETTINGS
    unknown = sorted(bicep_names() - known)
    assert unknown == [], (
        f"set in Bicep but declared nowhere (nor the queue setting of a hosted endpoint): {unknown}"
    )


def test_the_template_sets_no_setting_flex_consumption_rejects_or_that_needs_a_key() -> None:
    assert sorted(bicep_names() & FORBIDDEN_IN_AZURE) == []


def test_no_template_holds_a_key_or_connection_string() -> None:
    for entry in bicep_app_settings():
        assert not any(KEY_MATERIAL.search(s) for s in _strings(entry.value)), f"{entry.name} = {entry.value}"
    for file, tree in templates().items():
        # pycep parses listKeys(...), listSecrets(...) and the like as {"function": {"type": "list_func"}}.
        found = [s for s in _strings(tree) if KEY_MATERIAL.search(s) or s == "list_func"]
        assert found == [], f"{file} uses {found}"


def test_service_bus_is_reached_through_the_identity_with_local_auth_off() -> None:
    assert "ServiceBusConnection__fullyQualifiedNamespace" in bicep_names()
    namespaces = [
        r for r in bicep_resources() if r.type == "Microsoft.ServiceBus/namespaces" and not r.existing
    ]
    assert len(namespaces) == 1
    assert namespaces[0].at("properties", "disableLocalAuth") is True


def test_storage_is_reached_through_the_identity_with_shared_keys_off() -> None:
    assert "AzureWebJobsStorage__accountName" in bicep_names()
    accounts = [
        r for r in bicep_resources() if r.type == "Microsoft.Storage/storageAccounts" and not r.existing
    ]
    assert len(accounts) == 2  # Functions host storage and the archive
    for account in accounts:
        assert account.at("properties", "allowSharedKeyAccess") is False, account.symbol


def test_the_host_accounts_tables_are_reached_through_the_identity_as_functions_names_them() -> None:
    # Identity-based AzureWebJobsStorage (learn.microsoft.com, Azure Functions developer guide, "Connecting to
    # host storage with an identity"): __accountName names the blob and queue services of an account under
    # the default DNS suffix; "if AzureWebJobsStorage will be used for any other service" each service's URI
    # is given (__blobServiceUri, __queueServiceUri, __tableServiceUri). __credential: managedidentity.
    values = {entry.name: entry.value for entry in bicep_app_settings()}
    assert values["AzureWebJobsStorage__accountName"] == "hostStorageAccountName"
    assert values["AzureWebJobsStorage__tableServiceUri"] == (
        "https://${hostStorageAccountName}.table.${environment().suffixes.storage}"
    )
    assert values["AzureWebJobsStorage__credential"] == "managedidentity"


def test_the_function_app_runs_python_3_13_on_flex_consumption_with_a_system_assigned_identity() -> None:
    (plan,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/serverfarms"]
    assert plan.at("sku") == {"name": "FC1", "tier": "FlexConsumption"}
    (app,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/sites"]
    assert app.at("kind") == "functionapp,linux"
    assert app.at("identity", "type") == "SystemAssigned"
    assert accessor_path(app.at("properties", "serverFarmId")) == ["plan", "id"]
    config = app.at("properties", "functionAppConfig")
    assert lookup(config, "runtime") == {"name": "python", "version": "3.13"}
    storage = lookup(config, "deployment", "storage")
    assert storage["type"] == "blobContainer"
    assert lookup(storage, "authentication", "type") == "SystemAssignedIdentity"
    assert is_reference(lookup(config, "scaleAndConcurrency", "maximumInstanceCount"))


def test_the_function_app_serves_https_only_over_tls_1_2_with_http_2_and_without_ftp() -> None:
    (app,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/sites"]
    assert app.at("properties", "httpsOnly") is True
    site = app.at("properties", "siteConfig")
    assert (site["minTlsVersion"], site["http20Enabled"], site["ftpsState"]) == ("1.2", True, "Disabled")


def test_zone_redundancy_is_one_parameter_for_the_plan_and_the_host_storage() -> None:
    main = templates()["main.bicep"]
    assert main["parameters"]["zoneRedundant"]["default"] is False
    calls = modules(main)
    assert accessor_path(calls["functionApp"].params["zoneRedundant"]) == ["zoneRedundant"]
    assert accessor_path(calls["storage"].params["zoneRedundant"]) == ["zoneRedundant"]
    (plan,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/serverfarms"]
    assert accessor_path(plan.at("properties", "zoneRedundant")) == ["zoneRedundant"]
    created = {r.symbol: r for r in bicep_resources() if r.file == "modules/storage.bicep" and not r.existing}
    sku = created["hostAccount"].at("sku", "name")["operator"]
    assert sku["type"] == "conditional"
    assert accessor_path(sku["operands"]["condition"]) == ["zoneRedundant"]
    assert (sku["operands"]["true_value"], sku["operands"]["false_value"]) == ("Standard_ZRS", "Standard_LRS")


def test_the_archive_is_geo_redundant_unless_a_deployment_chooses_otherwise() -> None:
    main = templates()["main.bicep"]
    assert main["parameters"]["archiveStorageSku"]["default"] == "Standard_GRS"
    assert accessor_path(modules(main)["storage"].params["archiveSku"]) == ["archiveStorageSku"]
    storage = templates()["modules/storage.bicep"]
    assert storage["parameters"]["archiveSku"]["default"] == "Standard_GRS"  # what checkov evaluates
    created = {r.symbol: r for r in bicep_resources() if r.file == "modules/storage.bicep" and not r.existing}
    assert accessor_path(created["archiveAccount"].at("sku", "name")) == ["archiveSku"]


def test_the_archive_lives_in_a_container_of_an_account_with_the_hierarchical_namespace() -> None:
    created = {r.symbol: r for r in bicep_resources() if not r.existing and r.file == "modules/storage.bicep"}
    archive = created["archiveContainer"]
    blobs = created[archive.at("parent")]
    account = created[blobs.at("parent")]
    assert accessor_path(archive.at("name")) == ["archiveContainerName"]
    assert account.at("properties", "isHnsEnabled") is True


def test_the_fallback_topic_is_declared_in_the_namespace() -> None:
    topics = [r for r in bicep_resources() if r.type == "Microsoft.ServiceBus/namespaces/topics"]
    # Under the hierarchy prefix (issue 17, point 6): see the test below.
    assert [t.at("name") for t in topics] == ["${armPrefix}${fallbackTopicName}"]


def test_under_a_hierarchy_namespace_the_template_declares_the_prefixed_entities_the_app_listens_on() -> None:
    servicebus = templates()["modules/servicebus.bicep"]
    # ARM reserves '/' in resource names: the <ns>/<name> path is spelled <ns>~<name>.
    prefix = servicebus["variables"]["armPrefix"]["value"]["operator"]
    assert prefix["type"] == "conditional"
    assert prefix["operands"]["condition"] == {
        "function": {"type": "empty", "parameters": {"item_to_test": "hierarchyNamespace"}}
    }
    assert (prefix["operands"]["true_value"], prefix["operands"]["false_value"]) == (
        "",
        "${replace(hierarchyNamespace, '/', '~')}~",
    )
    created = [r for r in bicep_resources() if r.file == "modules/servicebus.bicep" and not r.existing]
    queues = {r.symbol: r for r in created if r.type == "Microsoft.ServiceBus/namespaces/queues"}
    # The endpoints' queues are the app's to provision at start-up (BUSBAR_PROVISION_ON_START, under the
    # prefix: tests/functions/test_bootstrap.py), not the template's: only the lock queue is declared.
    assert list(queues) == ["provisioningLockQueue"]
    lock = queues["provisioningLockQueue"]
    assert lock.at("name") == "${armPrefix}${provisioningLockQueueName}"
    assert lock.at("properties", "requiresSession") is True
    params = modules(templates()["main.bicep"])["serviceBus"].params
    assert accessor_path(params["hierarchyNamespace"]) == ["hierarchyNamespace"]


def test_every_declared_setting_is_in_the_sample_local_settings() -> None:
    values = sample_values()
    missing = sorted(set(declared_settings()) - set(values))
    assert missing == [], f"declared settings missing from local.settings.sample.json: {missing}"


def test_required_and_local_only_settings_have_local_values_in_the_sample() -> None:
    values = sample_values()
    empty = sorted(
        name
        for name, setting in declared_settings().items()
        if (setting.required or setting.local_only) and not values.get(name, "").strip()
    )
    assert empty == []


def test_the_sample_runs_the_functions_host_against_the_local_emulators() -> None:
    values = sample_values()
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    assert "EnableWorkerIndexing" in values["AzureWebJobsFeatureFlags"]
    assert "UseDevelopmentEmulator=true" in values["ServiceBusConnection"]
    known = set(declared_settings()) | set(endpoint_queue_settings()) | LOCAL_HOST_SETTINGS
    unknown = sorted(set(values) - known)
    assert unknown == [], f"sample settings declared nowhere (nor a hosted endpoint's queue): {unknown}"


def test_plain_values_in_the_template_restate_the_code_defaults() -> None:
    """A literal in the template that differs from the code's default is a silent drift: change both."""
    declared = {**endpoint_queue_settings(), **declared_settings()}
    drifted = []
    for entry in bicep_app_settings():
        setting = declared.get(entry.name)
        if (
            setting is not None
            and setting.default is not None
            and is_literal_string(entry.value)
            and entry.value != setting.default
        ):
            drifted.append(f"{entry.name}: template {entry.value!r}, code default {setting.default!r}")
    assert drifted == []


def test_every_binding_expression_has_a_value_locally_and_in_azure() -> None:
    """The Functions host resolves ``%NAME%`` from app settings only (code defaults do not apply): an unset
    one stops the function from being indexed."""
    bound = sorted({read.name for read in scan_app(REPO) if read.kind == "binding"})
    values = sample_values()
    azure = {entry.name: entry.value for entry in bicep_app_settings()}
    assert [n for n in bound if not values.get(n, "").strip()] == [], "unset in local.settings.sample.json"
    assert [n for n in bound if azure.get(n, "") == ""] == [], "unset or empty in the Bicep appSettings"
