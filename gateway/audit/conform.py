"""What the stores hold: every record field checked against its type, and repaired when it fails.

A value from outside can be one no store keeps faithfully: 2**63 tokens, a list where a count
belongs, text in a time, a NUL in text. SQLite's type affinity would store most of them anywhere
(and break `gateway audit` later); PostgreSQL refuses them. `check` makes both stores refuse the
same records, as `RecordRejected`, before any SQL runs. The writer then writes `repaired(record)`:
the same record with each field it cannot hold emptied (None, or the field's default when its
column cannot be NULL), so one bad value costs that value, not the record nor the ones after it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import orjson

from gateway.audit.record import (
    FIELD_NAMES,
    INT32_MAX,
    AuditRecord,
    coerce_flag,
    coerce_text,
    coerce_time,
)
from gateway.audit.store import RecordRejected
from gateway.formats.shape import INT64_MAX, count


def _none() -> None:
    return None


def _count32(value: object) -> int | None:
    return count(value, INT32_MAX)  # an INTEGER column of PostgreSQL


def coerce_json(value: object) -> Any:
    """`value` as JSON every store holds: what JSON cannot say (an object, an integer beyond
    64 bits, a non-finite float) becomes None, text is coerced, keys that are not text go."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return coerce_text(value)
    if isinstance(value, int):
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else None
    if isinstance(value, float):
        return coerce_time(value)  # finite or None
    if isinstance(value, list | tuple):
        return [coerce_json(item) for item in value]
    if isinstance(value, dict):
        return {coerce_text(k): coerce_json(v) for k, v in value.items() if isinstance(k, str)}
    return None


def _json_list(value: object) -> list[Any] | None:
    return coerce_json(value) if isinstance(value, list) else None


def _json_object(value: object) -> dict[str, Any] | None:
    return coerce_json(value) if isinstance(value, dict) else None


class Repair(NamedTuple):
    coerce: Callable[[Any], Any]  # the value as the field holds it, or None
    default: Callable[[], Any] | None  # replaces a value the field cannot hold; None: none can


REQUIRED: Final = None  # a record that cannot hold its id, start or format is not repairable
REPAIRS: Final[Mapping[str, Repair]] = {
    "id": Repair(coerce_text, REQUIRED),
    "started_at": Repair(coerce_time, REQUIRED),
    "client_format": Repair(coerce_text, REQUIRED),
    "stream": Repair(coerce_flag, bool),
    "model": Repair(coerce_text, str),
    "route": Repair(coerce_text, _none),
    "provider": Repair(coerce_text, _none),
    "upstream_model": Repair(coerce_text, _none),
    "first_byte_at": Repair(coerce_time, _none),
    "ended_at": Repair(coerce_time, _none),
    "http_status": Repair(_count32, _none),
    "stop_reason": Repair(coerce_text, _none),
    "native_stop_reason": Repair(coerce_text, _none),
    "truncated": Repair(coerce_flag, bool),
    "cut_reason": Repair(coerce_text, _none),
    "terminator_seen": Repair(coerce_flag, _none),
    "tool_calls": Repair(_count32, int),
    "withheld_tool_calls": Repair(_json_list, list),
    "parse_failures": Repair(_json_list, list),
    "input_tokens": Repair(count, _none),
    "output_tokens": Repair(count, _none),
    "cache_read_tokens": Repair(count, _none),
    "cache_creation_tokens": Repair(count, _none),
    "error_class": Repair(coerce_text, _none),
    "client_aborted": Repair(coerce_flag, bool),
    "runaway_streak": Repair(_count32, _none),
    "content": Repair(_json_object, _none),
    "ended_by": Repair(coerce_text, _none),
    "dropped_fields": Repair(_json_list, _none),
    "dropped_tools": Repair(_count32, int),
    "dropped_input_items": Repair(_count32, int),
    "response_id": Repair(coerce_text, _none),
    "previous_response_id": Repair(coerce_text, _none),
    "attempts": Repair(_json_list, list),
    "timeout": Repair(coerce_text, _none),
    "key_name": Repair(coerce_text, _none),
    "cost_usd": Repair(coerce_time, _none),  # a finite number, as a time is
    "cost_source": Repair(coerce_text, _none),
    "operation": Repair(coerce_text, lambda: "generate"),
    "recovered": Repair(_json_object, _none),
    "estimated_tokens": Repair(count, _none),
}
# JSON fields are checked for their shape here and for their content by `json_text`, which the
# stores run anyway: walking a large `content` for every record would cost more than dumping it.
_JSON_SHAPES: Final[Mapping[str, type]] = {
    "withheld_tool_calls": list,
    "parse_failures": list,
    "content": dict,
    "dropped_fields": list,
    "attempts": list,
    "recovered": dict,
}
# A JSON \u0000 escape: after an even number of backslashes (an odd one is an escaped "\").
_JSON_NUL: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


# Per field, in record order: (name, may be None, JSON shape or None, coerce, plain type, int
# limit). A field holds its value when it is None and may be, has its JSON shape, or comes out of
# its coerce unchanged; a value of the plain type that is plainly fine (ASCII text without NUL, a
# finite float, a bool, an int within the limit) skips the call. Built once: `check` runs for
# every record.
_PLAIN: Final[Mapping[Callable[[Any], Any], tuple[type, int]]] = {
    coerce_text: (str, 0),
    coerce_flag: (bool, 0),
    coerce_time: (float, 0),
    count: (int, INT64_MAX),
    _count32: (int, INT32_MAX),
}
_INF: Final = float("inf")
_Check = tuple[str, bool, type | None, Callable[[Any], Any], type, int]
_CHECKS: Final[tuple[_Check, ...]] = tuple(
    (
        name,
        repair.default is _none,
        _JSON_SHAPES.get(name),
        repair.coerce,
        *_PLAIN.get(repair.coerce, (type(None), 0)),
    )
    for name in FIELD_NAMES
    for repair in (REPAIRS[name],)
)
_VALUES: Final = operator.attrgetter(*FIELD_NAMES)  # every field of a record, in one call


def check(record: AuditRecord) -> tuple[Any, ...]:
    """The record's values in field order (the stores' columns), once every field is seen to
    hold a value of its type; else `RecordRejected`, naming the field.

    A record's types say which of its values need looking at: the plan for them is made once per
    combination of types (`_plan`), and tests every text at once, and every count and time. A
    record the plan cannot pass is checked field by field (`_check_each`), which names the field.
    """
    values: tuple[Any, ...] = _VALUES(record)
    types = tuple(map(type, values))
    try:
        plan = _PLANS[types]
    except KeyError:  # a combination of types not met before
        plan = _plan(types)
        if len(_PLANS) < _MAX_PLANS:
            _PLANS[types] = plan
    if plan is None or not plan.holds(values):
        _check_each(values)
    return values


def _check_each(values: tuple[Any, ...]) -> None:
    for (name, nullable, shape, coerce, plain, limit), value in zip(_CHECKS, values, strict=True):
        if value is None:
            if nullable:
                continue
        elif shape is not None:
            if type(value) is shape:
                continue
        elif (
            (cls := type(value)) is plain
            and (
                (cls is str and value.isascii() and "\x00" not in value)
                or (cls is int and 0 <= value <= limit)
                or (cls is float and -_INF < value < _INF)
                or cls is bool
            )
        ) or coerce(value) is value:
            continue
        raise RecordRejected(f"field {name} cannot hold its value", field=name)


_Values = Callable[[tuple[Any, ...]], tuple[Any, ...]]


def _getter(at: Sequence[int]) -> _Values | None:
    """The values at `at`, always as a tuple (itemgetter gives one index's value bare)."""
    if not at:
        return None
    if len(at) == 1:
        only = at[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*at)


class _Plan(NamedTuple):
    """What `_check_each` would test of the values with one combination of types."""

    texts: _Values | None
    counts: tuple[tuple[_Values, int], ...]  # the counts below each limit
    times: _Values | None

    def holds(self, values: tuple[Any, ...]) -> bool:
        """Every text ASCII without NUL, every count within its limit, every float finite:
        all plainly fine, as `_check_each` takes them without a coerce. False says nothing
        (a non-ASCII text, a sum that overflows): `_check_each` decides then."""
        if self.texts is not None:
            joined = "".join(self.texts(values))
            if not joined.isascii() or "\x00" in joined:
                return False
        for counts, limit in self.counts:
            group = counts(values)
            if min(group) < 0 or max(group) > limit:
                return False
        # A NaN or an infinity makes the sum one; finite floats make it one only by overflow.
        return self.times is None or -_INF < sum(self.times(values)) < _INF


def _plan(types: tuple[type, ...]) -> _Plan | None:
    """None when a value's type alone needs `_check_each`: a None where the field cannot be
    one, a JSON field of another shape, any type but the field's plain one."""
    texts: list[int] = []
    counts: dict[int, list[int]] = {}
    times: list[int] = []
    for at, ((_, nullable, shape, _, plain, limit), cls) in enumerate(
        zip(_CHECKS, types, strict=True)
    ):
        if cls is _NONE_TYPE:
            if not nullable:
                return None
        elif shape is not None:
            if cls is not shape:
                return None
        elif cls is not plain:
            return None
        elif cls is str:
            texts.append(at)
        elif cls is int:
            counts.setdefault(limit, []).append(at)
        elif cls is float:
            times.append(at)
    return _Plan(
        _getter(texts),
        tuple((getter, limit) for limit, at in counts.items() if (getter := _getter(at))),
        _getter(times),
    )


_NONE_TYPE: Final = type(None)
# Records come in a few dozen combinations of types (which optional fields are set); a store
# that meets more than this many keeps checking the others without a plan kept.
_MAX_PLANS: Final = 512
_PLANS: dict[tuple[type, ...], _Plan | None] = {}


def json_text(value: object) -> str:
    """`value` as JSON text; `RecordRejected` when JSON cannot say it or it holds a NUL, which
    PostgreSQL's jsonb refuses (SQLite refuses it too, so that both hold the same)."""
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:
        raise RecordRejected("a JSON field cannot hold its value") from exc
    if "\\u0000" in text and _JSON_NUL.search(text):
        raise RecordRejected("a JSON field holds a NUL")
    return text


def repaired(record: AuditRecord) -> AuditRecord | None:
    """`record` with each field it cannot hold emptied; None when its id, start time or client
    format is one of them (nothing would tell the repaired record apart)."""
    values: dict[str, Any] = {}
    for name, repair in REPAIRS.items():
        value = getattr(record, name)
        fixed = repair.coerce(value)
        if fixed is None and not (value is None and repair.default is _none):
            if repair.default is None:
                return None
            fixed = repair.default()
        values[name] = fixed
    return AuditRecord(**values)
