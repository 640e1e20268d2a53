"""Minimal stand-in for azure-sdk-tools' devtools_testutils: runs the SDK's live tests against the
Busbar emulator (no test proxy, no recording). Settings come from SERVICEBUS_* environment variables.

Loaded as a pytest plugin (``-p devtools_testutils``) for its ``test_proxy`` fixture."""

import asyncio
import functools
import inspect
import os

import pytest
from azure_devtools.scenario_tests.exceptions import AzureTestError, ReservedResourceNameError

from devtools_testutils.preparers import AzureMgmtPreparer
from devtools_testutils.resource_testcase import RESOURCE_GROUP_PARAM

__all__ = [
    "AzureMgmtPreparer",
    "AzureMgmtRecordedTestCase",
    "AzureRecordedTestCase",
    "AzureTestCase",
    "AzureTestError",
    "CachedResourceGroupPreparer",
    "FakeResource",
    "PowerShellPreparer",
    "RandomNameResourceGroupPreparer",
    "ReservedResourceNameError",
    "ResourceGroupPreparer",
    "get_credential",
    "get_region_override",
    "is_live",
    "recorded_by_proxy",
]


class FakeResource:
    def __init__(self, name=None, id=None):
        self.name = name
        self.id = id


def get_region_override(default):
    return default


def is_live():
    return True


def add_general_regex_sanitizer(*a, **k):
    pass


def set_custom_default_matcher(*a, **k):
    pass


def set_bodiless_matcher(*a, **k):
    pass


class AzureRecordedTestCase:
    is_live = True

    @property
    def is_playback(self):
        return False

    def get_settings_value(self, key):
        return os.environ.get("SERVICEBUS_" + key.upper()) or os.environ.get(key.upper())


class AzureTestCase(AzureRecordedTestCase):
    @staticmethod
    def await_prepared_test(fn):
        """Runs a coroutine test method to its end (the test class's own loop in azure-sdk-tools)."""

        @functools.wraps(fn)
        def run(self, **kwargs):
            return asyncio.run(fn(self, **kwargs))

        return run


AzureMgmtRecordedTestCase = AzureTestCase


def _call(fn, self, kwargs):
    sig = inspect.signature(fn)
    if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
    result = fn(self, **kwargs)
    if inspect.iscoroutine(result):
        return asyncio.run(result)
    return result


def _wrap(fn, provide):
    # No __wrapped__: pytest must see (self, **kwargs), not the test's own settings parameters (which
    # have no defaults in the mgmt tests and would be taken for fixtures).
    def wrapper(self, **kwargs):
        kwargs = {**provide(), **kwargs}
        return _call(fn, self, kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__module__ = fn.__module__
    if hasattr(fn, "pytestmark"):
        wrapper.pytestmark = fn.pytestmark
    return wrapper


def recorded_by_proxy(fn):
    return fn


class PowerShellPreparer:
    def __init__(self, name_prefix, **defaults):
        self.defaults = defaults

    def __call__(self, fn):
        def provide():
            return {k: os.environ.get(k.upper(), v) for k, v in self.defaults.items()}

        return _wrap(fn, provide)


class ResourceGroupPreparer(AzureMgmtPreparer):
    """The emulator needs no resource group: the test gets one by name (AZURE_RESOURCEGROUP_NAME)."""

    def __init__(
        self,
        name_prefix="",
        random_name_length=24,
        parameter_name=RESOURCE_GROUP_PARAM,
        parameter_name_for_location="location",
        location="westus",
        **kwargs,
    ):
        super().__init__(name_prefix, random_name_length, **kwargs)
        self.parameter_name = parameter_name
        self.parameter_name_for_location = parameter_name_for_location
        self.location = location
        self.set_cache(kwargs.get("use_cache", False), parameter_name)

    def create_resource(self, name, **kwargs):
        group = os.environ.get("AZURE_RESOURCEGROUP_NAME", name)
        return {
            self.parameter_name: FakeResource(name=group, id="/subscriptions/0/resourceGroups/" + group),
            self.parameter_name_for_location: self.location,
        }


class CachedResourceGroupPreparer(ResourceGroupPreparer):
    pass


class RandomNameResourceGroupPreparer(ResourceGroupPreparer):
    pass


def get_credential(is_async=False, **kwargs):
    policy = os.environ["SERVICEBUS_SAS_POLICY"]
    key = os.environ["SERVICEBUS_SAS_KEY"]
    if is_async:
        from azure.servicebus.aio._base_handler_async import ServiceBusSharedKeyCredential
    else:
        from azure.servicebus._base_handler import ServiceBusSharedKeyCredential
    return ServiceBusSharedKeyCredential(policy, key)


@pytest.fixture(scope="session")
def test_proxy():
    yield
