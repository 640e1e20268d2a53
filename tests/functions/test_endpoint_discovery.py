"""Which endpoints the app hosts: every endpoint module under ``app/endpoints/`` (app.discovery).

The discovery is exercised on packages of endpoint modules written here (imported for real, from a
temporary directory on ``sys.path``) and on the app's own ``app/endpoints/``; the sample's switch
``BUSBAR_SAMPLE_ENDPOINTS``; an endpoint's queue setting derived from its name.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from app.discovery import (
    ENDPOINT_MODULES,
    SAMPLE_ENDPOINTS,
    EndpointDiscoveryError,
    endpoint_module_names,
    hosted_catalog,
    sample_enabled,
)
from app.settings import require_valid_settings
from shared.handlers import ContractRegistry, Endpoint, HandlerRegistry
from shared.management import SettingsError
from shared.settings_check import InvalidAppSettings

pytestmark = pytest.mark.timeout(30)

HEADER = "from shared.handlers import ContractRegistry, Endpoint, HandlerRegistry\n"


def endpoint_package(root: Path, modules: dict[str, str]) -> tuple[str, Path]:
    """A package of endpoint modules under ``root`` (``name`` -> source; ``pkg/__init__`` for a package),
    with a fresh name, so each test imports its own."""
    package = f"endpoints_{uuid.uuid4().hex[:8]}"
    directory = root / package
    directory.mkdir()
    (directory / "__init__.py").write_text('"""Test endpoint modules."""\n')
    for name, source in modules.items():
        path = directory / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + source)
    return package, directory


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_every_endpoint_at_module_level_or_in_endpoints_of_every_module_is_hosted_once(root: Path) -> None:
    package, directory = endpoint_package(
        root,
        {
            "loyalty": 'LOYALTY = Endpoint("loyalty", ContractRegistry(), HandlerRegistry())\n',
            "listed": "ENDPOINTS = [\n"
            '    Endpoint("audit", ContractRegistry(), HandlerRegistry()),\n'
            '    Endpoint("archive", ContractRegistry(), HandlerRegistry()),\n'
            "]\n",
            "team/__init__": "from .inner import TEAM\n",
            "team/inner": 'TEAM = Endpoint("team", ContractRegistry(), HandlerRegistry(), ordered=False)\n',
            # Imports another module's endpoint: the same object, hosted once.
            "again": "from {package}.loyalty import LOYALTY\n",
            "helpers": "NOT_AN_ENDPOINT = 3\n",
            "_private": 'HIDDEN = Endpoint("hidden", ContractRegistry(), HandlerRegistry())\n',
        },
    )
    again = directory / "again.py"
    again.write_text(again.read_text().replace("{package}", package))

    catalog = hosted_catalog({}, package, directory)

    assert catalog.names() == ["archive", "audit", "loyalty", "team"]
    assert endpoint_module_names({}, package, directory) == [
        f"{package}.{name}" for name in ("again", "helpers", "listed", "loyalty", "team")
    ]


def test_a_module_that_cannot_be_imported_is_an_error_naming_it_with_its_cause(root: Path) -> None:
    package, directory = endpoint_package(
        root,
        {
            "fine": 'FINE = Endpoint("fine", ContractRegistry(), HandlerRegistry())\n',
            "broken": "import no_such_module_anywhere\n",
        },
    )

    with pytest.raises(EndpointDiscoveryError) as raised:
        hosted_catalog({}, package, directory)

    message = str(raised.value)
    assert f"endpoint module {package}.broken ({directory / 'broken'}) cannot be imported" in message
    assert "ModuleNotFoundError: No module named 'no_such_module_anywhere'" in message
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def test_two_endpoints_of_one_name_in_two_modules_are_an_error_naming_both_modules(root: Path) -> None:
    package, directory = endpoint_package(
        root,
        {
            "first": 'A = Endpoint("billing", ContractRegistry(), HandlerRegistry())\n',
            "second": 'B = Endpoint("billing", ContractRegistry(), HandlerRegistry())\n',
        },
    )

    with pytest.raises(EndpointDiscoveryError, match="endpoint 'billing' is declared twice") as raised:
        hosted_catalog({}, package, directory)

    assert f"in {package}.first and in {package}.second" in str(raised.value)


def test_an_endpoints_list_holding_something_else_is_an_error_naming_the_module(root: Path) -> None:
    package, directory = endpoint_package(root, {"odd": 'ENDPOINTS = ["loyalty"]\n'})

    with pytest.raises(EndpointDiscoveryError, match=rf"{package}.odd: ENDPOINTS must be a list or tuple"):
        hosted_catalog({}, package, directory)


def test_the_app_hosts_the_samples_four_endpoints_unless_the_sample_is_switched_off() -> None:
    sample = {"billing", "crm", "sales", "shipping"}
    hosted = set(hosted_catalog({}).names())
    assert sample <= hosted
    for off in ("false", "0", "FALSE", " False "):
        assert sample_enabled({SAMPLE_ENDPOINTS.name: off}) is False
        # Your endpoint modules beside it (none in Busbar's checkout) stay.
        assert set(hosted_catalog({SAMPLE_ENDPOINTS.name: off}).names()) == hosted - sample
    for on in ("true", "1", "TRUE", " True ", ""):
        assert sample_enabled({SAMPLE_ENDPOINTS.name: on}) is True


@pytest.mark.parametrize("value", ["nope", "off", "on", "yes", "no"])
def test_a_sample_switch_that_is_neither_true_nor_false_is_a_settings_error_naming_it(value: str) -> None:
    env = {SAMPLE_ENDPOINTS.name: value}
    problem = f"BUSBAR_SAMPLE_ENDPOINTS must be true or false (or 1 or 0; any case), got {value!r}"

    with pytest.raises(SettingsError) as read:
        hosted_catalog(env)
    assert read.value.problems == [problem]
    with pytest.raises(InvalidAppSettings) as raised:
        require_valid_settings(env)
    assert problem in raised.value.problems


def test_the_endpoint_modules_setting_hosts_the_modules_it_names_only(root: Path) -> None:
    package, directory = endpoint_package(
        root,
        {
            "loyalty": 'LOYALTY = Endpoint("loyalty", ContractRegistry(), HandlerRegistry())\n',
            "audit": 'AUDIT = Endpoint("audit", ContractRegistry(), HandlerRegistry())\n',
            "broken": "raise RuntimeError('never imported unless named')\n",
        },
    )

    chosen = hosted_catalog({ENDPOINT_MODULES.name: " loyalty , audit "}, package, directory)

    assert chosen.names() == ["audit", "loyalty"]
    # In the order of the module's ENDPOINTS (the console lists them so).
    sample = hosted_catalog({ENDPOINT_MODULES.name: "sample"})
    assert [e.name for e in sample] == ["billing", "crm", "shipping", "sales"]


def test_an_endpoint_modules_setting_naming_what_is_not_there_is_a_settings_error_naming_each(
    root: Path,
) -> None:
    package, directory = endpoint_package(
        root, {"loyalty": 'LOYALTY = Endpoint("loyalty", ContractRegistry(), HandlerRegistry())\n'}
    )

    with pytest.raises(SettingsError) as raised:
        hosted_catalog({ENDPOINT_MODULES.name: "loyalty,loyalyt"}, package, directory)
    assert raised.value.problems == [
        f"BUSBAR_ENDPOINT_MODULES names 'loyalyt', which {directory} does not hold (it holds: loyalty)"
    ]
    with pytest.raises(InvalidAppSettings) as refused:
        require_valid_settings({ENDPOINT_MODULES.name: "sample", SAMPLE_ENDPOINTS.name: "false"})
    assert "BUSBAR_ENDPOINT_MODULES names 'sample', which BUSBAR_SAMPLE_ENDPOINTS switches off" in (
        refused.value.problems
    )


def test_an_endpoints_queue_is_its_name_unless_its_derived_setting_names_another() -> None:
    endpoint = Endpoint("order-history", ContractRegistry(), HandlerRegistry())

    assert endpoint.queue_setting.name == "BUSBAR_ORDER_HISTORY_QUEUE"
    assert endpoint.queue({}) == "order-history"
    assert endpoint.queue({"BUSBAR_ORDER_HISTORY_QUEUE": " history-v2 "}) == "history-v2"
    assert endpoint.queue({"BUSBAR_ORDER_HISTORY_QUEUE": " "}) == "order-history"


@pytest.mark.parametrize(
    "name",
    ["orders?v2", "loyalty points", "-loyalty", "loyalty.", "x" * 261, "caf\u00e9"],
)
def test_an_endpoint_whose_name_is_not_a_valid_queue_name_is_an_error_naming_the_module_and_the_rule(
    root: Path, name: str
) -> None:
    package, directory = endpoint_package(
        root, {"odd": f"ODD = Endpoint({name!r}, ContractRegistry(), HandlerRegistry())\n"}
    )

    with pytest.raises(EndpointDiscoveryError) as raised:
        hosted_catalog({}, package, directory)

    [problem, *_] = raised.value.problems
    assert problem.startswith(f"{package}.odd: endpoint {name!r} cannot listen on its queue (its name): ")
    assert f"{name!r}: an endpoint name is its input queue's name: 1-260 characters" in problem


def test_the_queue_checked_is_the_one_the_endpoint_listens_on_its_setting_and_hierarchy_prefix_included(
    root: Path,
) -> None:
    package, directory = endpoint_package(
        root,
        {
            "loyalty": 'LOYALTY = Endpoint("loyalty", ContractRegistry(), HandlerRegistry())\n',
            "legacy": 'LEGACY = Endpoint("-legacy", ContractRegistry(), HandlerRegistry())\n',
        },
    )
    # An invalid name is hosted on the valid queue its setting names.
    renamed = {"BUSBAR__LEGACY_QUEUE": "legacy"}
    assert hosted_catalog(renamed, package, directory).names() == ["-legacy", "loyalty"]

    with pytest.raises(EndpointDiscoveryError) as bad_setting:
        hosted_catalog({**renamed, "BUSBAR_LOYALTY_QUEUE": "loyalty/"}, package, directory)
    where = f"{package}.loyalty: endpoint 'loyalty' cannot listen on its queue (BUSBAR_LOYALTY_QUEUE): "
    assert bad_setting.value.problems == [
        where + "'loyalty/': an endpoint name is its input queue's name: 1-260 characters of letters, "
        "digits, '.', '-', '_' and '/', starting with a letter, digit or '$' and ending with a letter or "
        "digit, without '\\', '?' or '#' (hierarchy prefix included)",
        # The subscription named after the queue (the provisioning API's rule checks both).
        where + "'loyalty/': the endpoint's subscriptions are named after it: at most 50 characters of "
        "letters, digits, '.', '-' and '_', starting and ending with a letter or digit, without '/'",
    ]
    with pytest.raises(EndpointDiscoveryError) as bad_prefix:
        hosted_catalog({**renamed, "BUSBAR_HIERARCHY_NAMESPACE": "team?a"}, package, directory)
    assert [p.split(": ", 2)[:2] for p in bad_prefix.value.problems] == [
        [f"{package}.legacy", "endpoint '-legacy' cannot listen on its queue (BUSBAR__LEGACY_QUEUE)"],
        [f"{package}.loyalty", "endpoint 'loyalty' cannot listen on its queue (its name)"],
    ]
    assert "'team?a/loyalty'" in str(bad_prefix.value)


def test_two_endpoints_whose_names_derive_one_queue_setting_are_an_error_naming_both_and_the_setting(
    root: Path,
) -> None:
    package, directory = endpoint_package(
        root,
        {
            "first": 'A = Endpoint("order-history", ContractRegistry(), HandlerRegistry())\n',
            "second": 'B = Endpoint("order.history", ContractRegistry(), HandlerRegistry())\n',
        },
    )

    with pytest.raises(EndpointDiscoveryError) as raised:
        hosted_catalog({}, package, directory)

    assert raised.value.problems == [
        f"endpoints 'order-history' ({package}.first) and 'order.history' ({package}.second) would both take "
        "their queue from BUSBAR_ORDER_HISTORY_QUEUE: rename one"
    ]


def test_two_endpoints_on_one_queue_in_any_case_are_an_error_naming_both_and_the_queue(root: Path) -> None:
    package, directory = endpoint_package(
        root,
        {
            "audit": 'AUDIT = Endpoint("audit", ContractRegistry(), HandlerRegistry())\n',
            "archive": 'ARCHIVE = Endpoint("archive", ContractRegistry(), HandlerRegistry())\n',
        },
    )

    with pytest.raises(EndpointDiscoveryError) as raised:
        hosted_catalog({"BUSBAR_ARCHIVE_QUEUE": "Audit"}, package, directory)

    assert raised.value.problems == [
        f"endpoints 'archive' ({package}.archive) and 'audit' ({package}.audit) would both listen on queue "
        "'audit' (Service Bus names ignore case): give one another queue (BUSBAR_AUDIT_QUEUE)"
    ]
