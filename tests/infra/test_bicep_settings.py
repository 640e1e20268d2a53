"""The Bicep template and local.settings.sample.json set every app setting the code reads, and the
template reaches Service Bus and storage through the managed identity, never through keys.

Everything is read at test time: the settings the code reads (an AST scan of function_app.py, functions/
and shared/), the declared ones (app.settings.all_settings()) and the template text.
"""

from __future__ import annotations

import re

from tests.infra.app_settings_scan import scan_app
from tests.infra.bicep_text import nested_block
from tests.infra.infra_paths import (
    AZURE_HOST_SETTINGS,
    LOCAL_HOST_SETTINGS,
    REPO,
    bicep_app_settings,
    bicep_resources,
    declared_settings,
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


def _without_comments(text: str) -> str:
    return "\n".join(re.sub(r"//(?=(?:[^']*'[^']*')*[^']*$).*", "", line) for line in text.splitlines())


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
        elif read.name not in declared:
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
    unknown = sorted(bicep_names() - set(declared_settings()) - AZURE_HOST_SETTINGS)
    assert unknown == [], f"set in Bicep but declared nowhere: {unknown}"


def test_the_template_sets_no_setting_flex_consumption_rejects_or_that_needs_a_key() -> None:
    assert sorted(bicep_names() & FORBIDDEN_IN_AZURE) == []


def test_no_template_holds_a_key_or_connection_string() -> None:
    for entry in bicep_app_settings():
        assert not KEY_MATERIAL.search(entry.value), f"{entry.name} = {entry.value}"
    for file, text in templates().items():
        match = KEY_MATERIAL.search(_without_comments(text))
        assert match is None, f"{file} uses {match.group(0) if match else ''}"


def test_service_bus_is_reached_through_the_identity_with_local_auth_off() -> None:
    assert "ServiceBusConnection__fullyQualifiedNamespace" in bicep_names()
    namespaces = [
        r for r in bicep_resources() if r.type == "Microsoft.ServiceBus/namespaces" and not r.existing
    ]
    assert len(namespaces) == 1
    assert nested_block(namespaces[0].body, "properties").count("disableLocalAuth: true") == 1


def test_storage_is_reached_through_the_identity_with_shared_keys_off() -> None:
    assert "AzureWebJobsStorage__accountName" in bicep_names()
    accounts = [
        r for r in bicep_resources() if r.type == "Microsoft.Storage/storageAccounts" and not r.existing
    ]
    assert len(accounts) == 2  # Functions host storage and the archive
    for account in accounts:
        assert "allowSharedKeyAccess: false" in nested_block(account.body, "properties"), account.symbol


def test_the_function_app_runs_python_3_11_on_flex_consumption_with_a_system_assigned_identity() -> None:
    (plan,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/serverfarms"]
    sku = nested_block(plan.body, "sku")
    assert "name: 'FC1'" in sku and "tier: 'FlexConsumption'" in sku
    (app,) = [r for r in bicep_resources() if r.type == "Microsoft.Web/sites"]
    assert app.properties["kind"] == "'functionapp,linux'"
    assert "type: 'SystemAssigned'" in nested_block(app.body, "identity")
    config = nested_block(app.body, "functionAppConfig")
    runtime = nested_block(config, "runtime")
    assert "name: 'python'" in runtime and "version: '3.11'" in runtime
    storage = nested_block(nested_block(config, "deployment"), "storage")
    assert "type: 'blobContainer'" in storage
    assert "type: 'SystemAssignedIdentity'" in nested_block(storage, "authentication")
    assert "maximumInstanceCount" in nested_block(config, "scaleAndConcurrency")


def test_the_archive_lives_in_a_container_of_an_account_with_the_hierarchical_namespace() -> None:
    created = {r.symbol: r for r in bicep_resources() if not r.existing and r.file == "modules/storage.bicep"}
    archive = created["archiveContainer"]
    blobs = created[archive.properties["parent"]]
    account = created[blobs.properties["parent"]]
    assert archive.properties["name"] == "archiveContainerName"
    assert "isHnsEnabled: true" in nested_block(account.body, "properties")


def test_the_fallback_topic_is_declared_in_the_namespace() -> None:
    topics = [r for r in bicep_resources() if r.type == "Microsoft.ServiceBus/namespaces/topics"]
    # Under the hierarchy prefix (issue 17, point 6): see the test below.
    assert [t.properties["name"] for t in topics] == ["'${armPrefix}${fallbackTopicName}'"]


def test_under_a_hierarchy_namespace_the_template_declares_the_prefixed_entities_the_app_listens_on() -> None:
    servicebus = templates()["modules/servicebus.bicep"]
    # ARM reserves '/' in resource names: the <ns>/<name> path is spelled <ns>~<name>.
    assert "var armPrefix = empty(hierarchyNamespace) ? '' : '${replace(hierarchyNamespace, '/', '~')}~'" in (
        servicebus
    )
    created = [r for r in bicep_resources() if r.file == "modules/servicebus.bicep" and not r.existing]
    queues = {r.symbol: r for r in created if r.type == "Microsoft.ServiceBus/namespaces/queues"}
    # The endpoint queues are a `for` resource, which the text reader does not parse: read the line.
    assert "name: '${armPrefix}${queueName}'" in servicebus
    lock = queues["provisioningLockQueue"]
    assert lock.properties["name"] == "'${armPrefix}${provisioningLockQueueName}'"
    assert "requiresSession: true" in nested_block(lock.body, "properties")
    main = templates()["main.bicep"]
    service_bus_module = main[main.index("module serviceBus") :]
    assert "hierarchyNamespace: hierarchyNamespace" in nested_block(service_bus_module, "params")


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
    unknown = sorted(set(values) - set(declared_settings()) - LOCAL_HOST_SETTINGS)
    assert unknown == [], f"sample settings declared nowhere: {unknown}"


def test_plain_values_in_the_template_restate_the_code_defaults() -> None:
    """A literal in the template that differs from the code's default is a silent drift: change both."""
    declared = declared_settings()
    drifted = []
    for entry in bicep_app_settings():
        setting = declared.get(entry.name)
        literal = re.fullmatch(r"'([^'$]*)'", entry.value)
        if (
            setting is not None
            and setting.default is not None
            and literal
            and literal.group(1) != setting.default
        ):
            drifted.append(f"{entry.name}: template {literal.group(1)!r}, code default {setting.default!r}")
    assert drifted == []


def test_every_binding_expression_has_a_value_locally_and_in_azure() -> None:
    """The Functions host resolves ``%NAME%`` from app settings only (code defaults do not apply): an unset
    one stops the function from being indexed."""
    bound = sorted({read.name for read in scan_app(REPO) if read.kind == "binding"})
    values = sample_values()
    azure = {entry.name: entry.value for entry in bicep_app_settings()}
    assert [n for n in bound if not values.get(n, "").strip()] == [], "unset in local.settings.sample.json"
    assert [n for n in bound if azure.get(n, "''") == "''"] == [], "unset or empty in the Bicep appSettings"
