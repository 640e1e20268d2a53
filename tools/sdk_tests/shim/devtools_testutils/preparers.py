"""AzureMgmtPreparer as azure-sdk-tools' scenario_tests run it live.

Each preparer creates its resource (through the subclass's own create_resource, here over the
emulator's ARM endpoint), passes what it returns to the test as keyword arguments, and removes it
afterwards; cached preparers (set_cache) create once per key per session and never remove."""

import asyncio
import functools
import inspect
import threading
import uuid

_cache_lock = threading.Lock()
_resource_cache = {}


def _trim_kwargs(fn, kwargs):
    sig = inspect.signature(fn)
    if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        for key in [k for k in kwargs if k not in sig.parameters]:
            del kwargs[key]


def run_test_function(fn, test_class_instance, kwargs):
    result = fn(test_class_instance, **kwargs)
    if inspect.iscoroutine(result):
        asyncio.run(result)


class AzureMgmtPreparer:
    """The live half of devtools_testutils.AzureMgmtPreparer (no recordings, no playback)."""

    def __init__(
        self,
        name_prefix="",
        random_name_length=24,
        disable_recording=True,
        playback_fake_resource=None,
        client_kwargs=None,
        random_name_enabled=False,
        **_ignored,
    ):
        self.name_prefix = name_prefix
        self.name_len = random_name_length
        self.random_name_enabled = random_name_enabled
        self.client_kwargs = client_kwargs or {}
        self.resource = playback_fake_resource
        self.resource_moniker = None
        self.resource_random_name = None
        self.test_class_instance = None
        self.client = None
        self._use_cache = False
        self._cache_key = (type(self).__name__,)

    is_live = True

    def set_cache(self, enabled, *args):
        self._use_cache = enabled
        self._cache_key = (type(self).__name__, *[repr(a) for a in args])

    @property
    def random_name(self):
        if not self.resource_random_name:
            # Entity names: lowercase letters and digits, as the SDK's create_random_name makes them.
            self.resource_random_name = (self.name_prefix + uuid.uuid4().hex)[: self.name_len]
        return self.resource_random_name

    @property
    def moniker(self):
        if not self.resource_moniker:
            self.resource_moniker = self.name_prefix + "000001"
        return self.resource_moniker

    def create_mgmt_client(self, client_class, **kwargs):
        from devtools_testutils import emulator_arm

        return emulator_arm.create_mgmt_client(client_class, **kwargs)

    def create_resource(self, name, **kwargs):
        return {}

    def remove_resource(self, name, **kwargs):
        pass

    def _prepare(self, test_class_instance, kwargs):
        self.test_class_instance = test_class_instance
        key = (self._cache_key, kwargs.get("__aggregate_cache_key"))
        if self._use_cache:
            with _cache_lock:
                if key in _resource_cache:
                    name, update = _resource_cache[key]
                    return name, update, key
        self.resource_random_name = None
        name = self.random_name
        update = self.create_resource(name, **kwargs)
        if self._use_cache:
            with _cache_lock:
                _resource_cache[key] = (name, update)
        return name, update, key

    def __call__(self, fn):
        def _preparer_wrapper(test_class_instance, **kwargs):
            name, update, key = self._prepare(test_class_instance, kwargs)
            kwargs.update(update)
            kwargs["__aggregate_cache_key"] = key
            call_kwargs = dict(kwargs)
            _trim_kwargs(fn, call_kwargs)
            try:
                run_test_function(fn, test_class_instance, call_kwargs)
            finally:
                if not self._use_cache:
                    self.remove_resource(name, **kwargs)

        functools.update_wrapper(_preparer_wrapper, fn)
        return _preparer_wrapper
