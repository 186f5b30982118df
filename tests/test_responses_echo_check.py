"""The echo check of a Responses request (validation.ResponsesBody.check_echo): it encodes the
echoed fields only when the request gives one of them as an object or an array, and refuses the
same requests, with the same error, as encoding them every time would."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequest
from gateway.handlers.validation import ResponsesBody, _check_echo, parse_json, validate

ENDPOINT = "responses"


def nest(depth: int, bracket: str) -> str:
    opening, closing = ('{"a":', "}") if bracket == "{" else ("[", "]")
    return opening * depth + "1" + closing * depth


def outcome(check: object) -> str | None:
    try:
        check()  # type: ignore[operator]
    except InvalidRequest as exc:
        return f"{exc.param} {exc}"
    return None


TOOL = '{"model":"m","input":"hi","tools":[{"type":"function","parameters":NEST}]}'
BODIES = (
    [
        '{"model":"m","input":"hi"}',
        '{"model":"m","input":"hi","store":false,"max_output_tokens":256,"temperature":0.5}',
        '{"model":"m","input":"hi","user":18446744073709551616,"instructions":"be \\"nice\\""}',
        '{"model":"m","input":"hi","metadata":{},"tools":[],"text":{"format":{"type":"text"}}}',
    ]
    + [
        f'{{"model":"m","input":"hi","{field}":{nest(depth, bracket)}}}'
        for field in ("metadata", "instructions", "reasoning", "user")
        for depth in (1, 128, 250, 251, 252, 253, 300)
        for bracket in "{["
    ]
    + [TOOL.replace("NEST", nest(depth, "{")) for depth in (1, 248, 249, 250, 251, 300)]
)


@pytest.mark.parametrize("raw", BODIES)
def test_check_echo_refuses_what_encoding_the_echo_refuses(raw: str) -> None:
    obj = parse_json(raw.encode())
    body = ResponsesBody.model_validate(obj)
    expected = outcome(lambda: _check_echo(ENDPOINT, body.echo(obj)))
    assert outcome(lambda: body.check_echo(ENDPOINT, obj)) == expected


def test_an_echoed_field_nested_too_deep_is_refused_by_name() -> None:
    obj = parse_json(f'{{"model":"m","input":"hi","metadata":{nest(300, "{")}}}'.encode())
    with pytest.raises(InvalidRequest) as caught:
        validate(ResponsesBody, obj, ENDPOINT)
    assert caught.value.param is not None and caught.value.param.startswith("metadata")
    assert "nested deeper than" in str(caught.value)
