"""Request options with a counterpart on the other wire: structured output, reasoning effort,
service tier. Both directions live here, so each table can be read beside its inverse.

    >>> drops = Drops(())
    >>> response_format_to_anthropic(
    ...     {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}},
    ...     drops)
    {'type': 'json_schema', 'schema': {'type': 'object'}}
    >>> reasoning_to_openai({"type": "enabled", "budget_tokens": 10000}, None, drops)
    'medium'

Choices made where the wires differ:

- `response_format: json_object` has no Anthropic counterpart: Anthropic's structured output
  takes only a schema, and a schema that lets any object through is refused (every object must
  say `additionalProperties: false`). It is dropped, and named as `response_format`.
- `json_schema.strict: false` still goes out as a schema: Anthropic always holds the output to
  it, a stronger promise than the client asked for. Its `name` has no use upstream; its
  `description` is reported as `response_format.json_schema.description`.
- Anthropic's `output_config.format` becomes a strict `json_schema` named `output` (Chat needs a
  name; strict because Anthropic's output always conforms).
- `reasoning_effort`: `minimal` becomes `low` (Anthropic's lowest), `none` sends no effort (and
  no thinking, which is Anthropic's default off); the others keep their value.
- Anthropic -> Chat: `output_config.effort` keeps its value. Without one, `thinking` decides:
  `disabled` is `none`; `enabled` maps its budget by `BUDGET_EFFORT`; `adaptive` (the model
  decides) sends none, which is what an OpenAI reasoning model does by default.
- `service_tier`: OpenAI `auto` and `priority` are Anthropic `auto` (priority capacity when
  there is some), `default` is `standard_only`; `flex`, `scale` and `fast` have no counterpart.

An effort value neither table knows goes out unchanged (the upstream answers for it, as enums
are open); a service tier or an output format without a counterpart is dropped by name.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.translate.drops import Drops
from gateway.translate.fields import invalid

_EFFORT_TO_ANTHROPIC: Final = {"minimal": "low"}
# Thinking budget (tokens) -> OpenAI reasoning effort: the first level whose bound the budget is
# under. Anchored on Claude Code's budgets: "think" 4,000 -> low, "think hard" 10,000 -> medium,
# "ultrathink" 31,999 -> high. Anthropic's minimum budget is 1,024.
BUDGET_EFFORT: Final = ((4096, "low"), (16384, "medium"))
BUDGET_EFFORT_ABOVE: Final = "high"
_TIER_TO_ANTHROPIC: Final = {"auto": "auto", "priority": "auto", "default": "standard_only"}
_TIER_TO_OPENAI: Final = {"auto": "auto", "standard_only": "default"}
JSON_SCHEMA_NAME: Final = "output"


def _kind(value: Any, path: str) -> str:
    """The `type` of an option object; the value itself is never echoed."""
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str):
        raise invalid(path, "must be an object with a string type")
    return kind


def _enum(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise invalid(path, "must be a string")
    return value


# --- Chat -> Anthropic ---------------------------------------------------------------------------


def response_format_to_anthropic(value: Any, drops: Drops) -> dict[str, Any] | None:
    """`response_format` as Anthropic's `output_config.format`, or None (dropped, or text)."""
    if value is None:
        return None
    kind = _kind(value, "response_format")
    if kind == "text":
        return None  # free text is the default on both wires
    if kind != "json_schema":
        drops.field("response_format")  # json_object, or a type of the future
        return None
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise invalid("response_format.json_schema", "must be an object")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise invalid(
            "response_format.json_schema.schema", "must be an object (Anthropic needs a schema)"
        )
    if spec.get("description"):
        drops.field("response_format.json_schema.description")
    return {"type": "json_schema", "schema": schema}


def reasoning_effort_to_anthropic(value: Any) -> str | None:
    """`reasoning_effort` as Anthropic's `output_config.effort`, or None."""
    if value is None:
        return None
    effort = _enum(value, "reasoning_effort")
    if effort == "none":
        return None
    return _EFFORT_TO_ANTHROPIC.get(effort, effort)


def service_tier_to_anthropic(value: Any, drops: Drops) -> str | None:
    if value is None:
        return None
    tier = _TIER_TO_ANTHROPIC.get(_enum(value, "service_tier"))
    if tier is None:
        drops.field("service_tier")
    return tier


def output_config_to_anthropic(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    """`response_format` and `reasoning_effort` as one `output_config`, when either asks."""
    config: dict[str, Any] = {}
    output_format = response_format_to_anthropic(body.get("response_format"), drops)
    if output_format is not None:
        config["format"] = output_format
    effort = reasoning_effort_to_anthropic(body.get("reasoning_effort"))
    if effort is not None:
        config["effort"] = effort
    return {"output_config": config} if config else {}


# --- Anthropic -> Chat ---------------------------------------------------------------------------


def output_format_to_openai(value: Any, path: str, drops: Drops) -> dict[str, Any] | None:
    """Anthropic's `output_config.format` (or the beta `output_format`) as `response_format`."""
    if value is None:
        return None
    if _kind(value, path) != "json_schema":
        drops.field(path)
        return None
    schema = value.get("schema")
    if not isinstance(schema, dict):
        raise invalid(f"{path}.schema", "must be an object")
    spec = {"name": JSON_SCHEMA_NAME, "schema": schema, "strict": True}
    return {"type": "json_schema", "json_schema": spec}


def budget_effort(budget: int) -> str:
    for bound, effort in BUDGET_EFFORT:
        if budget < bound:
            return effort
    return BUDGET_EFFORT_ABOVE


def reasoning_to_openai(thinking: Any, effort: Any, drops: Drops) -> str | None:
    """`thinking` and `output_config.effort` as one `reasoning_effort`, or None."""
    if effort is not None:
        effort = _enum(effort, "output_config.effort")
    kind = None if thinking is None else _kind(thinking, "thinking")
    if kind == "disabled":
        if effort is not None:
            drops.field("output_config.effort")  # Chat's one knob says: no reasoning
        return "none"
    if effort is not None:
        return str(effort)
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise invalid("thinking.budget_tokens", "must be a non-negative integer")
        return budget_effort(budget)
    if kind not in (None, "adaptive", "between_tools"):
        drops.field("thinking")  # a thinking mode of the future
    return None


_OUTPUT_CONFIG_PARTS: Final = frozenset({"effort", "format", "task_budget"})


def output_config_to_openai(body: dict[str, Any], drops: Drops) -> dict[str, Any]:
    """`output_config` (and the beta `output_format`) and `thinking` as `response_format` and
    `reasoning_effort`."""
    config = body.get("output_config")
    if config is None:
        config = {}
    elif not isinstance(config, dict):
        raise invalid("output_config", "must be an object")
    out: dict[str, Any] = {}
    response_format = output_format_to_openai(config.get("format"), "output_config.format", drops)
    beta = body.get("output_format")
    if response_format is None:
        response_format = output_format_to_openai(beta, "output_format", drops)
    elif beta is not None:
        drops.field("output_format")  # output_config.format already says it
    if response_format is not None:
        out["response_format"] = response_format
    effort = reasoning_to_openai(body.get("thinking"), config.get("effort"), drops)
    if effort is not None:
        out["reasoning_effort"] = effort
    for key, value in config.items():
        if key not in ("effort", "format") and value is not None:
            known = key in _OUTPUT_CONFIG_PARTS
            drops.field(f"output_config.{key}" if known else "output_config")
    return out


def service_tier_to_openai(value: Any, drops: Drops) -> str | None:
    if value is None:
        return None
    tier = _TIER_TO_OPENAI.get(_enum(value, "service_tier"))
    if tier is None:
        drops.field("service_tier")
    return tier
