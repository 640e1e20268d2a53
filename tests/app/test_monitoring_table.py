"""The monitoring table (app.monitoring) lives in the app's one cache of clients (app.runtime.cached): one per
storage account for the process, another account its own, and runtime.reset closes and forgets it with
every other cached client (it had a cache of its own, which reset left alone)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app import runtime
from app.monitoring import monitoring_table

pytestmark = pytest.mark.timeout(30)

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def storage(account: str) -> dict[str, str]:
    """Settings naming ``account``'s table service on a port nothing listens on (no request is made)."""
    return {
        "AzureWebJobsStorage": f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={KEY};"
        f"TableEndpoint=http://127.0.0.1:9/{account};"
    }


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    runtime.reset()
    yield
    runtime.reset()


def test_one_storage_account_has_one_monitoring_table_and_another_account_its_own() -> None:
    first = monitoring_table(storage("accountone"))

    assert monitoring_table(storage("accountone")) is first
    assert monitoring_table(storage("accounttwo")) is not first


def test_resetting_the_runtime_forgets_the_monitoring_table_with_the_other_clients() -> None:
    before = monitoring_table(storage("accountone"))

    runtime.reset()

    assert monitoring_table(storage("accountone")) is not before
