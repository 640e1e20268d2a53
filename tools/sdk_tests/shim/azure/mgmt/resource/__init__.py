"""Stand-in for azure-mgmt-resource: the emulator's namespace needs no resource group, so creating one only
names it (the SDK's ServiceBusResourceGroupPreparer reads .name and .id)."""


class _ResourceGroup:
    def __init__(self, name):
        self.name = name
        self.id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/" + name


class _Poller:
    def result(self, timeout=None):
        return None

    def wait(self, timeout=None):
        pass

    def done(self):
        return True


class _ResourceGroups:
    def create_or_update(self, name, parameters, **kwargs):
        return _ResourceGroup(name)

    def begin_delete(self, name, **kwargs):
        return _Poller()


class ResourceManagementClient:
    def __init__(self, *args, **kwargs):
        self.resource_groups = _ResourceGroups()
