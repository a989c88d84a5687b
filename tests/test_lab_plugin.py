"""The tool with the kernel lab installed as a plugin (``pip install -e ./kernels``):
variant names across two families, a compute-bound family's gate metrics and GEMM
ceiling. The lab is one plugin like a user's; these check what paprof does with what a
plugin declares, not the lab's kernels (those are in kernels/tests)."""

from __future__ import annotations

import pytest

from paprof import gate, registry
from paprof.errors import UserError

from helpers import make_table

pytestmark = pytest.mark.lab


def flash():
    """The lab's flash_fwd family, found through its entry point like any plugin."""
    return registry.family("flash_fwd")


# -- the registry: an id names its family when it is unique ------------------------------


def test_an_id_unique_across_installed_families_needs_no_family():
    assert set(registry.families()) >= {"paged_decode", "flash_fwd"}
    assert registry.get("v3").name == "paged_decode/v3"
    assert registry.get("flash_fwd/mma").name == registry.get("mma").name == "flash_fwd/mma"
    assert registry.get("handbook", "flash_fwd").name == "flash_fwd/handbook"
    with pytest.raises(UserError, match="exists in several families; say which: .*paged_decode/handbook"):
        registry.get("handbook")
    assert {v.family for v in registry.resolve(["all", "mma"])} == {"flash_fwd"}
    assert [v.id for v in registry.resolve(["all"], "flash_fwd")][:2] == ["handbook", "mma"]
    with pytest.raises(UserError, match=r"--variant all needs one family .*flash_fwd, paged_decode"):
        registry.resolve(["all"])
    with pytest.raises(UserError, match="must be of one family"):
        registry.resolve(["v3", "mma"])


# -- the gate's hint ---------------------------------------------------------------------


def flash_rows(tensor=70.0, sm=75.0, duration=3000.0, tflops=360.0, variant="mma"):
    side = {"schema": 2, "family": "flash_fwd", "gpu": "NVIDIA H200", "ncu_version": "2025.3.1.0",
            "clock_control": "none", "preset": "default", "created": "2026-12-01T10:00:00+00:00",
            "gate_metrics": list(flash().gate_metrics)}
    shape = flash().parse("").spec()
    return [{"variant": variant, "family": "flash_fwd", "launch": 0, "shape": shape,
             "gpu": "NVIDIA H200", "tensor_pipe_pct": tensor, "sm_throughput_pct": sm,
             "duration_us": duration, "work_tflops": tflops, "dram_throughput_pct": 9.0,
             "report_path": f"runs/nvidia-h200/flash_fwd/{variant}/x.ncu-rep", "sidecar": side}]


def test_the_gate_holds_flash_fwd_to_its_compute_metrics():
    assert all(m in gate.GATE_RULES for m in flash().gate_metrics)
    base = gate.make_baseline(make_table(flash_rows()))
    (entry,) = base.entries
    assert list(entry.metrics) == list(flash().gate_metrics)  # the family's hint, not DRAM throughput
    same = gate.compare_to_baseline(base, make_table(flash_rows()), gate.Settings())
    assert same.passed
    slower = gate.compare_to_baseline(
        base, make_table(flash_rows(tensor=60.0, sm=64.0, duration=3500.0, tflops=308.0)), gate.Settings())
    assert not slower.passed
    assert {r.metric for r in slower.regressions} == set(flash().gate_metrics)


def test_paprof_run_records_the_gemm_ceiling_of_tensor_core_work(fake_bin, fake_launcher, tmp_path):
    """The verification run of a family held to the GEMM ceiling measures it
    (--gemm-ceiling) and the sidecar records it as gemm_ceiling_tflops; fp32 work is not
    held to it."""
    from paprof.measure.argv import NcuSettings
    from paprof.measure.profile import profile_variant

    fake_launcher.result = {"gemm_ceiling_tflops": 712.5,
                            "gemm_ceiling": {"dtype": "bf16", "method": "cublas.gemmEx", "tflops": 712.5}}
    run = profile_variant(flash().variant("mma"), flash().parse("seq_q=1024"), NcuSettings(), tmp_path / "runs")
    (verify_call,) = fake_launcher.calls
    assert "--gemm-ceiling" in verify_call and "--ceiling" not in verify_call
    assert run.sidecar["gemm_ceiling_tflops"] == 712.5 and run.sidecar["gemm_ceiling"]["dtype"] == "bf16"
    assert run.sidecar["gate_metrics"] == list(flash().gate_metrics)
    fake_launcher.calls.clear()
    fake_launcher.result = {}
    run = profile_variant(flash().variant("handbook"), flash().parse("seq_q=1024,dtype=fp32"), NcuSettings(),
                          tmp_path / "runs")
    assert "--gemm-ceiling" not in fake_launcher.calls[0] and run.sidecar["gemm_ceiling_tflops"] is None


