"""Fixtures for Busbar's own AMQP client's tests."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture
def managed_identity(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment Azure's host gives an app with a managed identity: the emulator's token endpoint
    (App Service's protocol) stands in for it."""
    for name in list(os.environ):
        if name.startswith("AZURE_") or name in ("IDENTITY_SERVER_THUMBPRINT", "MSI_ENDPOINT", "MSI_SECRET"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("IDENTITY_ENDPOINT", emulator.emulator.identity_endpoint)
    monkeypatch.setenv("IDENTITY_HEADER", emulator.emulator.identity_header)
    return emulator
