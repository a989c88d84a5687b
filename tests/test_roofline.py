"""The hierarchical roofline: the arithmetic on synthetic inputs (ridge points, which roof
bounds a point, the roofs' fallbacks), and on the H200 source-preset runs recorded in
tests/data the intensities recomputed from the reports' raw counters."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from paprof.read import metrics as M
from paprof.model import roofline as R
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
SOURCE_RUNS = recorded("h200-source")
VARIANTS = ["v2", "v3", "v4", "v5"]


def report(variant: str) -> Path:
    return next((SOURCE_RUNS / "nvidia-h200" / "paged_decode" / variant).glob("*.ncu-rep"))


# -- synthetic: the arithmetic -----------------------------------------------------------
DRAM = R.Roof("dram", "DRAM", "memory", 4e12, R.MEASURED)
L2 = R.Roof("l2", "L2", "memory", 10e12, R.NCU_PEAK)
FP32 = R.Roof("fp32", "FP32 FMA", "compute", 60e12, R.DATASHEET)


def test_ridge_and_attainable():
    assert R.ridge(4e12, 60e12) == 15
    assert R.attainable(5, 4e12, 60e12) == 20e12  # below the ridge: bandwidth x intensity
    assert R.attainable(30, 4e12, 60e12) == 60e12  # above: the compute peak


@pytest.mark.parametrize("intensity, roof", [(1, "dram"), (14.99, "dram"), (15, "fp32"), (100, "fp32")])
def test_which_roof_bounds_a_point(intensity, roof):
    b = R.bound(intensity, DRAM, FP32)
    assert b.roof == roof and b.ridge == 15
    assert b.attainable == min(60e12, 4e12 * intensity)


def test_a_point_and_its_share_of_the_roof():
    p = R.Point("dram", flops=8e9, bytes=2e9, seconds=1e-3, bound=R.bound(4.0, DRAM, FP32))
    assert p.intensity == 4 and p.flop_rate == 8e12
    assert p.of_attainable == pytest.approx(50)  # 8 of the 16 TFLOP/s that 4 TB/s x 4 allows
    assert R.Point("l1", 1, 0, 1).intensity is None


def row(**over) -> dict:
    """One kernel's catalogue values: 1 ms; FP32 rates per cycle over 1e6 cycles (FLOPs =
    (fadd + fmul + 2 ffma) x 1e6 = 20e9); DRAM 2e9 B, L2 at 5e12 B/s (5e9 B), L1 at 20e12."""
    values = {"duration_us": 1000.0, "smsp_cycles_elapsed": 1e6,
              "fp32_fadd_per_cycle": 4000.0, "fp32_fmul_per_cycle": 2000.0, "fp32_ffma_per_cycle": 7000.0,
              "fp64_dadd_per_cycle": 0.0, "fp64_dmul_per_cycle": 0.0, "fp64_dfma_per_cycle": 0.0,
              "tensor_fp16_flops": 0.0, "tensor_bf16_flops": 0.0, "tensor_tf32_flops": 0.0,
              "dram_bytes": 2e9, "l2_bytes_per_second": 5e12, "l1_bytes_per_second": 20e12}
    values.update(over)
    return values


def variant(label="k", kernels=None, gpu=None, sidecar=None, ceiling=None, **values):
    kernels = kernels or [row(**values)]
    summed = {"duration_us": sum(k["duration_us"] for k in kernels), **values}
    return SimpleNamespace(label=label, gpu=gpu, sidecar=sidecar, ceiling=ceiling, values=summed,
                           kernels=[SimpleNamespace(values=k) for k in kernels],
                           get=summed.get)


def test_kernel_counts_follow_ncus_roofline_formulas():
    counts = R.kernel_counts(row())
    assert counts["fp32"] == (4000 + 2000 + 2 * 7000) * 1e6
    assert counts["tensor"] == 0 and counts["fp64"] == 0
    assert counts["dram"] == 2e9
    assert counts["l2"] == pytest.approx(5e9) and counts["l1"] == pytest.approx(20e9)
    assert counts["seconds"] == pytest.approx(1e-3)
    lacking = R.kernel_counts(row(l2_bytes_per_second=None, fp32_ffma_per_cycle=float("nan")))
    assert lacking["l2"] is None and lacking["fp32"] is None and lacking["l1"] is not None


def test_a_variant_of_two_kernels_sums_their_counts():
    counts = R.variant_counts([row(), row(duration_us=500.0, dram_bytes=1e9)])
    assert counts["fp32"] == 2 * 20e9 and counts["dram"] == 3e9
    assert counts["seconds"] == pytest.approx(1.5e-3)
    assert counts["l2"] == pytest.approx(5e9 + 2.5e9)
    assert R.variant_counts([row(), row(tensor_bf16_flops=None)])["tensor"] is None


def test_the_binding_level_is_the_lowest_roof():
    roofs = {"dram": DRAM, "l2": L2, "l1": R.Roof("l1", "L1/shared", "memory", 30e12, R.NCU_PEAK),
             "fp32": FP32}
    # 20 GFLOP: DRAM 2 GB (10 FLOP/B -> 40 TFLOP/s allowed), L2 5 GB (4 -> 40), L1 20 GB (1 -> 30)
    vr = R.variant_roofline(variant(), roofs)
    assert [p.level for p in vr.points] == ["dram", "l2", "l1"]
    assert vr.point("dram").bound.attainable == pytest.approx(40e12)
    assert vr.binding.level == "l1" and vr.binding.bound.roof == "l1"
    assert vr.binding.flop_rate == pytest.approx(20e12) and vr.binding.of_attainable == pytest.approx(66.67, abs=0.01)
    # little DRAM traffic: every level above its ridge, so the compute roof binds
    compute_bound = R.variant_roofline(variant(dram_bytes=1e8, l2_bytes_per_second=1e11,
                                               l1_bytes_per_second=4e11), roofs)
    assert {p.bound.roof for p in compute_bound.points} == {"fp32"}


def test_the_work_model_point_uses_its_flop_kind_and_dram():
    roofs = {"dram": DRAM, "fp32": FP32, "tensor": R.Roof("tensor", "Tensor", "compute", 700e12, R.MEASURED)}
    side = {"work": {"bytes": 1e9, "flops": 4e9, "flop_kind": "tensor"}}
    vr = R.variant_roofline(variant(sidecar=side, work_bytes=1e9, work_flops=4e9), roofs)
    work = vr.point(R.WORK)
    assert work.intensity == 4 and work.flop_rate == pytest.approx(4e12)
    assert vr.work_compute == "tensor" and work.bound.ridge == pytest.approx(175)
    assert vr.compute == "fp32"  # what the SASS executed: CUDA-core FMAs


def test_tensor_flops_pick_the_tensor_roof():
    vr = R.variant_roofline(variant(tensor_fp16_flops=1e12), {"dram": DRAM})
    assert vr.compute == "tensor" and vr.flops["tensor"] == 1e12
    assert all(p.bound is None for p in vr.points)  # no compute roof known: no verdict


def test_roofs_fall_back_from_measured_to_datasheet_to_ncu_peak():
    peaks = {"dram_peak_bytes_per_cycle": 1000.0, "dram_clock_hz": 3e9, "l2_peak_bytes_per_cycle": 5000.0,
             "l2_clock_hz": 2e9, "l1_peak_bytes_per_cycle": 10000.0, "l1_clock_hz": 2e9,
             "fp32_peak_ffma_per_cycle": 10000.0, "fp64_peak_dfma_per_cycle": 5000.0,
             "sm_clock_hz": 2e9, "tensor_peak_flops": 9e14}
    unknown = R.roofs_for([variant(gpu="Some Future GPU", **peaks)])
    assert {k: (r.rate, r.source) for k, r in unknown.items()} == {
        "dram": (3e12, R.NCU_PEAK), "l2": (1e13, R.NCU_PEAK), "l1": (2e13, R.NCU_PEAK),
        "fp32": (4e13, R.NCU_PEAK), "fp64": (2e13, R.NCU_PEAK), "tensor": (9e14, R.NCU_PEAK)}
    from paprof.model.gpus import ceiling_for

    h200 = R.roofs_for([variant(gpu="NVIDIA H200", ceiling=ceiling_for("NVIDIA H200"), **peaks)])
    assert (h200["dram"].rate, h200["dram"].source) == (4.53e12, R.MEASURED)
    assert (h200["fp32"].rate, h200["fp32"].source) == (67e12, R.DATASHEET)
    assert (h200["tensor"].rate, h200["tensor"].source) == (726e12, R.MEASURED)
    assert "8192^3" in h200["tensor"].note
    assert h200["l2"].source == R.NCU_PEAK  # no datasheet gives L2 bandwidth
    recorded = R.roofs_for([variant(gpu="NVIDIA H200", sidecar={"gemm_ceiling_tflops": 700.5}, **peaks)])
    assert (recorded["tensor"].rate, recorded["tensor"].source) == (700.5e12, R.MEASURED)
    assert "recorded with the run" in recorded["tensor"].note
    assert R.roofs_for([variant(gpu=None)]) == {}


def test_no_counters_and_no_work_model_is_no_roofline():
    bare = {k: None for k in row()} | {"duration_us": 10.0}
    cmp = SimpleNamespace(variants=[variant(**bare), variant(label="b", **bare)])
    cmp.variants[0].kernels[0].values.update(bare)
    cmp.variants[1].kernels[0].values.update(bare)
    assert R.build(cmp) is None


def test_runs_on_two_gpus_get_no_shared_roofline():
    # roofs belong to one GPU: an H100's points under an A100's median roofs would sit
    # over them ("at 101.2 % of the roof")
    a, b = variant(), variant(label="b")
    a.gpu, b.gpu = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
    assert R.build(SimpleNamespace(variants=[a, b])) is None
    b.gpu = a.gpu
    assert R.build(SimpleNamespace(variants=[a, b])) is not None


# -- the recorded H200 runs ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cmp():
    from paprof.explain.compare import compare_reports

    return compare_reports([report(v) for v in VARIANTS])


@pytest.fixture(scope="module")
def rl(cmp):
    return R.build(cmp)


def raw(variant: str, kernel: int = 0) -> dict:
    """Every metric of one kernel, read with ncu_report itself (not paprof's readers)."""
    from paprof.read.ncu_reader import open_full

    _ctx, actions = open_full(report(variant))
    action = actions[kernel]
    return {n: action.metric_by_name(n).as_double() for n in action.metric_names()}


def test_every_roofline_input_is_a_metric_the_h200_recorded():
    names = set(raw("v2"))
    assert [m.ncu_name for m in M.ROOFLINE_INPUTS if m.ncu_name not in names] == []


@pytest.mark.parametrize("name", VARIANTS[:2] + ["v5"])
def test_intensities_recompute_from_the_raw_counters(rl, name):
    m = raw(name)
    flops = (m["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"]
             + m["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"]
             + 2 * m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"]
             ) * m["smsp__cycles_elapsed.avg"]
    seconds = m["gpu__time_duration.sum"] * 1e-9
    dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
    v = rl.variant(name)
    assert v.point("dram").intensity == pytest.approx(flops / dram, rel=1e-9)
    assert v.point("dram").flop_rate == pytest.approx(flops / seconds, rel=1e-9)
    # ncu's own roofline arithmetic (rates, not counts) gives the same intensity
    ncu_rate = (flops / m["smsp__cycles_elapsed.avg"]) * m["smsp__cycles_elapsed.avg.per_second"]
    assert v.point("dram").intensity == pytest.approx(ncu_rate / m["dram__bytes.sum.per_second"], rel=0.01)
    # L2: crossbar bytes, 32 B per active L2-to-SM cycle; L1: 128 B per writeback cycle
    l2 = m["lts__lts2xbar_cycles_active.sum.per_second"] * 32 * seconds
    assert v.point("l2").intensity == pytest.approx(flops / l2, rel=1e-3)
    l1 = m["l1tex__lsu_writeback_active_mem_lgds.sum"] * 128
    assert v.point("l1").intensity == pytest.approx(flops / l1, rel=1e-3)
    assert v.point(R.WORK).intensity == pytest.approx(2.0, rel=1e-3)  # 4 FLOPs per K/V element pair


def test_the_roofs_of_the_h200(rl):
    roofs = {k: (r.source, round(r.rate / 1e12, 2)) for k, r in rl.roofs.items()}
    assert roofs["dram"] == (R.MEASURED, 4.53)
    assert roofs["fp32"] == (R.DATASHEET, 67.0) and roofs["tensor"] == (R.MEASURED, 726.0)
    assert roofs["l2"][0] == R.NCU_PEAK and 9 < roofs["l2"][1] < 12
    assert roofs["l1"][0] == R.NCU_PEAK and 30 < roofs["l1"][1] < 36  # 128 B/cycle x 132 SMs
    assert "fp64" not in roofs  # no variant does fp64


def test_a_split_variant_is_the_sum_of_its_kernels(cmp, rl):
    v4 = next(v for v in cmp.variants if v.label == "v4")
    flops = [R.kernel_counts(k.values)["fp32"] for k in v4.kernels]
    assert len(flops) == 2 and rl.variant("v4").point("dram").flops == pytest.approx(sum(flops))


def test_every_fp32_variant_is_dram_bound_and_v5_close_to_its_roof(rl):
    for v in rl.variants:
        assert v.compute == "fp32" and v.flops["tensor"] == 0
        assert v.binding.level == "dram" and v.binding.bound.roof == "dram"
    assert rl.variant("v5").binding.of_attainable > 90
    assert rl.variant("v2").binding.of_attainable < 25
    # v3 stages each K/V page once in shared memory: its L1 traffic falls to about DRAM's
    assert rl.variant("v2").point("l1").bytes > 4 * rl.variant("v3").point("l1").bytes


def test_the_report_shows_the_roofline_chart_and_table(tmp_path):
    from paprof.api import write_report

    built = write_report(VARIANTS, runs=SOURCE_RUNS, out=tmp_path / "r.html", markdown=tmp_path / "r.md")
    html, md = (tmp_path / "r.html").read_text(), (tmp_path / "r.md").read_text()
    assert 'id="chart-roofline"' in html and 'id="roofline"' in html
    assert "### Roofline" in md
    assert "| DRAM | 4.53 TB/s | measured |" in md
    assert "| v5 | DRAM | 6.22 G | 2.15 GB | 2.89 |" in md
    view = built.context.roofline
    assert [r.binding for r in view.rows].count(True) == len(VARIANTS)
    # v2 sits under the DRAM roof at 18.6 % of it: no roof limits it, and the roofline
    # says the one verdict the rest of the page gives (one page, one verdict)
    assert view.verdicts[0].startswith("v2 (occupancy/launch-bound): in the DRAM roof's region "
                                       "(6.49 FLOP/byte of DRAM traffic")
    assert view.verdicts[0].endswith("no roof limits it; the verdict is occupancy/launch-bound.")
    v5 = next(v for v in view.verdicts if v.startswith("v5"))
    assert v5.startswith("v5 (dram-bound): bound by the DRAM roof")
    chart = next(c for c in built.context.charts if c.id == "roofline")
    assert chart.uri.startswith("data:image/png;base64,") and "v5: DRAM 2.89 FLOP/byte" in chart.alt


def test_runs_without_roofline_inputs_have_no_roofline():
    # the v3 run shipped before the default preset gained the roofline sections
    old = sorted((ROOT / "tests" / "data" / "schema1").rglob("*.ncu-rep"))
    assert old
    from paprof.explain.compare import compare_reports

    assert R.build(compare_reports(old)) is None


def test_every_shipped_run_is_a_roofline_point():
    from paprof.explain.compare import compare_reports

    shipped = sorted((recorded("h200") / "nvidia-h200" / "paged_decode").glob("*/*.ncu-rep"))
    built = R.build(compare_reports(shipped))
    assert built is not None and len(built.variants) == len(shipped) == 8
