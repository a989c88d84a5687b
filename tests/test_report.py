"""The report's context, HTML and Markdown, from synthetic frames (see test_compare.py),
plus ``write_report`` / ``paprof compare`` wiring with the loader stubbed out."""

from __future__ import annotations

import base64
import re

import pytest
from click.testing import CliRunner

from paprof.model import analysis
from paprof.cli import main
from paprof.errors import UserError
from paprof import api
from paprof.render.context import build_context
from paprof.render.html import render_html
from paprof.render.markdown import md_escape, render_markdown
from helpers import ROOT, SIDE, V3, comparison, make_frame, make_row, recorded, split_rows

EVIL = "<script>alert('x')</script>"


@pytest.fixture(scope="module")
def cmp():
    rows = [make_row("v2"), make_row("v3", **V3), *split_rows("v4")]
    rows[1]["rules"] = [{"id": "DRAMBound", "title": "DRAM Bound", "type": "WARNING",
                         "message": "DRAM is busy", "speedup_pct": 12.0}]
    return comparison(*rows)


@pytest.fixture(scope="module")
def ctx(cmp):
    return build_context(cmp, generated="2026-11-29 14:00 UTC")


# -- the context ---------------------------------------------------------------------------
def test_context_holds_variants_steps_and_raw_values(ctx):
    assert ctx.labels == ["v2", "v3", "v4"]
    assert ctx.title == "paprof: v2 -> v3 -> v4"
    assert [s.title for s in ctx.steps] == ["v2 -> v3", "v3 -> v4"]
    assert ctx.steps[0].verdict == "faster" and ctx.steps[1].verdict == "slower"
    assert ctx.steps[0].bottleneck_after_text == "dram-bound"
    assert ctx.raw["v3"]["duration_us"] == 3350.0
    assert ctx.raw["v4"]["duration_us"] == pytest.approx(3942.6)
    assert ctx.summary == "Fastest: v3 (3.35 ms, dram-bound), 1.48x faster than v2."
    rows = {r.label: r for r in ctx.verdict.rows}
    assert rows["v2"].speedup == "baseline" and rows["v4"].speedup == "1.26x faster"
    assert rows["v3"].fastest and not rows["v4"].fastest and not rows["v3"].tie


def test_table_cells_keep_raw_value_text_and_delta(ctx):
    row = ctx.row("duration_us")
    assert [c.value for c in row.cells][:2] == [4950.0, 3350.0]
    assert [c.text for c in row.cells] == ["4.95 ms", "3.35 ms", "3.94 ms"]
    assert row.cells[1].delta == pytest.approx(3350 / 4950 - 1)
    assert row.cells[1].delta_text == "-32.3 %" and row.cells[1].trend == "better"
    assert row.cells[2].trend == "worse"
    dram = ctx.row("dram_throughput_pct")
    assert dram.cells[1].text == "84.9 %" and dram.cells[1].delta_text == "+27.5 pts"
    assert dram.cells[1].trend == "moved"
    grid = ctx.row("grid_size")
    assert [c.text for c in grid.cells] == ["2,048", "512", "8,192"]
    assert grid.cells[2].delta_text == "+1,500 %"
    assert ctx.row("limited_by").cells[1].text == "shared mem"
    assert ctx.row("limited_by").cells[1].delta_text == "changed"
    assert ctx.row("speedup_prev").cells[1].text == "1.48x"
    assert ctx.row("bandwidth_of_ceiling_pct").cells[1].value == pytest.approx(
        2.147e9 / 3350e-6 / 1e9 / 4530 * 100)
    assert ctx.row("shared_mem_per_block_bytes").cells[1].text == "16 KiB"
    assert "Registers allocated per thread" == ctx.row("registers_per_thread").meaning


def test_every_issue_metric_is_in_the_table(ctx):
    keys = {r.key for s in ctx.table for r in s.rows}
    for key in ("duration_us", "speedup_prev", "sm_throughput_pct", "memory_throughput_pct",
                "dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct",
                "dram_active_cycles", "dram_bytes", "achieved_bandwidth_gbs",
                "theoretical_occupancy_pct", "achieved_occupancy_pct", "limited_by",
                "registers_per_thread", "shared_mem_per_block_bytes", "block_limit_registers",
                "block_limit_shared_mem", "block_limit_warps", "block_limit_blocks",
                "waves_per_sm", "grid_size", "block_size"):
        assert key in keys


def test_split_variant_lists_its_kernels(ctx):
    v4 = ctx.variants[2]
    assert v4.multi_kernel
    assert [k.name for k in v4.kernels] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert [k.share_text for k in v4.kernels] == ["99.4 %", "0.6 %"]


def test_rule_changes_reach_the_context(ctx):
    rules = ctx.steps[0].rules
    assert [(r.kind, r.title, r.before, r.after) for r in rules] == [
        ("appeared", "DRAM Bound", "absent", "12 %")]
    assert [(r.kind, r.title) for r in ctx.steps[1].rules] == [("disappeared", "DRAM Bound")]


def test_charts_as_png_data(ctx):
    assert [c.id for c in ctx.charts] == ["speed-of-light", "duration", "bandwidth", "occupancy", "ledger"]
    for chart in ctx.charts:
        assert chart.uri.startswith("data:image/png;base64,")
        png = base64.b64decode(chart.uri.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert chart.width > 0 and chart.height > 0
        assert chart.alt


def test_charts_leave_matplotlib_global_state_alone(cmp):
    import matplotlib

    before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
    build_context(cmp)
    assert (matplotlib.get_backend(), dict(matplotlib.rcParams)) == before


def test_charts_never_import_pyplot():
    import subprocess
    import sys

    code = ("import sys; from paprof.render import charts; "
            "c = charts.occupancy(['a', 'b'], [50, 40], [30, 35], ['regs', 'smem']); "
            "print(c.width > 0, 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_provenance_common_fields_and_no_warning(ctx):
    common = dict(ctx.provenance.common)
    assert common["GPU"] == "NVIDIA H200"
    assert common["ncu"] == "2025.3.1.0"
    assert common["Clock control"] == "none"
    assert common["Profiled"] == "2026-11-29"
    assert [k for k, _ in ctx.provenance.varying] == ["date", "git_commit", "verified", "report"]
    assert ctx.warnings == []
    assert ctx.ceiling_text.startswith("Bandwidth ceiling: 4.53 TB/s (measured")


# -- HTML ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def html(ctx):
    return render_html(ctx)


def test_html_has_the_story_the_table_and_the_charts(html):
    assert "<title>paprof: v2 -&gt; v3 -&gt; v4</title>" in html
    # the step's story; its table-row sentences only as rows of the side-by-side table
    assert "DRAM throughput 57.4 % -&gt; 84.9 %: the kernel is now dram-bound" not in html
    assert "theoretical occupancy 50 % -&gt; 41.7 %" not in html
    assert 'data-key="dram_throughput_pct"' in html and 'data-key="theoretical_occupancy_pct"' in html
    assert "is a row of the side-by-side table" in html
    assert html.count('<img class="chart"') == 5  # four, and the time ledger
    assert 'data-key="achieved_bandwidth_gbs"' in html
    assert "sum of 2 kernels" in html
    assert "@media print" in html
    assert '<meta name="generator" content="paprof' in html


def test_html_is_self_contained(html):
    for m in re.finditer(r'\b(?:src|href)="([^"]*)"', html):
        assert m.group(1).startswith(("data:", "#")), m.group(0)[:80]
    assert "http://" not in html and "https://" not in html
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in html


def test_html_autoescapes_names():
    rows = [make_row("v2", kernel=EVIL), make_row("v3", **V3)]
    rows[0]["variant"] = rows[0]["sidecar"]["variant"] = "v2<b>"
    text = render_html(build_context(comparison(*rows), charts=False))
    assert EVIL not in text and "<b>" not in text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in text.replace("<wbr>", "")
    assert text.count("<script>") == 1  # ours: the chart check


def test_mismatched_provenance_shows_a_warning_box():
    other = dict(SIDE, variant="v3", gpu="NVIDIA H100 80GB HBM3", clock_control="base")
    ctx = build_context(comparison(make_row("v2"), make_row("v3", sidecar=other, **V3), cross=True),
                        charts=False)
    assert len(ctx.warnings) == 2
    text = render_html(ctx)
    assert 'class="warnings"' in text and 'role="alert"' in text
    assert "Profiled with different GPUs" in text and "Profiled with different clock settings" in text
    md = render_markdown(ctx)
    assert "> **Warning:** Profiled with different GPUs" in md


# -- Markdown ------------------------------------------------------------------------------
def test_markdown_has_the_same_content(ctx):
    md = render_markdown(ctx)
    assert md.startswith("<!-- paprof report")
    assert "### v2 → v3: v3 is 1.48x faster than v2" in md
    assert "Bottleneck: **latency-bound** → **dram-bound**" in md
    assert "- theoretical occupancy 50 % -> 41.7 %, now limited by shared memory (5 blocks per SM)" in md
    assert "| Duration (ncu) | 4.95 ms | 3.35 ms (-32.3 %) | 3.94 ms (+17.7 %) |" in md
    assert "| DRAM Bound | appeared | absent | 12 % |" in md
    assert "v4 is the sum of 2 kernels: paged\\_decode\\_v4\\_partial 3.92 ms (99.4 %)" in md
    assert "<details><summary>Provenance</summary>" in md
    assert "\n\n\n" not in md
    # every table row has as many cells as the header
    ledger = md[md.index("### Time ledger"):md.index("### Side by side")]
    assert "| v2 -> v3 | **-1.6 ms** |" in ledger
    widths = {line.count("|") for line in md.replace(ledger, "").splitlines() if line.startswith("| ") and "Metric" not in line
              and "ncu rule" not in line and "DRAM Bound" not in line and "Variant" not in line
              and not line.startswith("| v")}
    # 7: a step's kernel view (a kernel and its time each side, launches, status); 8: the verdict
    assert widths <= {5, 7, 8}
    assert "| **v3** | 3.35 ms |" in md and "| v4 | 3.94 ms |" in md
    kernel_tables = md.split(" time | launches | |\n")[1:]
    assert kernel_tables  # v4 runs two kernels
    for table in kernel_tables:
        rows = [l for l in table.split("\n\n")[0].splitlines() if l.startswith("|")]
        assert rows and {r.count("|") for r in rows} == {7}


def test_markdown_escapes_names():
    assert md_escape(EVIL) == "\\<script\\>alert('x')\\</script\\>".replace("\\>", ">")
    assert md_escape("a|b_c*d`e[f]") == "a\\|b\\_c\\*d\\`e\\[f\\]"
    assert md_escape("two\nlines") == "two lines"


# -- write_report and the CLI, with the loader stubbed ----------------------------------------
@pytest.fixture
def reports(tmp_path, monkeypatch):
    """Two report files (empty: the stub loader never opens them) and a loader stub."""
    paths = []
    rows = []
    for vid, metrics in (("v2", {}), ("v3", V3)):
        p = tmp_path / f"{vid}.ncu-rep"
        p.write_bytes(b"NVR\0")
        paths.append(p)
        rows.append(make_row(vid, report=str(p), **metrics))
    frame = make_frame(*rows)

    def fake_load(given, step_range=None):
        assert [str(g.report) for g in given] == [str(p) for p in paths]  # resolved runs
        return frame.copy()

    monkeypatch.setattr(analysis, "load_reports", fake_load)
    return paths


def test_write_report_writes_html_and_markdown(reports, tmp_path):
    out, md = tmp_path / "r.html", tmp_path / "r.md"
    result = api.write_report([str(p) for p in reports], out=out, markdown=md,
                                generated="2026-11-29 14:00 UTC")
    assert result.html == out and result.markdown == md and result.overwrote == []
    assert out.read_text().startswith("<!doctype html>")
    assert md.read_text().startswith("<!-- paprof report")
    assert set(result.timings) >= {"resolve", "load", "compare", "context", "render", "total"}
    # re-running replaces our own report and says so
    again = api.write_report([str(p) for p in reports], out=out, markdown=md)
    assert again.overwrote == [out, md]


def test_write_report_refuses_a_foreign_file(reports, tmp_path):
    out = tmp_path / "notes.html"
    out.write_text("<html>my notes</html>")
    with pytest.raises(UserError, match="exists and is not a paprof report"):
        api.write_report([str(p) for p in reports], out=out)
    assert out.read_text() == "<html>my notes</html>"
    result = api.write_report([str(p) for p in reports], out=out, force=True)
    assert result.overwrote == [out]


def test_markdown_to_stdout(reports, tmp_path):
    result = api.write_report([str(p) for p in reports], out=None, markdown="-")
    assert result.html is None and result.markdown is None
    assert result.markdown_text.startswith("<!-- paprof report")
    assert result.context.charts == []  # no HTML, no matplotlib


def test_cli_compare_prints_steps_and_the_file(reports, tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["compare", *map(str, reports), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "v2 -> v3: v3 is 1.48x faster than v2; latency-bound -> dram-bound\n  DRAM throughput rises " in res.output
    assert f"wrote {out}\n" in res.output
    res = CliRunner().invoke(main, ["compare", *map(str, reports), "--out", str(out)])
    assert f"wrote {out} (replaced the earlier paprof report there)" in res.output


def test_cli_open_uses_webbrowser(reports, tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["compare", *map(str, reports), "--out", str(out), "--open"])
    assert res.exit_code == 0, res.output
    assert opened == [out.resolve().as_uri()]
    assert "warning" not in res.stderr


@pytest.mark.parametrize("no_browser", ["returns False", "raises"])
def test_cli_open_without_a_browser_says_so(reports, tmp_path, monkeypatch, no_browser):
    import webbrowser

    def fail(url):
        if no_browser == "raises":
            raise webbrowser.Error("could not locate runnable browser")
        return False

    monkeypatch.setattr("webbrowser.open", fail)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["compare", *map(str, reports), "--out", str(out), "--open"])
    assert res.exit_code == 0, res.output  # the report is written; only opening failed
    assert res.stderr.splitlines() == [
        f"paprof: warning: --open: no web browser found on this machine; open {out} yourself"]


@pytest.mark.parametrize("args,message", [
    (["v2"], "compare needs at least 2 variants, got 1"),
    (["missing.ncu-rep", "other.ncu-rep"], "no such report: missing.ncu-rep"),
    (["v2", "v3", "--runs", "no-such-runs"], "no such run store or report: no-such-runs"),
])
def test_cli_errors_are_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["compare", *args])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert lines[-1].startswith(f"paprof: error: {message}")
    assert len([x for x in lines if x.startswith("paprof: error:")]) == 1
    assert "Traceback" not in res.output


def test_unknown_variant_id_names_what_the_store_holds(tmp_path):
    folder = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / "v2"
    folder.mkdir(parents=True)
    (folder / "b64.ncu-rep").write_bytes(b"NVR\0")
    res = CliRunner().invoke(main, ["compare", "v2", "v9", "--runs", str(tmp_path / "runs")])
    assert res.exit_code == 2
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("paprof: error: no run of v9") and "paged_decode/v2" in line


def test_cli_no_variants_is_a_usage_error():
    res = CliRunner().invoke(main, ["compare"])
    assert res.exit_code == 2


def test_same_report_twice_is_refused(reports):
    with pytest.raises(UserError, match="name the same report"):
        api.resolve_variants([str(reports[0]), str(reports[0])])


def test_rows_no_variant_has_are_left_out_and_named(ctx):
    assert "Duration (CUDA events, no profiler)" in ctx.absent
    with pytest.raises(KeyError):
        ctx.row("duration_us_event")
    timed = [make_row("v2", sidecar=dict(SIDE, variant="v2", duration_us_event=4800.0)), make_row("v3", **V3)]
    ctx2 = build_context(comparison(*timed), charts=False)
    assert [c.text for c in ctx2.row("duration_us_event").cells] == ["4.8 ms", "n/a"]


def test_kernel_names_break_at_identifier_boundaries_only():
    from paprof.explain import fmt
    from paprof.render.html import word_breaks

    name = "void flashinfer::BatchDecodeWithPagedKVCacheKernel<true, 128>(Params)"
    html = str(word_breaks(name))
    pieces = [p for w in html.split(" ") for p in w.split("<wbr>")]
    assert "flashinfer::" in pieces and "Batch" in pieces and "Decode" in pieces
    assert html.replace("<wbr>", "") == str(word_breaks(name)).replace("<wbr>", "")
    assert str(word_breaks("paged_decode_v4_merge")) == "paged_<wbr>decode_<wbr>v4_<wbr>merge"
    assert str(word_breaks("ms -> 1.11 ms")) == "ms -&gt; 1.11 ms"  # short words as they are
    short = fmt.shorten_identifier("paged_decode_v6_nosplit_with_a_long_tail", 25)
    assert short == "paged_decode_v6_nosplit_…"
    assert fmt.shorten_identifier("paged_decode_v6", 40) == "paged_decode_v6"


def test_a_row_has_one_unit_for_its_changes():
    ctx = build_context(comparison(make_row("v2"), make_row("v3", **V3), *split_rows("v4")), charts=False)
    for section in ctx.table:
        for row in section.rows:
            units = {("x" if c.delta_text.endswith("x") else c.delta_text.split(" ")[-1])
                     for c in row.cells if c.delta_text and c.delta_text not in ("=", "new", "changed")}
            assert len(units) <= 1, (row.key, units)


def test_the_stall_breakdown_names_the_top_reasons_and_groups_the_rest():
    from paprof.read.metrics import STALL_REASONS

    stalls = {f"stall_{r}": 0.1 * (i + 1) for i, r in enumerate(STALL_REASONS)}
    ctx = build_context(comparison(make_row("v2", **stalls), make_row("v3", **dict(V3, **stalls))), charts=False)
    view = ctx.stalls
    assert len(view.reasons) == 6 and view.reasons[-1] == "other"
    assert "selected" not in view.reasons  # issuing, not a stall
    assert view.reasons[0] == STALL_REASONS[-1].replace("_", " ")  # the largest first
    total = sum(v for k, v in stalls.items() if k != "stall_selected")
    assert view.totals["v2"] == pytest.approx(total)
    assert sum(view.values["v2"]) == pytest.approx(total)
    md = render_markdown(ctx)
    assert "### Warp stalls (cycles per issued instruction)" in md and "| all stalls |" in md


def test_no_stall_counters_no_stall_breakdown():
    ctx = build_context(comparison(make_row("v2"), make_row("v3", **V3)), charts=False)
    assert ctx.stalls is None and "Warp stalls" not in render_markdown(ctx)


# -- the verdict and the chosen baseline ---------------------------------------------------
H200 = recorded("h200")


def test_the_tie_rule_is_one_constant_shared_with_the_sweep_report():
    from paprof.explain import verdict
    from paprof.sweep import report as sweep_report

    assert sweep_report.NOISE_PCT is verdict.NOISE_PCT
    assert verdict.tied([(495.4, "v5"), (496.4, "v6"), (1106.0, "v3")]) == ("v5", "v6")
    assert verdict.tied([(100.0, "a"), (103.0, "b")]) == ("a",)
    assert verdict.tied([]) == ()


def test_against_an_unknown_label_is_a_user_error(cmp):
    from paprof.explain.verdict import against

    with pytest.raises(UserError, match="--baseline v9: not among"):
        against(cmp, "v9")


def test_against_tells_every_variant_against_the_baseline(cmp):
    from paprof.explain.verdict import against, is_star

    star = against(cmp, "v3")
    assert [v.label for v in star.variants] == ["v3", "v2", "v4"]
    assert [(s.before, s.after) for s in star.steps] == [("v3", "v2"), ("v3", "v4")]
    assert is_star(star) and not is_star(cmp)
    ctx = build_context(star, charts=False)
    assert ctx.star and ctx.title == "paprof: v2, v4 against v3"
    # the side-by-side deltas are against the baseline, not the variant to the left
    dur = ctx.row("duration_us")
    assert dur.cells[0].delta_text == ""
    assert dur.cells[2].delta == pytest.approx(3942.6 / 3350.0 - 1)


def test_cli_baseline_compares_each_variant_with_it(tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["compare", "--baseline", "v2", "v3", "v4", "v5",
                                    "--runs", str(H200), "--out", str(out)])
    assert res.exit_code == 0, res.output
    heads = [line.split(":")[0] for line in res.output.splitlines() if not line.startswith((" ", "wrote"))]
    assert heads == ["v2 -> v3", "v2 -> v4", "v2 -> v5"]
    html = out.read_text()
    assert "Verdict: every variant against v2" in html and "Each variant against v2" in html
    # unknown baseline: one line, exit 2
    res = CliRunner().invoke(main, ["compare", "--baseline", "v9", "v3", "--runs", str(H200),
                                    "--out", str(tmp_path / "x.html")])
    assert res.exit_code == 2 and "Traceback" not in res.output


MLP = ROOT / "examples" / "mlp" / "runs.tar.xz"


@pytest.mark.skipif(not MLP.is_file(), reason="examples/mlp runs not there")
def test_whole_program_verdict_names_the_fused_kernels(tmp_path):
    import tarfile

    with tarfile.open(MLP) as tar:
        tar.extractall(tmp_path, filter="data")
    res = api.write_report(["eager", "compiled"], runs=tmp_path / "runs", out=tmp_path / "r.html")
    rows = {r.label: r for r in res.context.verdict.rows}
    assert rows["eager"].time.endswith("(3 steps)") and " ± " in rows["eager"].time
    assert rows["compiled"].cause.startswith("4 kernels fused into 2 (") and "triton_" in rows["compiled"].cause
    assert "round trip through DRAM is gone (DRAM bytes 2.43 GB -> 796 MB" in rows["compiled"].cause
    assert rows["compiled"].verified == "not verified" and rows["compiled"].events == "n/a"
    assert 'class="verdict"' in (tmp_path / "r.html").read_text()


def test_column_headers_name_kernels_by_whole_identifier_parts():
    from paprof.explain.fmt import identifier_tail

    assert identifier_tail("paged_decode_v4_partial", 18) == "…decode_v4_partial"
    assert identifier_tail("short", 18) == "short"
    assert identifier_tail("x" * 40, 18) == "x" * 40  # no boundary: whole, never cut inside


def test_a_compute_family_gets_pipe_utilisation_not_dram_bars():
    from paprof.explain.series import compute_family

    fam = [("a", 1.2, 37.4), ("b", 2.1, 56.5), ("c", 3.5, 76.8)]
    rows = [make_row(v, dram_throughput_pct=d, tensor_pipe_pct=t) for v, d, t in fam]
    cmp = comparison(*rows)
    assert compute_family(cmp)
    ctx = build_context(cmp)
    ids = [c.id for c in ctx.charts]
    assert "pipes" in ids and "bandwidth" not in ids
    memory = comparison(make_row("v2"), make_row("v3", **V3))
    assert not compute_family(memory)


def test_the_roofline_axis_fits_its_points_and_names_the_far_ones():
    from paprof.render import charts

    roofs = [("dram", "DRAM", "memory", 4.5e12, "measured"), ("tensor", "Tensor", "compute", 7.3e14, "measured")]
    points = [("mma", "dram", 4000.0, 2.4e14), ("mma", "l1", 912203.0, 2.4e14)]
    chart = charts.roofline(["mma"], roofs, points, {"dram": "DRAM", "l1": "L1/shared"})
    assert "beyond the axis: mma L1/shared at 912,203 FLOP/byte" in chart.caption
    assert "912,203" not in charts.roofline(["mma"], roofs, points[:1], {"dram": "DRAM"}).caption


def _text_overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of drawn, unrotated texts of ``fig`` whose boxes overlap by more than a pixel
    each way (a slanted label's axis-aligned box is not its outline: left out)."""
    fig.canvas.draw()  # lays out the legends and the ticks as the PNG shows them
    renderer = fig.canvas.get_renderer()
    boxes, seen = [], set()
    for t in fig.findobj(lambda o: o.__class__.__name__ in ("Text", "Annotation")):
        if id(t) in seen or not t.get_visible() or not t.get_text().strip() or t.get_rotation() % 180:
            continue
        seen.add(id(t))
        boxes.append((t.get_text(), t.get_window_extent(renderer)))
    bad = []
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            if ta == tb and a.bounds == b.bounds:
                continue  # the same glyphs drawn twice look like one
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1:
                bad.append((ta, tb))
    return bad


@pytest.mark.parametrize("runs,variants", [
    ("h200", ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"]),
    ("h200-flash_fwd", ["flash_fwd/handbook", "flash_fwd/mma", "flash_fwd/wgmma2", "flash_fwd/sdpa_cudnn"]),
])
def test_no_chart_text_overlaps(monkeypatch, tmp_path, runs, variants):
    from paprof.render import charts

    found, finish = {}, charts.finished_chart

    def check(fig, chart_id, *args):
        found[chart_id] = _text_overlaps(fig)
        return finish(fig, chart_id, *args)

    monkeypatch.setattr(charts, "finished_chart", check)
    res = api.write_report(variants, runs=recorded(runs), out=tmp_path / "r.html", cross=True)
    assert len(found) >= 6 and {c.id for c in res.context.charts} == set(found)
    assert {k: v for k, v in found.items() if v} == {}
