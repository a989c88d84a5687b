"""A fast reader's result's metrics taken in one pass (``load._decoded``) are the values
and errors of the loop by metric it stands in for (issue 40)."""

from __future__ import annotations

import math

import pytest

from paprof.model import load
from paprof.read import metrics as M
from paprof.read.ncu_fastread import FastResult

NAMES = [e.ncu_name for e in M.MEASURED]
SCALED = next(e.ncu_name for e in M.MEASURED if not e.text and e.scale != 1)
TEXT = next(e.ncu_name for e in M.MEASURED if e.text)
OTHER = next(e.ncu_name for e in M.MEASURED if not e.text and e.scale == 1)
ASKED = frozenset(NAMES) | {M.OPCODE_METRIC}


def _result(**changes) -> FastResult:
    values = {name: float(i) + 0.5 for i, name in enumerate(NAMES)}
    values[TEXT] = "NVIDIA H200"
    asked = set(ASKED)
    for name, value in changes.items():
        name = {"scaled": SCALED, "text": TEXT, "other": OTHER}[name]
        if value == "not asked":
            values.pop(name)
            asked.discard(name)
        elif value is None:
            values.pop(name)
        else:
            values[name] = value
    return FastResult("k", values, [], frozenset(asked))


def _by_metric(result, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(load, "_decoded", lambda action, entries: None)
        return load._metrics(result, M.MEASURED)


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(
        type(a[k]) is type(b[k]) and (a[k] == b[k] or a[k] != a[k] and b[k] != b[k])
        for k in a)


@pytest.mark.parametrize("changes", [
    {}, {"scaled": None}, {"text": None}, {"other": None}, {"scaled": math.nan},
    {"scaled": 7}, {"other": 3}, {"scaled": True}, {"other": -0.0}, {"scaled": math.inf},
])
def test_one_pass_gives_the_loops_values(changes, monkeypatch):
    result = _result(**changes)
    fast = load._metrics(result, M.MEASURED)
    assert _same(fast, _by_metric(result, monkeypatch))
    if not changes:
        assert load._decoded(result, M.MEASURED) is not None  # the pass was taken


@pytest.mark.parametrize("changes", [{"other": "text"}, {"text": 1.0}, {"scaled": "not asked"},
                                     {"text": "not asked"}])
def test_one_pass_raises_the_loops_error(changes, monkeypatch):
    result = _result(**changes)
    with pytest.raises(KeyError) as slow:
        _by_metric(result, monkeypatch)
    with pytest.raises(KeyError) as fast:
        load._metrics(result, M.MEASURED)
    assert str(fast.value) == str(slow.value)
