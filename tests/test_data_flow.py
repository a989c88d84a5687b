"""``paprof compare`` passes each stage once, in the order data flows (issue 41): read
(resolve the runs, each record read once) -> model (the table and the comparison's
numbers) -> explain (every word, the explanation document) -> render (from the
explanation document and the model's comparison), followed on a real comparison of the
shipped runs (the tests/data copy of examples/h200).
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers import EXAMPLES

from paprof.cli import main
from paprof.explain import finish as finish_module
from paprof.read.record import RunRecord

STAGES = ("read", "model", "explain", "render")
"""The layers a comparison passes, in order; a function's layer is the first package part
under ``paprof`` (``paprof.model.load`` -> model). The shared helpers at the top of the
package, the front ends and ``measure`` are no stage and are not recorded."""

USES = {("model", "read"), ("explain", "model"), ("render", "model")}
"""A stage may call into these earlier layers as part of its own work: the model builds
its table by reading the resolved reports through read's report readers and the metric
catalogue (a report at a time, as ``paprof table`` streams 10,000 of them); the explain
stage and the renderers read the model's numbers (its comparison's data types, their
accessors, the decomposition's terms). Such a call counts as the calling stage's."""

EXCEPTIONS = {
    # The run record is the typed run object the read stage hands on, resolved once:
    # its accessors (a mapping of the parsed sidecar, ``commit_text``) read no file, and
    # every stage reads a field of it (the footer's commit, the verdict's event times).
    "paprof.read.record": ("model", "explain", "render"),
    # The number formats: formatting happens once, in the report's context, with the
    # formats the explanation's sentences use, so that the page and the words print a
    # number alike; they live with the words (``paprof.explain.fmt``).
    "paprof.explain.fmt": ("render",),
}
"""Callee module -> the stages whose calls into it count as their own work."""


def _layer(frame) -> str | None:
    parts = frame.f_globals.get("__name__", "").split(".")
    if parts[0] == "paprof" and len(parts) > 2 and parts[1] in STAGES:
        return parts[1]
    return None


class Flow:
    """The stage of every call into a function of ``STAGES`` (a ``sys.setprofile``
    hook), consecutive repeats collapsed. A call into a later layer, or from the front
    end, is that layer's; a call into an earlier layer from a later stage is the later
    stage's own work when ``USES`` or ``EXCEPTIONS`` allow it, else it is the earlier
    layer's: the way climbs back up. A module's own code running on import (``<module>``)
    is no call of a stage."""

    def __init__(self):
        self.stages: list[str] = []
        self.climbs: list[str] = []
        self._stack: list[tuple[object, str, str]] = []  # (frame, own layer, stage)

    def __call__(self, frame, event, arg):
        if event == "return":
            if self._stack and self._stack[-1][0] is frame:
                self._stack.pop()
            return
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        own = _layer(frame)
        if own is None:
            return
        stage = own
        if self._stack:
            _, caller, caller_stage = self._stack[-1]
            module = frame.f_globals["__name__"]
            if STAGES.index(own) < STAGES.index(caller_stage) and (
                    own == caller or (caller, own) in USES
                    or caller in EXCEPTIONS.get(module, ())):
                stage = caller_stage
            elif STAGES.index(own) < STAGES.index(caller_stage):
                self.climbs.append(f"{module}.{frame.f_code.co_name} from {caller_stage}")
        self._stack.append((frame, own, stage))
        if not self.stages or self.stages[-1] != stage:
            self.stages.append(stage)


def _traced(invoke, *args) -> Flow:
    """The flow of the command ``args``, run once before untraced (so that the modules it
    imports are imported, and their import-time calls are not taken for its stages)."""
    warm = invoke(*args)
    assert warm.exit_code == 0, warm.output
    flow = Flow()
    sys.setprofile(flow)
    try:
        done = invoke(*args)
    finally:
        sys.setprofile(None)
    assert done.exit_code == 0, done.output
    return flow


@pytest.fixture
def invoke():
    from click.testing import CliRunner

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args])
    return run


@pytest.mark.parametrize("outputs", [
    ("--markdown", "r.md", "--json", "r.json", "--force"),
    pytest.param(("--out", "r.html", "--markdown", "r.md"), marks=pytest.mark.slow),  # charts: ~7 s
], ids=["markdown", "html"])
def test_the_way_from_the_cli_to_the_report_passes_each_stage_once(invoke, tmp_path, outputs):
    """The stages of ``paprof compare v2 v3`` writing its reports: read, model, explain,
    render, in that order, never climbing back. Before (issue 41), with the HTML report:
    render read render read explain render explain render ... 32 stages, 15 climbs back
    (the README's eight variants: 122 stages, 60 climbs back)."""
    args = [tmp_path / a if a.startswith("r.") else a for a in outputs]
    flow = _traced(invoke, "compare", "v2", "v3", "--runs", EXAMPLES, *args)
    assert flow.stages == list(STAGES), (flow.stages, flow.climbs[:20])
    assert flow.climbs == []


def test_the_tracer_sees_a_climb_back(invoke, tmp_path, monkeypatch):
    """The check can fail: a renderer that asks the read stage again is a climb."""
    from paprof.read import resolve
    from paprof.render import context

    real = context.build_context

    def asking_again(cmp, *args, **kwargs):
        resolve.spec_items("batch=1")  # any function of the read stage
        return real(cmp, *args, **kwargs)

    monkeypatch.setattr("paprof.render.build.build_context", asking_again)
    flow = _traced(invoke, "compare", "v2", "v3", "--runs", EXAMPLES, "--markdown", tmp_path / "r.md")
    assert flow.stages[-3:] == ["render", "read", "render"]
    assert flow.climbs == ["paprof.read.resolve.spec_items from render"]


def _small_store(tmp_path: Path) -> Path:
    """Three runs of the shipped store, in a store of their own."""
    store = tmp_path / "runs"
    for variant in ("v1", "v2", "v3"):
        folder = Path("nvidia-h200") / "paged_decode" / variant
        shutil.copytree(EXAMPLES / folder, store / folder)
    return store


def test_a_compare_reads_each_sidecar_once(invoke, tmp_path, monkeypatch):
    """The runs ``resolve`` chooses carry their records on: the loader reads no sidecar
    again (each chosen one was read twice before)."""
    store = _small_store(tmp_path)
    reads: Counter = Counter()
    real = RunRecord.read.__func__

    def counted(cls, path):
        reads[Path(path).parent.name] += 1
        return real(cls, path)

    monkeypatch.setattr(RunRecord, "read", classmethod(counted))
    done = invoke("compare", "v2", "v3", "--runs", store, "--markdown", tmp_path / "r.md")
    assert done.exit_code == 0, done.output
    assert reads == {"v1": 1, "v2": 1, "v3": 1}  # the store's scan, and nothing more


def test_a_compare_finishes_its_comparison_once(invoke, tmp_path):
    """The explain stage tells a comparison once; the renderers only read it (the
    report's context finished it a second time before)."""
    calls = []
    code = finish_module.finish.__code__

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls.append(frame.f_locals["cmp"])

    sys.setprofile(hook)
    try:
        done = invoke("compare", "v2", "v3", "--runs", EXAMPLES, "--markdown", tmp_path / "r.md")
    finally:
        sys.setprofile(None)
    assert done.exit_code == 0, done.output
    assert len(calls) == 1 and calls[0].finished
