"""The console page in a real headless Chromium (Playwright driving the distribution's ``chromium`` through
``executable_path``): load it with the admin key, see the counts, open a group, open a message, retry it
and see the counts change. ``BUSBAR_UPDATE_SCREENSHOT=1`` refreshes ``docs/console.png`` from the run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from tests.functions.ops_scene import FOREIGN_ENDPOINT, TRANSIENT, provision, sample_namespace, scene

__all__ = ["provision", "sample_namespace", "scene"]  # fixtures used by name below

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BUSBAR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield launched
        launched.close()


def dead_letters(page: Page, entity: str) -> str:
    return page.locator(f'#entities tr[data-entity="{entity}"] td[data-count="deadLetter"]').inner_text()


def test_operator_opens_a_group_and_a_message_and_retries_it(
    browser: Browser, scene: dict[str, Any], tmp_path: Path
) -> None:
    host = scene["host"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    # The key leaves the address bar for session storage.
    expect(page).to_have_url(f"{host.base_url}/api/ops")
    billing = page.locator(f'#entities tr[data-entity="{scene["billing"]}"]')
    expect(billing.locator('td[data-count="deadLetter"]')).to_have_text("5")
    expect(page.locator(f'#bars span[data-endpoint="{scene["billing"]}"]')).to_have_text("5")
    transient_row = page.locator("#groups tbody tr", has_text=TRANSIENT)
    expect(transient_row).to_have_count(1)
    expect(transient_row.locator("td").nth(3)).to_have_text("2")

    transient_row.get_by_role("button", name="Open").click()
    expect(page.locator("#group-view")).to_be_visible()
    expect(page.locator("#messages tbody tr")).to_have_count(2)
    page.locator("#messages tbody tr").first.get_by_role("button", name="View").click()
    expect(page.locator("#message-body")).to_contain_text('"order": 9')
    expect(page.locator("#message")).to_contain_text(TRANSIENT)
    expect(page.locator("#message")).to_contain_text("tenant")
    shot = tmp_path / "console.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("BUSBAR_UPDATE_SCREENSHOT") == "1":  # refresh the one in docs/ on purpose only
        shutil.copyfile(shot, ROOT / "docs" / "console.png")

    transient_row.get_by_role("button", name="Retry").click()
    expect(page.locator("#confirm")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("Retry 2 messages")
    expect(page.locator("#confirm-no")).to_be_focused()  # the safe choice has the focus
    page.keyboard.press("Shift+Tab")  # keyboard only: to Confirm
    expect(page.locator("#confirm-yes")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#result")).to_contain_text("2 re-driven", timeout=30_000)
    expect(billing.locator('td[data-count="deadLetter"]')).to_have_text("3", timeout=30_000)
    expect(billing.locator('td[data-count="active"]')).to_have_text("2")
    expect(page.locator("#groups tbody tr", has_text=TRANSIENT)).to_have_count(0)
    page.close()


def test_the_console_lists_the_apps_endpoints_first_and_infrastructure_and_foreign_entities_apart(
    browser: Browser, sample_namespace: dict[str, Any]
) -> None:
    host = sample_namespace["host"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")

    # The endpoints list: the app's four endpoints, each heading its input queue and the subscriptions
    # forwarding to it, and nothing else.
    expect(page.locator("#entities tr[data-endpoint-group]")).to_have_text(
        ["billing", "crm", "shipping", "sales"]
    )
    expect(page.locator("#entities tr[data-entity]")).to_have_count(9)
    assert page.locator("#entities tr[data-entity]").evaluate_all(
        "rows => rows.map(r => r.dataset.entity)"
    ) == [
        "billing",
        "busbar-fallback/Subscriptions/billing",
        "crm",
        "busbar-fallback/Subscriptions/crm",
        "shipping",
        "bundle-1/Subscriptions/Shipping",
        "busbar-fallback/Subscriptions/shipping",
        "sales",
        "busbar-fallback/Subscriptions/sales",
    ]
    expect(page.locator('#entities tr[data-entity="billing"]')).to_contain_text("input queue")
    expect(page.locator('#entities tr[data-entity="billing"] td[data-count="deadLetter"]')).to_have_text("1")
    # Dead letters per endpoint: the app's endpoints only, by name.
    expect(page.locator("#bars span[data-endpoint]")).to_have_count(4)
    expect(page.locator('#bars span[data-endpoint="billing"]')).to_have_text("1")
    expect(page.locator("#bars")).not_to_contain_text("orders")

    # Busbar's infrastructure in its own table, each entity saying what it is.
    infrastructure = page.locator("#infrastructure tbody tr")
    expect(infrastructure).to_have_count(4)
    expect(page.locator('#infrastructure tr[data-entity="crm.held"]')).to_contain_text("hold queue of crm")
    expect(page.locator('#infrastructure tr[data-entity="busbar-provisioning-locks"]')).to_contain_text(
        "provisioning locks"
    )
    expect(
        page.locator('#infrastructure tr[data-entity="busbar-fallback/Subscriptions/busbar-router"]')
    ).to_have_count(1)
    # The emulator's sample entities and another host's endpoint: apart too, with their counts.
    for path in ("orders", "wallet-transactions", "bundle-1", FOREIGN_ENDPOINT, f"{FOREIGN_ENDPOINT}.held"):
        expect(page.locator(f'#foreign tr[data-entity="{path}"]')).to_have_count(1)
        expect(page.locator(f'#entities tr[data-entity="{path}"]')).to_have_count(0)
    expect(page.locator('#foreign tr[data-entity="orders"] td[data-count="deadLetter"]')).to_have_text("1")
    expect(page.locator("#infrastructure-empty")).to_be_hidden()
    expect(page.locator("#foreign-empty")).to_be_hidden()
    expect(page.locator("#entity-notes")).to_be_hidden()  # the topology options are valid: nothing to say
    # In that order down the page: the app's endpoints, then the infrastructure, then the rest.
    headings = page.locator("main h2").all_inner_texts()
    endpoints, infra, others = (
        headings.index(title)
        for title in ("Endpoints", "Busbar's infrastructure", "Other entities in the namespace")
    )
    assert endpoints < infra < others, headings
    page.close()


class HeldRequest:
    """Routes ``url`` so that its first request waits until :meth:`release`; later ones go through."""

    def __init__(self, page: Page, url: str | Callable[[str], bool]) -> None:
        self.page = page
        self.routes: list[Route] = []
        page.route(url, self._route)

    def _route(self, route: Route) -> None:
        if self.routes:
            route.continue_()
        else:
            self.routes.append(route)

    def wait(self) -> None:
        """Until the page has made the request (route handlers run while Playwright waits)."""
        for _ in range(500):
            if self.routes:
                return
            self.page.wait_for_timeout(20)
        raise AssertionError("the page never made the request")

    def release(self) -> int:
        """Let the held request go; returns its status once the page has had it (network idle)."""
        self.wait()
        route = self.routes[0]
        with self.page.expect_response(lambda response: response.request == route.request) as answered:
            route.continue_()
        self.page.wait_for_load_state("networkidle")
        return answered.value.status


def test_a_slow_answer_obtained_with_the_old_key_does_not_paint_over_the_refusal(
    browser: Browser, scene: dict[str, Any]
) -> None:
    host = scene["host"]
    page = browser.new_page()
    first_refresh = HeldRequest(page, "**/api/ops/failures")  # the page's own, with the right key
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    expect(page.locator("#app")).to_be_visible()
    first_refresh.wait()
    page.evaluate("sessionStorage.setItem('busbar-ops-key', 'wrong')")
    page.evaluate("refresh()")
    expect(page.locator("#status")).to_have_text("The key was refused.")

    # The old refresh now gets its 200 (it was sent with the right key) after the newer one was refused.
    assert first_refresh.release() == 200
    expect(page.locator("#status")).to_have_text("The key was refused.")
    expect(page.locator("#keyform")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    page.close()


def test_without_a_key_the_page_asks_for_one_and_a_wrong_key_is_refused(
    browser: Browser, scene: dict[str, Any]
) -> None:
    host = scene["host"]
    page = browser.new_page()
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    expect(page.locator("#app")).to_be_visible()
    page.evaluate("sessionStorage.setItem('busbar-ops-key', 'wrong')")
    page.evaluate("refresh()")
    expect(page.locator("#keyform")).to_be_visible()
    expect(page.locator("#status")).to_have_text("The key was refused.")
    page.fill("#key", host.master_key)
    page.keyboard.press("Enter")
    expect(page.locator("#groups tbody tr")).to_have_count(3)
    page.close()


def test_the_message_of_the_later_click_is_shown_and_a_missing_one_says_why(
    browser: Browser, scene: dict[str, Any]
) -> None:
    host = scene["host"]
    page = browser.new_page()
    first_message = HeldRequest(page, lambda url: url.rsplit("/", 1)[-1].isdigit())
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    transient_row = page.locator("#groups tbody tr", has_text=TRANSIENT)
    transient_row.get_by_role("button", name="Open").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(2)
    first, second = (rows.nth(i).locator("td").nth(1).inner_text() for i in range(2))
    rows.nth(0).get_by_role("button", name="View").click()  # held
    rows.nth(1).get_by_role("button", name="View").click()
    expect(page.locator("#message-title")).to_have_text(f"Message {second} of {scene['billing']}")
    assert first_message.release() == 200
    expect(page.locator("#message-title")).to_have_text(f"Message {second} of {scene['billing']}")
    assert first != second

    # A message that is no longer there (another operator retried it, say) is reported, not ignored.
    page.evaluate(f"openMessage({scene['billing']!r}, 987654321)")
    expect(page.locator("#message [role=alert]")).to_have_text(
        f"Could not open it: no dead-lettered message 987654321 in {scene['billing']}"
    )
    page.close()
