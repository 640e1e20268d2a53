"""Routing by content through ``make run``'s app (issue 38's acceptance): the sample's sales endpoint handles
``Shipping.OrderAccepted`` only when ``amount >= 1000`` (its handler's ``where=``), so its subscription holds
that condition's rule and no match-all rule, and the broker delivers only the high-value orders to its queue.

An order of 5000 reaches sales and billing; one of 10 reaches billing only. Both are published over the
app's HTTP API, as a client would; what each endpoint handled is read from outside the app, from the sample
handlers' probe file. The rules are read with ``ServiceBusAdministrationClient`` through the admin
connection string ``make run`` prints, trusted through its CA file.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

from tests.devhost.test_make_run import REPO, MakeRun
from tests.functions.handled_record import HandledRecord

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

READY_SECONDS = 240.0  # start-up under a loaded machine (emulator, Azurite, provisioning, worker)
WAIT = 120.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.timeout(600)
def test_a_high_value_order_reaches_sales_and_billing_and_a_small_one_only_billing(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    probe = HandledRecord(tmp_path / "probe.jsonl")
    document: dict[str, Any] = json.loads((REPO / "local.settings.sample.json").read_text())
    document["Values"].update(**probe.settings)
    (tmp_path / "local.settings.json").write_text(json.dumps(document, indent=2))  # where MakeRun looks
    run = MakeRun(tmp_path / "data")
    try:
        run.reader.wait_ready(timeout=READY_SECONDS)
        big, small = f"BIG-{uuid.uuid4().hex[:8]}", f"SMALL-{uuid.uuid4().hex[:8]}"
        headers = {"x-functions-key": run.banner("Host key")}
        with httpx.Client(base_url=run.base_url, headers=headers, timeout=60) as http:
            for order, amount, region in ((big, 5000, "emea"), (small, 10, "amer")):
                response = http.post(
                    "/api/events/Shipping.OrderAccepted",
                    json={"order_id": order, "amount": amount, "region": region},
                )
                assert response.status_code == 202, response.text

        def handled(order: str) -> set[str]:
            return {e.endpoint for e in probe.entries(order)}

        # shipping handles an order after billing's invoice: by then anything sales could get has come.
        wait_for(lambda: handled(big) >= {"billing", "crm", "shipping", "sales"}, "the big order everywhere")
        wait_for(lambda: handled(small) >= {"billing", "crm", "shipping"}, "the small order everywhere")
        assert handled(big) == {"billing", "crm", "shipping", "sales"}
        assert handled(small) == {"billing", "crm", "shipping"}
        assert [e.detail for e in probe.entries(big) if e.endpoint == "sales"] == ["5000"]

        # sales' subscription: the condition's rule, no 1=1 rule (Azure's $Default is switched off).
        admin = ServiceBusAdministrationClient.from_connection_string(
            run.banner("Service Bus admin connection string"),
            connection_verify=run.banner("Emulator management CA file"),
        )
        with admin:
            # Wherever the routing mode puts it (the event's topic, or the fallback topic).
            forwarding = [
                (topic.name, subscription.name)
                for topic in admin.list_topics()
                for subscription in admin.list_subscriptions(topic.name)
                if (subscription.forward_to or "").rstrip("/").split("/")[-1].lower() == "sales"
            ]
            assert len(forwarding) == 1, forwarding
            [(topic_name, subscription_name)] = forwarding
            rules = {
                r.name: (r.filter.sql_expression if isinstance(r.filter, SqlRuleFilter) else None)
                for r in admin.list_rules(topic_name, subscription_name)
            }
        conditions = [sql for sql in rules.values() if sql and "amount >= 1000" in sql]
        assert conditions, rules
        assert not [name for name, sql in rules.items() if (sql or "").replace(" ", "") == "1=1"], rules
        run.interrupt()
    finally:
        run.kill()
