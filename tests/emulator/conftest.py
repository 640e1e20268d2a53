"""The ``backend`` fixture (see ``backends.py``) and the collection rules of its ``--backend`` option.

- Every test that uses ``backend`` runs against ``--backend`` (default ``in-process``); one marked
  ``also_over_arm`` also runs over ARM by default, to keep the ARM backend proven without doubling the
  suite's time.
- ``--backend=azure`` marks those tests ``azure``; tests marked ``azure`` are deselected unless
  ``--backend=azure`` is given, and under it every test that does not use ``backend``, or is marked
  ``emulator_only``, is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.server import EmulatorThread
from emulator.testing import EmulatorHandle
from tests.emulator.backends import (
    ARM,
    AZURE,
    IN_PROCESS,
    ArmBackend,
    AzureSettings,
    Backend,
    InProcessBackend,
    azure_arm_backend,
    emulator_arm_backend,
)


def _selected(config: pytest.Config) -> str:
    return str(config.getoption("backend"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    if _selected(metafunc.config) == IN_PROCESS and metafunc.definition.get_closest_marker("also_over_arm"):
        metafunc.parametrize("backend", [IN_PROCESS, ARM], indirect=True)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it must see the azure marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    azure = _selected(config) == AZURE
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        uses_backend = "backend" in getattr(item, "fixturenames", ())
        if azure and uses_backend:
            item.add_marker(pytest.mark.azure)
        if item.get_closest_marker("azure") and not azure:
            deselected.append(item)
            continue
        if azure and item.get_closest_marker("emulator_only"):
            item.add_marker(pytest.mark.skip(reason="emulator_only: reads the emulator's internals"))
        elif azure and not uses_backend:
            item.add_marker(pytest.mark.skip(reason="does not use the backend fixture (tests Busbar itself)"))
        kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(scope="session")
def _emulator_arm_backend(_shared_emulator: EmulatorThread) -> Iterator[ArmBackend]:
    backend = emulator_arm_backend(EmulatorHandle(_shared_emulator))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def _azure_backend() -> Iterator[ArmBackend]:
    try:
        settings = AzureSettings.from_environ()
    except LookupError as exc:
        pytest.skip(str(exc))
    backend = azure_arm_backend(settings)
    yield backend
    backend.close()


@pytest.fixture
def backend(request: pytest.FixtureRequest, _shared_emulator: EmulatorThread) -> Iterator[Backend]:
    """Where this test creates its entities and which namespace it talks to (``--backend``)."""
    kind = str(getattr(request, "param", _selected(request.config)))
    if kind == IN_PROCESS:
        yield InProcessBackend(EmulatorHandle(_shared_emulator))
    elif kind == ARM:
        yield request.getfixturevalue("_emulator_arm_backend")
    else:
        azure: ArmBackend = request.getfixturevalue("_azure_backend")
        try:
            yield azure
        finally:
            azure.delete_created()
