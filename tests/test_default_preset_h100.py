"""The default preset on real runs (issue 40): the same kernels profiled with the default
and with every section whole (``tables``) tell every step in the same words.

Recorded on the device tool's H100 80GB (ncu 2025.3.1, driver 580.159.04, `--clock-control
none`, 2026-12-07, `scripts/device_presets.sh` at commit 0c79191): `paprof run --family
paged_decode --variant all` with every section whole (``tables/``; its sidecars say
``default``, the name of that set then), then with the default's sections and metrics
(``default/``; its sidecars say ``lean``, the name of this set then), one after the other on
one machine. Each report is read and explained by today's code.

Numbers are not compared (two runs of one kernel differ in their last digits, and ncu's
estimates by a few tenths of a percent): every cause, limit and next-move line must name
the same things in the same order, which is where a preset that lacks what a line reads
shows (a term falls back, a rule's estimate goes or is scaled otherwise)."""

from __future__ import annotations

import json
import re

import pytest

from paprof.measure.presets import get_preset

from helpers import DATA, unpacked

CHAIN = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6", "v7"]
NUMBER = re.compile(r"[-+]?\d[\d,.]*\s*(?:[kMGT]?B(?:/s)?|[kMG]\b|us|ms|%|x\b)?")


def _lines(store) -> list[tuple]:
    from paprof.api import write_report

    steps = write_report(CHAIN, runs=store, out=None, markdown=None).comparison.steps
    return [(s.before, s.after) + tuple(NUMBER.sub("#", text or "") for text in (s.cause, s.limit, s.next_move))
            for s in steps]


@pytest.fixture(scope="module")
def root():
    return unpacked(DATA / "presets-h100.tar.xz")


def _argv(store) -> list[str]:
    """What the store's v3 run asked ncu to collect: its ``--section`` and ``--metrics``."""
    command = json.loads(next(store.rglob("v3/*.json")).read_text())["command"]
    return [a for i, a in enumerate(command)
            if a in ("--section", "--metrics") or command[i - 1] in ("--section", "--metrics")]


def test_the_stores_are_todays_default_and_tables(root):
    """If the default changes, these runs no longer stand for it: record them again."""
    assert _argv(root / "default") == get_preset("default").ncu_args()
    assert _argv(root / "tables") == get_preset("tables").ncu_args()


def test_the_default_tells_every_step_in_the_words_of_every_section_whole(root):
    tables, default = _lines(root / "tables"), _lines(root / "default")
    assert len(tables) == len(CHAIN) - 1 and all(line[2] and line[3] and line[4] for line in tables)
    for was, now in zip(tables, default):
        assert now == was, f"{was[0]} -> {was[1]}"


def test_the_comparison_can_tell_the_steps_apart(root):
    """The check above compares lines that differ between steps (it would notice a store
    whose steps all read alike), and numbers are all it leaves out."""
    tables = _lines(root / "tables")
    assert len({line[2] for line in tables}) >= 6 and len({line[3] for line in tables}) >= 4
    assert "Issue Slot Utilization, up to # of its time" in tables[-1][4]
