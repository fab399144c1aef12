"""What a peer writes is data: every decoder of the job's keys (records, verdicts) takes any bytes and answers with a
value or ValueError, never another exception, never a wait (hypothesis feeds them hostile values)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_rocm7_plugin._job import peer
from jax_rocm7_plugin._job.check import Verdict
from jax_rocm7_plugin._job.record import decode, encode
from jax_rocm7_plugin._job.store import process_of
from tests.support.records import lab

HOSTILE: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a decoded JSON value (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


RECORD = encode(lab(1, {(0, 3): {"power_cap": 500}})[3])
OWN, SHARED = (json.loads(part) for part in RECORD.split("\n", 1))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data(), value=HOSTILE)
def test_any_field_of_a_record_holding_anything_is_read_or_refused(data: st.DataObject, value: Any) -> None:
    own_side = data.draw(st.booleans(), label="side")
    part = OWN if own_side else SHARED
    path = data.draw(st.sampled_from(_paths(part)), label="path")
    changed = json.dumps(_replaced(part, path, value), allow_nan=True)
    text = f"{changed}\n{json.dumps(SHARED)}" if own_side else f"{json.dumps(OWN)}\n{changed}"
    with contextlib.suppress(ValueError):
        decode(text)


def test_records_too_big_or_too_deep_are_refused_before_they_are_parsed() -> None:
    for text in ("[" * 100000 + "]" * 100000, '{"a": "' + "x" * (1 << 20) + '"}', '{"process_id": Infinity}'):
        try:
            decode(f"{text}\n{text}")
        except ValueError as error:
            assert "not a cluster record" in str(error)
        else:
            raise AssertionError("decoded")


@given(st.text(max_size=2000))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_any_text_is_a_verdict_or_refused(text: str) -> None:
    with contextlib.suppress(ValueError):
        Verdict.from_json(text)


def test_a_key_ending_in_a_digit_int_cannot_read_is_no_process() -> None:
    assert process_of("job/1/record/\u00b2") == -1 and process_of("job/1/record/12") == 12


def test_printable_keeps_words_and_drops_controls() -> None:
    assert peer.printable("a\x1b[31mb\u0085c\u2028d") == "a[31mbc\u2028d"


def test_the_hostile_records_that_once_ended_the_check_are_refused() -> None:
    """`"process_id": Infinity` (OverflowError), a GPU's target a list (TypeError): unreadable records, said as such."""
    cases = [
        (True, _replaced(OWN, ("join", "process_id"), float("inf"))),
        (False, _replaced(SHARED, ("gpus", 0, "gfx"), ["a"])),
        (False, _replaced(SHARED, ("shm_bytes",), float("inf"))),
    ]
    for own_side, part in cases:
        changed = json.dumps(part, allow_nan=True)
        text = f"{changed}\n{json.dumps(SHARED)}" if own_side else f"{json.dumps(OWN)}\n{changed}"
        with pytest.raises(ValueError, match="not a cluster record"):
            decode(text)
