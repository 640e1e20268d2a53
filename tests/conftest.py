"""Fixtures that start real local servers on port 0.

``emulator`` is one in-memory emulator shared by the whole session (fast); every test creates fresh
entities through it. ``make_emulator`` starts a private one (own data directory, own config) for tests
that restart, reconfigure or break the broker.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from emulator.broker.properties import EmulatorConfig
from emulator.server import EmulatorThread
from emulator.testing import EmulatorHandle, start_emulator

__all__ = ["EmulatorHandle"]  # tests used to import it from here


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("in-process", "arm", "azure"),
        default="in-process",
        help="where the SDK-level emulator tests create their entities (tests/emulator/backends.py)",
    )


@pytest.fixture(scope="session")
def _shared_emulator() -> Iterator[EmulatorThread]:
    handle = start_emulator()
    yield handle.thread
    handle.stop()


@pytest.fixture
def emulator(_shared_emulator: EmulatorThread) -> EmulatorHandle:
    """The session's shared in-memory emulator."""
    return EmulatorHandle(_shared_emulator)


@pytest.fixture
def make_emulator() -> Iterator[Callable[..., EmulatorHandle]]:
    """Start private emulators: ``make_emulator(config=..., data_dir=..., **options)`` (see
    :func:`emulator.testing.start_emulator`); all are stopped after the test."""
    started: list[EmulatorHandle] = []

    def factory(config: EmulatorConfig | None = None, **options: Any) -> EmulatorHandle:
        handle = start_emulator(config, **options)
        started.append(handle)
        return handle

    yield factory
    for handle in started:
        handle.stop()


# PySpark's DataFrame.collect() leaves closing its local result socket to the garbage collector (see
# pyspark.util._load_from_socket), so with warnings as errors every collect() would fail on the
# ResourceWarning. Ignored for the tests that use Spark, and only there (the socket is freed inside the
# collect() that opened it).
SPARK_TEST_TIMEOUT_SECONDS = 480
SPARK_TESTS = "tests/spark/"  # every test that starts Spark lives here (checked at collection)
# The guides' walkthroughs (tests/docs/test_guides.py) all need the default ports: one worker runs them in
# turn (a machine-wide lock serializes them anyway; this keeps a second worker from waiting on it).
GUIDE_WALKTHROUGHS = "tests/docs/test_guides.py::test_the_guides_local_commands_run_verbatim"
# The SDK samples' make run listens on 5671, so it takes the same lock for its module's life; in one worker
# its tests share one make run, instead of one per worker that runs any of them, each queued for the lock.
SDK_SAMPLES = "tests/devhost/test_make_run_samples.py"
_PYSPARK_RESULT_SOCKET = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")


def _uses_spark(item: pytest.Item) -> bool:
    uses = "spark" in getattr(item, "fixturenames", ())
    if uses and not item.nodeid.startswith(SPARK_TESTS):
        raise pytest.UsageError(f"{item.nodeid} uses Spark: it belongs under {SPARK_TESTS}")
    return uses


class _SparkTestsTogether(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's load scheduling, except that every test under ``tests/spark/`` goes to one worker (and the
    guides' walkthroughs to one worker, and the SDK samples' tests to one worker).

    One JVM on this 2-core machine instead of one per worker: four of them starved each other past their
    timeouts. (``--dist loadgroup`` would do it by marker, but with pytest 9 it no longer tags the node ids it
    schedules by, so the group is silently ignored.)"""

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(GUIDE_WALKTHROUGHS):
            return GUIDE_WALKTHROUGHS
        if nodeid.startswith(SDK_SAMPLES):
            return SDK_SAMPLES
        return SPARK_TESTS if nodeid.startswith(SPARK_TESTS) else nodeid


@pytest.hookimpl(optionalhook=True)  # only known when xdist is loaded (not under -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Plain ``-n N`` (``--dist load``, the Makefile's) runs the Spark tests in one worker."""
    if config.getvalue("dist") != "load":
        return None
    return _SparkTestsTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Spark tests first: their scope is then the first unit xdist hands out (see the scheduler below), so
    # one worker starts them at once instead of leaving a serial Spark tail after everything else.
    items.sort(key=lambda item: not item.nodeid.startswith(SPARK_TESTS))
    for item in items:
        if _uses_spark(item):
            item.add_marker(_PYSPARK_RESULT_SOCKET)
            item.add_marker(pytest.mark.usefixtures("_collect_spark_garbage"))
            # A Spark test that takes 30 s alone took over 120 s beside three other workers and their JVMs
            # on this 2-core machine; past the timeout the JVM is left broken for every later Spark test.
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(SPARK_TEST_TIMEOUT_SECONDS))


@pytest.fixture
def _collect_spark_garbage() -> Iterator[None]:
    """Collect after each Spark test, under its ignore: a result socket caught in a reference cycle would
    otherwise be freed by a later garbage collection, in whatever test then runs, and fail that test."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session (``local[2]``) per test process, started on first use (the JVM is slow)."""
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter (the .venv one, with azure-servicebus), not python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # pyspark.testing.assertDataFrameEqual imports pandas-on-Spark, which warns (an error here) unless this
    # is set before the session starts, as pandas-on-Spark requires with pyarrow >= 2 on driver and executors.
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("busbar-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.speculation", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()
