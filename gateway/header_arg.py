"""A header given on the command line, `NAME: VALUE`, for the tools that send requests to another
gateway (`gateway conformance --header`, `gateway bench --compare-header`). A VALUE of `@FILE` is
that file's text: JSON made one line (Portkey's `x-portkey-config`), other text with its
whitespace folded. Not in gateway.arg_types: `gateway serve` imports that before it starts its
first worker, and this needs orjson."""

from __future__ import annotations

from pathlib import Path

import orjson


def header_line(flag: str, text: str) -> tuple[str, str]:
    """(name, value); ValueError naming `flag` when `text` is not `NAME: VALUE`."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise ValueError(f"{flag}: not 'NAME: VALUE': {text!r}")
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text().strip()
        except OSError as exc:
            raise ValueError(f"{flag}: cannot read {value[1:]}: {exc.strerror}") from None
        try:
            value = orjson.dumps(orjson.loads(value)).decode()
        except orjson.JSONDecodeError:
            value = " ".join(value.split())
    return name, value
