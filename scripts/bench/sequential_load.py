"""Sequential requests to a Responses or Chat Completions endpoint, each read to its end: the
driver of `callgrind_per_request.sh` (instruction counts, not timing; `../shared/bench/loadgen.py`
speaks no Responses API)."""

import argparse
import asyncio

import aiohttp
import orjson


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("-n", type=int, default=100)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--no-usage", action="store_true", help="a Chat stream not asking for its usage")
    p.add_argument("--format", choices=["responses", "openai"], default="responses")
    a = p.parse_args()
    body: dict[str, object]
    if a.format == "responses":
        body = {"model": a.model, "input": "Say hello", "stream": a.stream}
    else:
        messages = [{"role": "user", "content": "Say hello"}]
        body = {"model": a.model, "messages": messages, "stream": a.stream}
        if a.stream and not a.no_usage:
            body["stream_options"] = {"include_usage": True}
    data = orjson.dumps(body)
    headers = {"content-type": "application/json", "authorization": "Bearer unused"}
    async with aiohttp.ClientSession() as session:
        for _ in range(a.n):
            async with session.post(a.url, data=data, headers=headers) as response:
                if response.status != 200:
                    raise SystemExit(f"HTTP {response.status}: {(await response.text())[:200]}")
                await response.read()


asyncio.run(main())
