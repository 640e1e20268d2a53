"""Which endpoints the app hosts: every endpoint module under ``app/endpoints/`` (:mod:`app.endpoints`).

:func:`hosted_catalog` imports each module or package directly under ``app/endpoints/`` (in name order; names
starting with ``_`` are left out) and hosts every :class:`~shared.handlers.Endpoint` it defines at module
level or lists in a module-level ``ENDPOINTS``. The sample package ``app/endpoints/sample/`` is imported only
while ``BUSBAR_SAMPLE_ENDPOINTS`` is on (the default): switched off, the app serves only your endpoints, and
with none at all it still starts (the publishing API of published-only contracts, the console and the
runbooks work). ``BUSBAR_ENDPOINT_MODULES`` hosts some of the modules only (one Function App per group of
endpoints, from one code base; the app's own tests host the sample alone, whatever modules you add).

A module that cannot be imported, an ``ENDPOINTS`` that holds something else than endpoints, two endpoints
of one name, an endpoint whose queue is not a valid Service Bus queue name and two endpoints that share a
queue setting or a queue are :class:`EndpointDiscoveryError`\\ s naming the module(s): the app does not
start on a half-read set of endpoints (its functions would not be indexed, and the host logs the message).

The queue checked is the one the endpoint listens on (``BUSBAR_<NAME>_QUEUE``, default its name, under the
hierarchy prefix), by the rule the provisioning API applies to every endpoint name
(:func:`shared.api.provisioning.admission.name_problems`: NServiceBus's queue-name regex, and the
subscription named after the queue); Service Bus compares entity names case-insensitively, so two queues
that differ only in case are one.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from shared.api.provisioning.admission import name_problems
from shared.app_settings import AppSetting, read, read_switch
from shared.handlers.endpoints import Endpoint, EndpointCatalog
from shared.management import SettingsError
from shared.topology import HierarchyNamespace, TopologyOptions, load_topology_options

ENDPOINTS_PACKAGE = "app.endpoints"
ENDPOINTS_DIRECTORY = Path(__file__).resolve().parent / "endpoints"
SAMPLE_MODULE = "sample"

SAMPLE_ENDPOINTS = AppSetting(
    "BUSBAR_SAMPLE_ENDPOINTS",
    "Host the sample endpoints of app/endpoints/sample/ (billing, crm, shipping, sales): 'true' or 'false' "
    "('1'/'0'). Off: the app serves only the endpoints of your own modules under app/endpoints/.",
    default="true",
)

ENDPOINT_MODULES = AppSetting(
    "BUSBAR_ENDPOINT_MODULES",
    "Which endpoint modules under app/endpoints/ the app hosts: their names, comma-separated (e.g. "
    "'loyalty,sample'). Empty: every one. A name app/endpoints/ does not hold stops the start-up.",
)

SETTINGS: tuple[AppSetting, ...] = (SAMPLE_ENDPOINTS, ENDPOINT_MODULES)


class EndpointDiscoveryError(ValueError):
    """An endpoint module cannot be hosted: it fails to import, or declares what cannot be hosted;
    ``problems`` lists each (the message joins them with ``; ``)."""

    def __init__(self, *problems: str) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(problems))


def sample_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``BUSBAR_SAMPLE_ENDPOINTS`` hosts the sample; :class:`SettingsError` for another value than
    true/false/1/0 (:func:`shared.app_settings.read_switch`: a typo must not host or drop endpoints
    silently)."""
    return read_switch(SAMPLE_ENDPOINTS, env, SettingsError)


def endpoint_module_names(
    env: Mapping[str, str] | None = None,
    package: str = ENDPOINTS_PACKAGE,
    directory: Path = ENDPOINTS_DIRECTORY,
) -> list[str]:
    """The modules hosted under ``env``: each module or package directly under ``directory`` (the
    package ``package``: ``app/endpoints/``), by dotted name, in name order; the sample's only while it is
    switched on."""
    include_sample = sample_enabled(env)
    present = sorted(m.name for m in pkgutil.iter_modules([str(directory)]) if not m.name.startswith("_"))
    chosen = selected_modules(env)
    if chosen is not None:
        problems = [
            f"{ENDPOINT_MODULES.name} names {name!r}, which {directory} does not hold (it holds: "
            f"{', '.join(present) or 'nothing'})"
            for name in sorted(chosen - set(present))
        ]
        if SAMPLE_MODULE in chosen and not include_sample:
            problems.append(
                f"{ENDPOINT_MODULES.name} names {SAMPLE_MODULE!r}, which {SAMPLE_ENDPOINTS.name} switches off"
            )
        if problems:
            raise SettingsError(*problems)
    return [
        f"{package}.{name}"
        for name in present
        if (chosen is None or name in chosen) and (include_sample or name != SAMPLE_MODULE)
    ]


def selected_modules(env: Mapping[str, str] | None = None) -> frozenset[str] | None:
    """The module names ``BUSBAR_ENDPOINT_MODULES`` lists; ``None`` when it is empty (every module)."""
    raw = read(ENDPOINT_MODULES, env)
    names = frozenset(name.strip() for name in (raw or "").split(",") if name.strip())
    return names or None


def module_endpoints(module: ModuleType) -> list[Endpoint]:
    """The endpoints ``module`` declares: those of its ``ENDPOINTS``, in that order, then the others bound
    to its module-level names (each once)."""
    found: list[Endpoint] = []
    listed = getattr(module, "ENDPOINTS", ())
    if not isinstance(listed, (list, tuple)) or not all(isinstance(e, Endpoint) for e in listed):
        raise EndpointDiscoveryError(
            f"{module.__name__}: ENDPOINTS must be a list or tuple of Endpoint, got {listed!r}"
        )
    for candidate in [*listed, *vars(module).values()]:
        if isinstance(candidate, Endpoint) and not any(candidate is e for e in found):
            found.append(candidate)
    return found


def _import(name: str, directory: Path) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as error:  # any failure of a user's module: name it, keep the cause chained
        where = directory / name.rpartition(".")[2]
        raise EndpointDiscoveryError(
            f"endpoint module {name} ({where}) cannot be imported: {type(error).__name__}: {error}"
        ) from error


def hosted_catalog(
    env: Mapping[str, str] | None = None,
    package: str = ENDPOINTS_PACKAGE,
    directory: Path = ENDPOINTS_DIRECTORY,
) -> EndpointCatalog:
    """Every endpoint the app hosts under ``env`` (default: the process environment): see the module.
    ``package`` and ``directory`` name another package of endpoint modules (the tests')."""
    owners: dict[str, tuple[Endpoint, str]] = {}
    for name in endpoint_module_names(env, package, directory):
        for endpoint in module_endpoints(_import(name, directory)):
            known = owners.get(endpoint.name)
            if known is not None and known[0] is not endpoint:
                raise EndpointDiscoveryError(
                    f"endpoint {endpoint.name!r} is declared twice: in {known[1]} and in {name} (an endpoint "
                    "name is its queue's and its trigger's: rename one)"
                )
            owners.setdefault(endpoint.name, (endpoint, name))
    problems = queue_problems(list(owners.values()), os.environ if env is None else env)
    if problems:
        raise EndpointDiscoveryError(*problems)
    return EndpointCatalog(*(endpoint for endpoint, _ in owners.values()))


def queue_problems(hosted: list[tuple[Endpoint, str]], env: Mapping[str, str]) -> list[str]:
    """What stops ``hosted`` (each endpoint with its module's name) from listening under ``env``: a queue
    that is not a valid queue name, a queue setting two endpoints derive, a queue two endpoints share."""
    options = _options(env)
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    problems: list[str] = []
    by_setting: dict[str, tuple[Endpoint, str]] = {}
    by_queue: dict[str, tuple[Endpoint, str]] = {}
    for endpoint, module in hosted:
        setting = endpoint.queue_setting.name
        queue = endpoint.queue(env)
        source = "its name" if queue == endpoint.name else setting
        for problem in name_problems(queue, options):
            problems.append(
                f"{module}: endpoint {endpoint.name!r} cannot listen on its queue ({source}): {problem}"
            )
        other = by_setting.setdefault(setting, (endpoint, module))
        if other[0] is not endpoint:
            problems.append(
                f"endpoints {other[0].name!r} ({other[1]}) and {endpoint.name!r} ({module}) would both take "
                f"their queue from {setting}: rename one"
            )
            continue
        other = by_queue.setdefault(hierarchy.apply(queue).lower(), (endpoint, module))
        if other[0] is not endpoint:
            problems.append(
                f"endpoints {other[0].name!r} ({other[1]}) and {endpoint.name!r} ({module}) would both "
                f"listen on queue {hierarchy.apply(queue)!r} (Service Bus names ignore case): give one "
                f"another queue ({setting})"
            )
    return problems


def _options(env: Mapping[str, str]) -> TopologyOptions:
    """The topology options for the queue names' prefix. Options that do not load are reported by their own
    reader (at start-up, with every other setting): the names are checked without a prefix meanwhile."""
    try:
        return load_topology_options(env)
    except ValueError:
        return TopologyOptions()
