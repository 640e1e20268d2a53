"""Fixtures for the Functions app tests: a private emulator per module and the app's settings for it.

Each module gets its own in-process emulator, so the topics Busbar names after contracts
(``Shipping.OrderAccepted``...) never meet another module's; every test still uses fresh queue and topic
names.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.server import EmulatorOptions, EmulatorThread
from shared import runtime


@pytest.fixture(scope="module")
def private_emulator() -> Iterator[EmulatorThread]:
    thread = EmulatorThread(EmulatorOptions(amqp_port=0, management_port=0))
    try:
        thread.start()
        yield thread
    finally:
        runtime.reset()
        thread.stop()
