"""Draw docs/dashboard.png, the README's picture of /dashboard: a day of made-up traffic.

    python scripts/docs/dashboard_screenshot.py [docs/dashboard.png]

Fills a temporary SQLite audit store with a seeded day of exchanges (four providers, cuts at
max tokens and at the context window, withheld tool calls, retries, fallbacks, recovered streams,
costs), serves the gateway on it, and takes a screenshot of the page in Debian's Chromium
through Playwright.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web
from playwright.async_api import async_playwright

from gateway.app import build_app
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore
from gateway.edge import make_runner
from gateway.settings import parse_settings

CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PROVIDERS = {  # name: (models, share of answers cut, seconds to the first byte)
    "anthropic": (["claude-sonnet-4-5", "claude-haiku-4-5"], 0.06, 0.6),
    "openai": (["gpt-5", "gpt-5-mini"], 0.03, 0.4),
    "gemini": (["gemini-2.5-pro"], 0.11, 0.9),
    "local": (["qwen2.5-coder:7b"], 0.18, 0.2),
}
TOOLS = ["edit_file", "run_shell", "search", "read_file", "web_fetch"]


def exchange(i: int, rng: random.Random, now: float) -> AuditRecord:
    provider = rng.choices(list(PROVIDERS), weights=[5, 4, 2, 1])[0]
    models, cut_share, ttfb = PROVIDERS[provider]
    started = now - 86400 * (1 - (i + rng.random()) / 3000)
    hour = time.gmtime(started).tm_hour
    cut = rng.random() < cut_share * (2.5 if provider == "gemini" and 13 <= hour <= 16 else 1)
    stop = "length" if cut else rng.choices(["stop", "tool_calls", "refusal"], [6, 4, 0.1])[0]
    reason = rng.choice(["length", "length", "context_window", "missing_terminator"])
    if cut and reason == "context_window":
        stop = "context_window"
    withheld = (
        [{"id": f"call_{i}", "name": rng.choice(TOOLS)}] if cut and rng.random() < 0.5 else []
    )
    target = {"provider": provider, "upstream_model": models[0]}
    attempts = [{**target, "outcome": "answered"}]
    if rng.random() < 0.04:  # a retry
        attempts.insert(0, {**target, "outcome": "timeout"})
    if rng.random() < 0.02:  # a fallback
        failed = {"provider": "azure", "upstream_model": "gpt-5", "outcome": "error_status"}
        attempts.insert(0, failed)
    recovered = None
    if not cut and rng.random() < 0.015:  # a stream broken mid-way and continued ([recovery])
        at = rng.randrange(200, 4000)
        recovered = {"breaks": 1, "max_tokens": 0, "at_chars": [at], "targets": [f"{provider}/*"]}
        recovered["causes"] = [rng.choice(["missing_terminator", "upstream_timeout"])]
        attempts = [{**target, "outcome": "broken"}, {**target, **attempts[-1], "continues": True}]
    first = started + ttfb * (0.5 + rng.random())
    return AuditRecord(
        id=f"{int(started * 1000):x}{i:06x}",
        started_at=started,
        client_format=rng.choice(["anthropic", "openai", "responses"]),
        stream=True,
        model=rng.choice(models),
        route="*",
        provider=provider,
        first_byte_at=first,
        ended_at=first + rng.random() * 20,
        http_status=200,
        stop_reason=stop,
        truncated=cut,
        cut_reason=reason if cut else None,
        withheld_tool_calls=withheld,
        input_tokens=rng.randrange(2000, 60000),
        output_tokens=rng.randrange(50, 4000),
        attempts=attempts,
        cost_usd=None if provider == "local" else rng.random() * 0.05,
        recovered=recovered,
    )


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "audit.db"
        now = time.time()
        rng = random.Random(2026)
        store = SQLiteStore(db)
        await store.write([exchange(i, rng, now) for i in range(3000)])
        await store.close()
        settings = parse_settings({"audit": {"store": f"sqlite:///{db}"}}, "screenshot", env={})
        runner = make_runner(build_app(settings, env={}), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with async_playwright() as p:
                browser = await p.chromium.launch(
                    executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
                )
                page = await browser.new_page(viewport={"width": 1280, "height": 1330})
                await page.goto(f"http://127.0.0.1:{port}/dashboard#range=24h")
                await page.wait_for_selector("body[data-loaded]")
                await page.screenshot(path=str(out))
                await browser.close()
        finally:
            await runner.cleanup()
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/dashboard.png")))
