"""Fixtures for the re-drive tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.shared.redrive.redrive_support import Provisioner


@pytest.fixture
def provision(emulator: Any) -> Iterator[Provisioner]:
    """Creates entities in the shared emulator through the management plane."""
    provisioner = Provisioner(emulator)
    yield provisioner
    provisioner.close()
