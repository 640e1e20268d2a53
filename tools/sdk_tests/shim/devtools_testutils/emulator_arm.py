"""The SDK preparers' management client, pointed at the emulator's ARM endpoint
(SERVICEBUS_RESOURCE_MANAGER_URL, bearer token SERVICEBUS_MANAGEMENT_TOKEN).

The emulator is one namespace whose ARM surface has no namespace writes, so the namespace preparer's
create / list_keys / delete are answered here: "creating" a namespace hands back the emulator's
namespace (read over ARM), and its keys are the emulator's data-plane connection string. Queues,
topics and subscriptions are created over ARM as the SDK's preparers ask."""

import os
import time

from azure.core.credentials import AccessToken


class StaticTokenCredential:
    def __init__(self, token):
        self.token = token

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self.token, int(time.time()) + 3600)


class _Done:
    def __init__(self, result):
        self._result = result

    def result(self, timeout=None):
        return self._result

    def wait(self, timeout=None):
        pass

    def done(self):
        return True


class _Keys:
    def __init__(self, connection_string, key_name, key):
        self.primary_connection_string = connection_string
        self.secondary_connection_string = connection_string
        self.key_name = key_name
        self.primary_key = key
        self.secondary_key = key


class EmulatorNamespaces:
    def __init__(self, operations):
        self._operations = operations

    def __getattr__(self, name):
        return getattr(self._operations, name)

    def _the_namespace(self, group):
        return next(iter(self._operations.list_by_resource_group(group)))

    def begin_create_or_update(self, resource_group_name, namespace_name, parameters, **kwargs):
        return _Done(self._the_namespace(resource_group_name))

    def create_or_update(self, resource_group_name, namespace_name, parameters, **kwargs):
        return self._the_namespace(resource_group_name)

    def list_keys(self, resource_group_name, namespace_name, authorization_rule_name, **kwargs):
        return _Keys(
            os.environ["SERVICEBUS_DATA_CONNECTION_STR"],
            os.environ["SERVICEBUS_SAS_POLICY"],
            os.environ["SERVICEBUS_SAS_KEY"],
        )

    def delete(self, resource_group_name, namespace_name, **kwargs):
        pass

    def begin_delete(self, resource_group_name, namespace_name, **kwargs):
        return _Done(None)


def create_mgmt_client(client_class, base_url=None, credential_scopes=None, **kwargs):
    if client_class.__name__ != "ServiceBusManagementClient":
        return client_class()
    client = client_class(
        credential=StaticTokenCredential(os.environ["SERVICEBUS_MANAGEMENT_TOKEN"]),
        subscription_id=os.environ.get("AZURE_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000000"),
        base_url=os.environ["SERVICEBUS_RESOURCE_MANAGER_URL"],
        **kwargs,
    )
    client.namespaces = EmulatorNamespaces(client.namespaces)
    return client
