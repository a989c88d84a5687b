"""``paprof compare`` on the shipped H200 runs (``examples/h200``): the data the templates
receive and the text they make of it.

Launch configurations, shared memory and the bytes moved follow from the kernels' design
(the source documents' ideas) and are asserted exactly; timings and throughputs are asserted as the
directions and ranges the sources describe, so that a re-capture on the same GPU passes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "h200"
ALL = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"]
KV_BYTES = 2 * 64 * 4096 * 8 * 128 * 4  # batch x context x kv_heads x head_dim x fp32, K and V

pytestmark = pytest.mark.skipif(
    not all((EXAMPLES / "nvidia-h200" / "paged_decode" / v).is_dir() for v in ALL),
    reason=f"the shipped H200 runs are not all under {EXAMPLES}/nvidia-h200/paged_decode yet",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from paprof.reports.build import write_report

    out = tmp_path_factory.mktemp("h200")
    return write_report(ALL, runs=EXAMPLES, out=out / "report.html", markdown=out / "report.md",
                        generated="2026-11-29 15:00 UTC")


@pytest.fixture(scope="module")
def ctx(built):
    return built.context


@pytest.fixture(scope="module")
def html(built):
    return built.html.read_text()


@pytest.fixture(scope="module")
def md(built):
    return built.markdown.read_text()


def cells(ctx, key):
    return dict(zip(ctx.labels, ctx.row(key).cells))


def step(ctx, before, after):
    return next(s for s in ctx.steps if (s.before, s.after) == (before, after))


def test_variants_in_the_order_given_each_step_its_story(ctx):
    assert ctx.labels == ALL
    assert [s.title for s in ctx.steps] == [f"{a} -> {b}" for a, b in zip(ALL, ALL[1:])]
    assert all(s.sentences for s in ctx.steps)
    assert ctx.warnings == []  # one GPU, one ncu, one clock setting, one shape


def test_launch_configuration_as_designed(ctx):
    grid = {k: c.value for k, c in cells(ctx, "grid_size").items()}
    block = {k: c.value for k, c in cells(ctx, "block_size").items()}
    assert grid["v2"] == 2048 and block["v2"] == 32  # (q_heads, batch) x one warp
    assert grid["v3"] == 512 and block["v3"] == 128  # (kv_heads, batch) x 4 warps
    assert grid["v4"] == 8192 and block["v4"] == 32  # dominant kernel: the partial, 4 splits
    assert cells(ctx, "shared_mem_per_block_bytes")["v3"].value == 2 * 16 * 128 * 4
    assert cells(ctx, "shared_mem_per_block_bytes")["v3"].text == "16 KiB"


def test_every_variant_moves_the_same_unique_bytes(ctx):
    for label, cell in cells(ctx, "dram_bytes").items():
        assert cell.value == pytest.approx(KV_BYTES, rel=0.02), label
    # so a faster kernel is the same traffic in less time
    assert ("DRAM bytes (2.15 GB) and DRAM active cycles (1.4 M) unchanged: the same traffic in less time"
            in step(ctx, "v2", "v3").sentences)


def test_v2_to_v3_story(ctx):
    s = step(ctx, "v2", "v3")
    assert s.verdict == "faster" and 1.5 < s.speedup < 4
    assert s.headline == f"v3 is {s.speedup_text} faster than v2"
    text = s.sentences
    assert text[0] == (f"duration {cells(ctx, 'duration_us')['v2'].text} -> "
                       f"{cells(ctx, 'duration_us')['v3'].text}: {s.speedup_text} faster")
    assert text[1].startswith("grid 2,048 -> 512 CTAs, block 32 -> 128 threads")
    assert "shared memory 0 B -> 16 KiB per block" in text
    regs = cells(ctx, "registers_per_thread")
    assert f"registers {regs['v2'].text} -> {regs['v3'].text} per thread" in text
    dram = cells(ctx, "dram_throughput_pct")
    assert dram["v3"].value > dram["v2"].value + 10  # GQA reuse: the DRAM pipe is busier
    assert any(x.startswith(f"DRAM throughput {dram['v2'].text} -> {dram['v3'].text}") for x in text)
    assert any(re.match(r"achieved bandwidth .* of the measured 4\.53 TB/s ceiling$", x) for x in text)


def test_split_kv_is_summed_and_slower_at_batch_64(ctx):
    v4 = ctx.variants[ALL.index("v4")]
    assert v4.multi_kernel
    assert [k.name for k in v4.kernels] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert sum(k.duration_us for k in v4.kernels) == pytest.approx(v4.duration_us)
    assert v4.kernels[1].share < 0.02  # the merge is tiny
    s = step(ctx, "v3", "v4")
    assert s.verdict == "slower"  # no GQA reuse, and the grid was already full
    assert s.sentences[1].startswith("v4 runs 2 kernels, compared as their sum: paged_decode_v4_partial ")


def test_the_fastest_reads_near_the_ceiling(ctx):
    assert ctx.summary.startswith("Fastest: v5 (") or ctx.summary.startswith("Fastest: v6 (")
    share = cells(ctx, "bandwidth_of_ceiling_pct")
    assert share["v5"].value > 60 and share["baseline"].value < 5
    assert ctx.ceiling_text.startswith("Bandwidth ceiling: 4.53 TB/s (measured")


def test_rule_changes_are_listed(ctx):
    kinds = {r.kind for s in ctx.steps for r in s.rules}
    assert {"appeared", "disappeared", "changed"} <= kinds
    for s in ctx.steps:
        for r in s.rules:
            assert r.title and r.kind in ("appeared", "disappeared", "changed")


def test_provenance_footer(ctx, html):
    common = dict(ctx.provenance.common)
    assert common["GPU"] == "NVIDIA H200"
    assert common["ncu"].startswith("2025.3.1")
    assert common["Clock control"] == "none"
    assert common["Shape"].startswith("batch=64,q_heads=32,kv_heads=8,head_dim=128")
    assert 'id="provenance"' in html and "NVIDIA H200" in html


def test_html_and_markdown_carry_the_same_story(ctx, html, md):
    s = step(ctx, "v2", "v3")
    for sentence in s.sentences:
        assert sentence.replace(">", "&gt;") in html
        assert f"- {sentence}".replace("_", "\\_") in md
    assert html.count('<img class="chart"') == 6  # speed of light, duration, bandwidth, occupancy, warp stalls, ledger
    assert "sum of 2 kernels" in html and "v4 is the sum of 2 kernels" in md
    assert "### v2 → v3: " + s.headline in md


def test_compare_reports_is_the_library_call():
    from paprof.analysis.compare import compare_reports

    paths = [next((EXAMPLES / "nvidia-h200" / "paged_decode" / v).glob("*.ncu-rep")) for v in ("v3", "v2")]
    cmp = compare_reports(paths)
    assert [v.label for v in cmp.variants] == ["v3", "v2"]  # the order given, not the store's
    assert cmp.steps[0].headline.startswith("v2 is ") and "slower than v3" in cmp.steps[0].headline


@pytest.mark.parametrize("shape", [None, "b64_ctx4096_h32x8_d128_p16_fp32",
                                   "batch=64,q_heads=32,kv_heads=8,head_dim=128,page=16,context=4096"])
def test_run_store_ids_resolve_to_the_latest_run_at_a_shape(shape):
    from paprof.reports.build import resolve_variants

    paths = resolve_variants(["v2", "paged_decode/v3"], EXAMPLES, shape=shape)
    assert [p.parent.name for p in paths] == ["v2", "v3"]
    assert all(p.name == "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep" for p in paths)


def test_a_shape_the_store_lacks_is_a_user_error():
    from paprof.errors import UserError
    from paprof.reports.build import resolve_variants

    with pytest.raises(UserError, match="no run of v2 at shape b1_ctx16"):
        resolve_variants(["v2", "v3"], EXAMPLES, shape="b1_ctx16")


def test_split_story_at_batch_4_names_the_grid_and_skips_equal_looking_changes():
    from paprof.analysis.compare import compare_reports

    runs = ROOT / "examples" / "h200" / "nvidia-h200" / "paged_decode"
    shape = "b4_ctx32768_h32x8_d128_p16_fp16.ncu-rep"
    cmp = compare_reports([runs / "v5" / shape, runs / "v6" / shape])
    step = cmp.steps[0]
    assert (step.bottleneck_before, step.bottleneck_after) == ("occupancy/launch-bound", "dram-bound")
    assert any(s.startswith("grid 32 -> 512 CTAs") for s in step.sentences)
    assert not any(s.startswith("shared memory 52 KiB -> 52 KiB") for s in step.sentences)


SWEEP = ROOT / "examples" / "sweeps" / "h200-profile"


@pytest.mark.parametrize("shape,said", [
    ("b64_ctx4096_h32x8_d128_p16_fp16",
     "v6 ran its no-split kernel paged_decode_v6_nosplit (num_splits 1: the grid already fills "
     "the GPU, 512 CTAs for 132 SMs)"),
    ("b4_ctx16384_h32x8_d128_p16_fp16",
     "v6 split each sequence 16 ways (paged_decode_v6_split, num_splits 16): 512 CTAs where 32 "
     "would leave 100 of 132 SMs idle"),
])
def test_the_sweep_says_which_code_path_v6_took(shape, said):
    from paprof.reports.build import write_report

    built = write_report(["v5", "v6"], runs=SWEEP, out=None, markdown="-", shape=shape)
    assert said in built.comparison.steps[0].sentences
    assert built.context.variants[1].code_path == said
    assert said.replace("_", "\\_") in built.markdown_text


def test_time_ledger_adds_up_on_every_shipped_step(built, ctx, md):
    from paprof.analysis.ledger import step_ledgers

    ledgers = step_ledgers(built.comparison)
    assert len(ledgers) == len(ALL) - 1 and all(led is not None for led in ledgers)
    for led in ledgers:
        total = sum(led.terms.values()) + led.residual
        assert total == pytest.approx(led.difference, rel=1e-12, abs=1e-9), led
        assert led.missing == []  # the H200 runs record bytes, waves and issue slots
    # the shipped variants all move the same 2.15 GB, so the DRAM floor barely changes
    assert all(abs(led.terms["dram"]) < 0.01 * abs(led.difference) for led in ledgers[:-1])
    assert [v.title for v in ctx.ledgers][0] == "baseline -> v1"
    assert "### Time ledger" in md and "| DRAM bytes at the ceiling |" in md
    assert any(c.id == "ledger" and "baseline -> v1" in c.alt for c in ctx.charts)


def test_a_shipped_report_profiled_five_times_shows_its_spread():
    import pandas as pd

    from paprof.analysis.compare import compare
    from paprof.analysis.load import load_reports, variant_rows
    from paprof.reports.build import resolve_variants
    from paprof.reports.context import build_context

    paths = resolve_variants(["v2", "v3"], runs=EXAMPLES)
    df = load_reports(paths)
    v3 = df[df["variant"] == "v3"]
    copies = []
    for launch, scale in enumerate((1.0, 1.02, 0.97, 1.01, 0.99)):
        c = v3.copy()
        c["launch"] = launch
        c["duration_us"] = c["duration_us"] * scale
        copies.append(c)
    frame = pd.concat([df[df["variant"] == "v2"], *copies], ignore_index=True)
    frame.attrs = df.attrs
    cmp = compare(frame, variant_rows(frame), order=paths)
    got = cmp.variant("v3")
    base = float(v3["duration_us"].iloc[0])
    assert got.launches == 5
    assert got.get("duration_us") == pytest.approx(base)  # the median of the five
    assert got.spread["duration_us"] == pytest.approx(base * 0.025)  # (1.02 - 0.97) / 2
    cell = build_context(cmp, charts=False).row("duration_us").cells[1]
    assert " ± " in cell.text
