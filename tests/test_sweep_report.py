"""The sweep report on synthetic stores: crossovers in words, the regime map and its JSON,
HTML and Markdown; profiled points with real H200 reports; the gate on a sweep."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from rich.console import Console

from paprof import registry
from paprof.read import store
from paprof.sweep import grid as G
from paprof.sweep import report as R
from paprof.sweep.run import SweepSettings, VariantOutcome, run_sweep

from helpers import EXAMPLES, FakeRunner, GPU

pytestmark = pytest.mark.lab  # the lab's paged_decode is the sample plugin


QUIET = Console(stderr=True, force_terminal=False, width=200)
# real H200 reports of v5/v6 in fp16 at batch 4 and 64: the shipped profile-mode sweep's
H200 = EXAMPLES.parent / "sweeps" / "h200-profile" / "nvidia-h200" / "paged_decode"


def _bench_sweep(runs, variants=("v5", "v6"), grid=("batch=1,4,16,64", "context=4096,32768"),
                 times=None, shape="dtype=fp16"):
    fam = registry.family("paged_decode")
    g = G.make_grid(fam.params, list(grid), shape)
    runner = FakeRunner(times=times) if times else FakeRunner()
    run_sweep(fam, registry.resolve(list(variants), fam.name), g, runs, runner=runner, gpu_name=GPU,
              console=QUIET)
    return g


def test_crossover_sentences(tmp_path):
    _bench_sweep(tmp_path)
    ctx = R.build_context(R.collect(tmp_path, R.manifests.find(tmp_path)), charts=False)
    assert ctx.changes == [
        "v6 is faster than v5 by 3x below batch 16 at context 4096; from batch 16 on they are within 2 %",
        "v6 is faster than v5 by 3x below batch 16 at context 32768; from batch 16 on they are within 2 %",
    ]
    assert "v6 is faster than v5 by 3x at every context from 4096 to 32768 at batch 1" in ctx.steady
    assert "v5 and v6 are within 2 % at every context from 4096 to 32768 at batch 64" in ctx.steady


def test_three_segments_a_middle_clause_and_the_noise_threshold(tmp_path):
    def times(variant, params):
        ratio = {1: 0.5, 4: 0.9, 16: 1.5, 64: 1.01}[params.batch]
        return 100.0 * (ratio if variant == "v6" else 1.0)

    _bench_sweep(tmp_path, grid=("batch=1,4,16,64",), times=times)
    col = R.collect(tmp_path, R.manifests.find(tmp_path))
    lines = R.crossovers(col.manifest, col.cells)
    assert [ln.sentence for ln in lines] == [
        "v6 is faster than v5 by 1.11x to 2x below batch 16; at batch 16 v5 is faster than v6 by 1.5x; "
        "from batch 64 on they are within 2 %"]
    assert lines[0].crossovers == [{"between": [4, 16], "from": "v6", "to": "v5"},
                                   {"between": [16, 64], "from": "v5", "to": "tie:v5+v6"}]
    wide = R.crossovers(col.manifest, col.cells, noise_pct=15.0)
    assert wide[0].sentence == ("v6 is faster than v5 by 2x below batch 4; at batch 4 they are within 15 %; "
                                "at batch 16 v5 is faster than v6 by 1.5x; from batch 64 on they are within 15 %")


def test_regime_json_for_a_dispatcher(tmp_path):
    g = _bench_sweep(tmp_path)
    col = R.collect(tmp_path, R.manifests.find(tmp_path))
    data = R.regime_json(col, R.crossovers(col.manifest, col.cells))
    assert data["kind"] == "paprof-regime" and data["gpu"] == GPU and data["noise_pct"] == 2.0
    assert [a["key"] for a in data["axes"]] == ["batch", "context"]
    by = {(p["coords"]["batch"], p["coords"]["context"]): p for p in data["points"]}
    assert len(by) == len(g.points) == 8
    assert by[(4, 32768)]["winner"] == "v6" and by[(4, 32768)]["tied"] == ["v6"]
    assert by[(64, 4096)]["winner"] is None and sorted(by[(64, 4096)]["tied"]) == ["v5", "v6"]
    assert set(by[(1, 4096)]["time_us"]) == {"v5", "v6"}
    line = next(ln for ln in data["lines"] if ln["axis"] == "batch" and ln["at"] == {"context": 32768})
    assert line["segments"][0] == {"from": 1, "to": 4, "winner": "v6", "tied": ["v6"]}
    json.dumps(data)


def test_html_markdown_and_json_written(tmp_path, monkeypatch):
    _bench_sweep(tmp_path / "runs", variants=("v3", "v5", "v6"))
    out = tmp_path / "sweep.html"
    done = R.write_sweep_report(tmp_path / "runs", out, tmp_path / "sweep.md", generated="now")
    html = out.read_text()
    assert html.startswith("<!doctype html>") and '<meta name="generator" content="paprof' in html
    assert html.count("data:image/svg+xml;base64,") == 6  # batch at 2 contexts, context at 4 batches
    assert "v6 is faster than v5 by 3x below batch 16 at context 32768" in html
    assert "http://" not in html.replace("http://www.w3.org", "") and "<script" not in html
    assert ".badge.dram-bound" in html  # the compare report's stylesheet
    md = (tmp_path / "sweep.md").read_text()
    assert md.startswith("<!-- paprof report") and "| batch \\ context | 4096 | 32768 |" in md
    assert "v3 at batch 1, context 4096: skipped (v3 reads fp32 K/V only" in md
    assert done.regime == tmp_path / "sweep.regime.json"
    assert json.loads(done.regime.read_text())["kind"] == "paprof-regime"
    monkeypatch.setattr(R, "MAX_CHARTS", 1)  # the charts are the cost; replacing is the point
    again = R.write_sweep_report(tmp_path / "runs", out, tmp_path / "sweep.md")
    assert set(again.overwrote) == {out, tmp_path / "sweep.md", done.regime}
    other = tmp_path / "mine.html"
    other.write_text("keep me")
    with pytest.raises(R.UserError, match="not a paprof report"):
        R.write_sweep_report(tmp_path / "runs", other)


def test_missing_shards_are_a_warning(tmp_path):
    fam = registry.family("paged_decode")
    g = G.make_grid(fam.params, ["batch=1,4,16,64"], "dtype=fp16")
    run_sweep(fam, registry.resolve(["v5", "v6"], fam.name), g, tmp_path, shard=(1, 2), runner=FakeRunner(),
              gpu_name=GPU, console=QUIET)
    col = R.collect(tmp_path, R.manifests.find(tmp_path))
    assert any("4 variant-point(s) have no result" in w and "1/2" in w for w in col.warnings)
    ctx = R.build_context(col, charts=False)
    assert ctx.regime[0].rows[1][1][0].winner == "not measured"


# -- profiled points: real H200 reports under edited sidecars ----------------------------

SOURCES = {("v5", 4): "b4_ctx16384_h32x8_d128_p16_fp16", ("v6", 4): "b4_ctx16384_h32x8_d128_p16_fp16",
           ("v5", 64): "b64_ctx4096_h32x8_d128_p16_fp16", ("v6", 64): "b64_ctx4096_h32x8_d128_p16_fp16"}


def fake_profile(swap=None):
    """A profile-mode runner that stores a real H200 report per variant; ``swap`` maps a
    (variant, batch) to the variant whose report to store instead (a regression)."""
    swap = swap or {}

    def runner(family, variants, params, runs, settings, say):
        out = []
        for v in variants:
            source_variant = swap.get((v.id, params.batch), v.id)
            slug = SOURCES[(source_variant, params.batch)]
            paths = store.run_paths(runs, "nvidia-h200", family.name, v.id, params.slug())
            paths.folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(H200 / source_variant / f"{slug}.ncu-rep", paths.report)
            side = json.loads((H200 / source_variant / f"{slug}.json").read_text())
            side.update(variant=v.id, shape=params.spec(), shape_slug=params.slug(),
                        params=params.to_dict(), work=family.work(params).to_dict(), schema=2)
            side.pop("shape_fields", None)
            paths.sidecar.write_text(json.dumps(side))
            out.append(VariantOutcome(v.id, "done", result=paths.report))
        return out

    return runner


def _profile_sweep(runs, swap=None):
    fam = registry.family("paged_decode")
    g = G.make_grid(fam.params, ["batch=4,64"], "context=32768,dtype=fp16")
    run_sweep(fam, registry.resolve(["v5", "v6"], fam.name), g, runs, SweepSettings(mode="profile"),
              runner=fake_profile(swap), gpu_name=GPU, console=QUIET)


def test_profiled_sweep_has_bottlenecks_and_ncu_durations(tmp_path):
    _profile_sweep(tmp_path)
    col = R.collect(tmp_path, R.manifests.find(tmp_path))
    cells = col.cells[0]
    assert cells["v5"].bottleneck and cells["v6"].bottleneck
    assert cells["v6"].time_us < cells["v5"].time_us  # v6 splits the KV at batch 4
    assert cells["v5"].tbs and 0 < cells["v5"].pct_ceiling < 120
    ctx = R.build_context(col, charts=False)
    assert ctx.time_label == "duration under ncu"
    assert ctx.changes and ctx.changes[0].startswith("v6 is faster than v5 by")
    badges = ctx.regime[0].rows[0][1][0].bottlenecks
    assert [v for v, _ in badges] == ["v5", "v6"]
    md = R.render_markdown(ctx)
    assert cells["v5"].bottleneck in md


def test_a_reports_medians_and_label_over_its_rows():
    """A step of several kernels: each report's medians skip the missing values, its label
    is the most common one (the first seen among equals); blank and NaN labels are none."""
    import math

    import pandas as pd

    from paprof.sweep import regime

    nan = math.nan
    rows = pd.DataFrame({"report_path": ["a"] * 4 + ["b"] * 2 + ["c"],
                         "duration_us": [1.0, 2.0, nan, 4.0, nan, nan, 7.0],
                         "work_tbs": [1.0, 5.0, 3.0, 2.0, 1.0, 3.0, float("inf")],
                         "bottleneck": ["dram", "l2", "l2", "dram", nan, "", "x"]})
    medians, labels = regime._per_report(rows)
    assert medians == {"a": (2.0, 2.5, None), "b": (None, 2.0, None), "c": (7.0, math.inf, None)}
    assert labels == {"a": "dram", "b": None, "c": "x"}


def test_outputs_are_checked_against_the_stores_files_only_when_they_exist(tmp_path, monkeypatch):
    """The store's JSON files are walked to refuse an output that is one of them (a hard
    link of the manifest, even with --force), not for an output that does not exist yet."""
    import os
    from pathlib import Path

    _profile_sweep(tmp_path / "runs")
    walked = []
    rglob = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: walked.append(pattern) or rglob(self, pattern))
    R.write_sweep_report(tmp_path / "runs", tmp_path / "new.html")
    assert walked == []
    manifest = next((tmp_path / "runs" / "sweeps").glob("*.json"))
    os.link(manifest, tmp_path / "linked.html")
    with pytest.raises(R.UserError, match="one of this command's inputs"):
        R.write_sweep_report(tmp_path / "runs", tmp_path / "linked.html", force=True)
    assert walked == ["*.json"]


def test_the_gate_on_a_sweep_names_the_point(tmp_path, monkeypatch):
    from paprof.cli import main

    _profile_sweep(tmp_path / "before")
    _profile_sweep(tmp_path / "after", swap={("v6", 4): "v5"})  # v6 at batch 4 got v5's speed
    cli = CliRunner()
    made = cli.invoke(main, ["baseline", "update", "--runs", str(tmp_path / "before"),
                             "--metric", "duration_us", "--out", str(tmp_path / "base.json")])
    assert made.exit_code == 0, made.output
    assert "(4 entries)" in made.output
    checked = cli.invoke(main, ["check", "--baseline", str(tmp_path / "base.json"),
                                "--runs", str(tmp_path / "after")])
    assert checked.exit_code == 1, checked.output
    regressions = [ln for ln in checked.output.splitlines() if ln.startswith("REGRESSION")]
    assert len(regressions) == 1
    assert "paged_decode/v6 duration_us" in regressions[0] and "batch=4," in regressions[0]
    assert "context=32768" in regressions[0]
