"""`/dashboard` end to end in a real headless browser (Debian's Chromium, driven by Playwright).

A gateway with gateway keys and an admin key serves two offline mock providers; the real
Anthropic and OpenAI SDKs send a scripted mix of exchanges (whole and streamed answers, answers
cut at max tokens, a cut tool call that is withheld, a stream without its terminator, a refusal,
an error). The page then has to ask for the admin key, show the numbers `gateway audit` reports
for the same store, draw its charts (screenshots are checked for the series' colors), change
with the provider filter, and never make a request anywhere but the gateway.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest

from gateway.app import build_app
from gateway.audit.command import run_audit
from gateway.audit.sqlite_store import SQLiteStore
from gateway.settings import parse_settings
from tests.access_util import key_table, new_key, wait_for
from tests.conftest import skip_without
from tests.served import LoopServers

playwright_api = pytest.importorskip("playwright.sync_api")
# Locator assertions: they evaluate no script string (the page's CSP forbids eval).
expect = playwright_api.expect

CHROMIUM = os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium")
# As the machine's notes advise: no background fetches (the closed network refuses them).
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = new_key("dash")
ADMIN = new_key("admin")
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]
WEATHER_RED = (0xC2, 0x25, 0x5C)  # the withheld-tools bars
LENGTH_RED = (0xE0, 0x31, 0x31)  # `length` in the stop-reason mix, the cut-reason bars


def chromium() -> str:
    if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
    skip_without("chromium", f"none at {CHROMIUM}")


class DashboardStack(LoopServers):
    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db = db

    async def _start(self) -> None:
        settings = parse_settings(
            {
                "providers": {"alpha": {"kind": "mock"}, "beta": {"kind": "mock"}},
                "routes": [
                    {"match": "beta-*", "provider": "beta", "upstream_model": "mock-tool-cut"},
                    {"match": "mock-*", "provider": "alpha"},
                ],
                "keys": [key_table("dash", KEY)],
                "admin": {"sha256": key_table("admin", ADMIN)["sha256"]},
                "audit": {"store": f"sqlite:///{self.db}"},
            },
            "dashboard-test",
            env={},
        )
        self.url = await self._serve(build_app(settings, env={}))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[DashboardStack]:
    served = DashboardStack(tmp_path / "audit.db")
    served.start()
    try:
        yield served
    finally:
        served.stop()


def script_exchanges(url: str) -> None:
    """The mix: 6 answers of alpha, 3 of beta (each a withheld tool call cut at max tokens)."""
    claude = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    ask = [{"role": "user", "content": "hello"}]
    for model in ("mock-text", "mock-length", "mock-tool-cut", "mock-refusal"):
        claude.messages.create(model=model, max_tokens=64, messages=ask, tools=TOOLS)
    with (
        claude.messages.stream(model="mock-no-terminator", max_tokens=64, messages=ask) as stream,
        pytest.raises(anthropic.APIError),
    ):  # the gateway ends a cut stream with an error
        stream.get_final_message()
    for _ in range(2):
        claude.messages.create(model="beta-x", max_tokens=64, messages=ask, tools=TOOLS)
    gpt = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    gpt.chat.completions.create(model="mock-length", messages=ask)  # type: ignore[arg-type]
    gpt.chat.completions.create(model="beta-y", messages=ask, tools=[_openai_tool()])  # type: ignore[arg-type, list-item]


def _openai_tool() -> dict[str, Any]:
    return {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


def audit_report(stack: DashboardStack, **options: Any) -> Any:
    """`gateway audit --format json` over the stack's store: the reference figures."""

    async def report() -> Any:
        store = SQLiteStore(stack.db)
        try:
            return orjson.loads(await run_audit(store, since=None, fmt="json", limit=20, **options))
        finally:
            await store.close()

    return asyncio.run(report())


def wait_for_records(stack: DashboardStack, n: int) -> None:
    def answers() -> int:
        return sum(g["requests"] for g in audit_report(stack, by="provider", truncated=False))

    assert wait_for(lambda: answers() >= n), f"fewer than {n} records reached the audit trail"


def colors_in(png: bytes, color: tuple[int, int, int], tolerance: int = 12) -> int:
    """How many pixels of the screenshot are `color` (within `tolerance` per channel)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(
        count
        for count, pixel in image.getcolors(maxcolors=1 << 24) or []
        if all(abs(a - b) <= tolerance for a, b in zip(pixel, color, strict=True))
    )


def tile(page: Any, name: str) -> str:
    return str(page.locator(f'[data-tile="{name}"]').inner_text()).strip()


def test_dashboard_in_chromium(stack: DashboardStack) -> None:
    script_exchanges(stack.url)
    wait_for_records(stack, 9)
    by_provider = audit_report(stack, by="provider", truncated=False)
    cut = audit_report(stack, by="provider", truncated=True)
    expected = {g["group"]: g for g in by_provider}
    assert set(expected) == {"alpha", "beta"} and expected["beta"]["truncated"] == 3

    own = urlsplit(stack.url).netloc
    elsewhere: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1300, "height": 1600})

        def only_here(route: Any) -> None:
            if urlsplit(route.request.url).netloc == own:
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        context.route("**/*", only_here)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        response = page.goto(f"{stack.url}/dashboard#range=24h")
        assert (
            response is not None
            and "connect-src 'self'" in response.headers["content-security-policy"]
        )

        # Keys are configured: the page asks for the admin key, refuses a wrong one.
        page.wait_for_selector("#keyform:not([hidden])")
        page.fill("#key", KEY)  # a gateway key is not the admin key
        page.click("#keyform button")
        expect(page.locator("#keyerror")).to_contain_text("not accepted")
        page.fill("#key", ADMIN)
        page.click("#keyform button")
        page.wait_for_selector("body[data-loaded]")

        answers = sum(g["requests"] for g in by_provider)
        assert tile(page, "requests") == str(answers)
        assert tile(page, "truncated") == str(sum(g["truncated"] for g in by_provider))
        withheld = sum(g["withheld_tool_calls"] for g in by_provider)
        assert tile(page, "withheld_tool_calls") == str(withheld) and withheld >= 4
        assert tile(page, "errors") == str(sum(g["errors"] for g in by_provider))
        rows = page.locator("#latest tbody tr")
        assert [rows.nth(i).get_attribute("data-id") for i in range(rows.count())] == [
            c["id"] for c in cut
        ]
        beta_row = page.locator('#groups tr[data-group="provider:beta"] td')
        assert beta_row.nth(1).inner_text() == str(expected["beta"]["requests"])
        assert beta_row.nth(2).inner_text() == str(expected["beta"]["truncated"])

        # The charts are drawn: marks in each, and their colors on a screenshot.
        for name in ("truncation-rate", "stop-reasons", "cut-reasons", "withheld-tools"):
            chart = page.locator(f'[data-chart="{name}"]')
            assert int(chart.get_attribute("data-marks") or 0) > 0, name
            assert chart.locator("svg").count() == 1, name
        tools_png = page.locator('[data-chart="withheld-tools"]').screenshot()
        assert colors_in(tools_png, WEATHER_RED) > 500
        stops_png = page.locator('[data-chart="stop-reasons"]').screenshot()
        assert colors_in(stops_png, LENGTH_RED) > 200
        whole = page.screenshot(full_page=True)
        Path(os.environ.get("DASHBOARD_SCREENSHOT", "/dev/null")).write_bytes(whole)

        # The provider filter: beta's figures only.
        loaded = page.locator("body").get_attribute("data-loaded")
        page.select_option("#provider", "beta")
        expect(page.locator("body")).not_to_have_attribute("data-loaded", loaded or "")
        assert tile(page, "requests") == str(expected["beta"]["requests"])
        assert tile(page, "truncated") == str(expected["beta"]["truncated"])
        cut_rows = page.locator("#latest tbody tr")
        beta_cut = [c["id"] for c in cut if c["provider"] == "beta"]
        assert [cut_rows.nth(i).get_attribute("data-id") for i in range(cut_rows.count())] == (
            beta_cut
        )
        assert page.locator('#groups tr[data-group="provider:alpha"]').count() == 0
        assert "provider=beta" in page.url
        browser.close()

    assert errors == []
    assert elsewhere == []  # nothing but the gateway was asked for anything


def test_dashboard_api_needs_the_admin_key(stack: DashboardStack) -> None:
    from tests.access_util import request

    base = stack.url
    assert request(base, "GET", "/dashboard/api/overview").status == 401
    bearer = {"authorization": f"Bearer {KEY}"}
    assert request(base, "GET", "/dashboard/api/overview", bearer).status == 401
    admin = {"authorization": f"Bearer {ADMIN}"}
    answer = request(base, "GET", "/dashboard/api/overview?since=1h", admin)
    assert answer.status == 200 and answer.json["totals"]["requests"] == 0
    bad = request(base, "GET", "/dashboard/api/overview?since=yesterday", admin)
    assert bad.status == 400 and "since" in bad.json["error"]["message"]
    # The page itself holds no data and is served to anyone, with its policy.
    page = request(base, "GET", "/dashboard")
    assert page.status == 200 and b"/dashboard/api/" not in page.body
    assert "default-src 'none'" in page.headers["content-security-policy"]
