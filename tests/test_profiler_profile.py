"""profile_variant end to end with the fake ncu and a fake launcher (no GPU)."""

from __future__ import annotations

import json

import pytest

from paprof.errors import ShapeError, UserError, VerificationError
from paprof import registry
from paprof.read import locate, store
from paprof.measure import profile
from paprof.measure.argv import NcuSettings
from paprof.read.locate import import_ncu_report
from paprof.measure.profile import profile_variant, profile_variants

from helpers import lab_shape, real_report

pytestmark = pytest.mark.lab  # the lab's paged_decode is the sample plugin



def the_shape():
    return lab_shape("batch=64,context=4096")
CONTRACT_KEYS = {
    "schema", "family", "variant", "kind", "kernel_regex", "idea", "shape", "shape_slug", "params",
    "work", "gpu", "gpu_slug", "driver", "ncu_version", "clock_control", "preset", "sections",
    "replay_passes", "git_commit", "git_dirty", "source", "verified", "verification",
    "duration_us_event", "bandwidth_tbs", "tflops", "launch_details", "launch_words", "nvtx_range", "command",
    "created", "paprof_version", "report",
}  # fmt: skip


def files_under(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_profile_variant_stores_report_and_sidecar(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    seen = []
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(seed=5), tmp_path / "runs", progress=seen.append)
    slug = the_shape().slug()
    folder = f"nvidia-h200/paged_decode/v3/{slug}"
    assert files_under(tmp_path / "runs") == [f"{folder}.json", f"{folder}.ncu-rep", f"{folder}.ncu.log"]
    assert run.report == tmp_path / "runs" / f"{folder}.ncu-rep"

    # the launcher ran once, alone, for verification and timing
    (verify,) = fake_launcher.calls
    assert verify[verify.index("--profile-launches") + 1] == "0"
    assert verify[verify.index("--time") + 1] == "20"
    assert verify[-2:] == ["--seed", "5"]

    sidecar = json.loads(run.report.with_suffix(".json").read_text())
    assert sidecar == run.sidecar
    assert CONTRACT_KEYS <= set(sidecar)
    assert sidecar["schema"] == 2 and sidecar["kind"] == "cuda" and sidecar["verified"] is True
    assert (sidecar["family"], sidecar["variant"], sidecar["kernel_regex"]) == ("paged_decode", "v3", "paged_decode_v3")
    assert (sidecar["shape"], sidecar["shape_slug"]) == (the_shape().spec(), slug)
    assert sidecar["params"]["batch"] == 64 and sidecar["params"]["page_size"] == 16
    # the work model is the family's, computed for these parameters (not taken from the GPU)
    assert sidecar["work"] == {"bytes": the_shape().kv_bytes, "flops": 4 * 64 * 4096 * 32 * 128, "flop_kind": "fp32"}
    # the variant's own source: here paprof's checkout (the built-in family's folder)
    assert sidecar["source"]["path"].endswith("kernels/paprof_kernels/paged_decode")
    assert (sidecar["gpu"], sidecar["gpu_slug"], sidecar["driver"]) == ("NVIDIA H200", "nvidia-h200", "580.159.04")
    assert sidecar["ncu_version"] == "2025.3.1.0"
    assert (sidecar["clock_control"], sidecar["preset"]) == ("none", "default")
    assert sidecar["sections"][0] == "SpeedOfLight" and len(sidecar["sections"]) == 10
    assert "smsp__sass_inst_executed_op_global_ld.sum" in sidecar["metrics"]  # the memory tables' metrics
    assert sidecar["replay_passes"] == 20
    assert sidecar["verification"] == {"passed": True, "rel_error": 1.2e-7, "max_abs_error": 3.0e-7, "tolerance": 1e-5}
    assert (sidecar["duration_us_event"], sidecar["bandwidth_tbs"]) == (3350.0, 4.1)
    assert sidecar["report"] == f"{slug}.ncu-rep"
    assert sidecar["profiled_kernels"] == [{"kernel": "paged_decode_v3", "launch": 0, "passes": 20}]

    # the command recorded is what ran, with the final report path
    ran = json.loads((tmp_path / "argv.json").read_text())
    assert sidecar["command"][0] == ran[0] and str(run.report) in sidecar["command"]
    assert [a for a in ran if a.endswith(".ncu-rep")][0].split("/")[-1].startswith(".")
    assert any("ncu: paged_decode_v3 launch 0: 100%, 20 passes" == s for s in seen)


def test_kernels_per_launch_comes_from_the_verification_run(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    fake_launcher.result = {"kernels": ["paged_decode_v4_partial", "paged_decode_v4_merge"]}
    run = profile_variant(registry.get("v4"), the_shape(), NcuSettings(launches=2), tmp_path / "runs")
    ran = json.loads((tmp_path / "argv.json").read_text())
    assert ran[ran.index("--launch-count") + 1] == "4"
    assert ran[ran.index("--profile-launches") + 1] == "2"
    assert len(run.sidecar["profiled_kernels"]) == 4


def test_the_launchers_choices_and_their_words_go_into_the_record(fake_bin, fake_launcher, tmp_path, monkeypatch):
    """What the launcher says it chose (``launch_details``) and the family's words for it
    (``launch_words``) are recorded as the launcher wrote them; a launcher without words
    (an older one, a family that gives none) leaves an empty table."""
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    words = {"said": ["split the rows 4 ways (splits 4)"], "why": "128 CTAs would leave 4 of 132 SMs idle"}
    fake_launcher.result = {"launch_details": {"splits": 4}, "launch_words": words}
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert (run.sidecar["launch_details"], run.sidecar["launch_words"]) == ({"splits": 4}, words)
    assert run.sidecar.launch_said == tuple(words["said"]) and run.sidecar.launch_why == words["why"]
    fake_launcher.result = {}
    bare = profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "bare")
    assert (bare.sidecar["launch_details"], bare.sidecar["launch_words"]) == ({}, {})


def test_failed_verification_stores_nothing_and_skips_ncu(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    fake_launcher.returncode = 1
    fake_launcher.output = "compiling\npaprof: error: v3 output differs: rel_error 0.31 > 1e-05\n"
    with pytest.raises(VerificationError, match="paged_decode/v3 failed verification: .*rel_error 0.31"):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert not (tmp_path / "argv.json").exists()
    assert not (tmp_path / "runs").exists() or files_under(tmp_path / "runs") == []


def test_launcher_environment_error_is_a_user_error(fake_bin, fake_launcher, tmp_path):
    fake_launcher.returncode = 2
    fake_launcher.output = "paprof: error: no CUDA device\n"
    with pytest.raises(UserError, match=r"launcher for paged_decode/v3 failed \(exit 2\): paprof: error: no CUDA device"):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")


def test_existing_run_refused_before_any_gpu_work(fake_bin, fake_launcher, tmp_path):
    profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    with pytest.raises(UserError, match="already exists.*--force"):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert len(fake_launcher.calls) == 1
    profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs", replace=True)
    assert len(fake_launcher.calls) == 2


def test_ncu_failure_leaves_only_the_log(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    with pytest.raises(UserError, match="ERR_NVGPUCTRPERM"):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert files_under(tmp_path / "runs") == [f"nvidia-h200/paged_decode/v3/{the_shape().slug()}.ncu.log"]


def test_interrupt_after_ncu_leaves_nothing_half_written(fake_bin, fake_launcher, tmp_path, monkeypatch):
    def interrupted(path, data):
        path.write_text("{")
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_sidecar", interrupted)
    with pytest.raises(KeyboardInterrupt):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert files_under(tmp_path / "runs") == [f"nvidia-h200/paged_decode/v3/{the_shape().slug()}.ncu.log"]


def test_without_nvidia_smi_the_launchers_gpu_names_the_run(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI", "fail")
    fake_launcher.result = {"gpu": "NVIDIA H100 80GB HBM3"}
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert run.sidecar["gpu_slug"] == "nvidia-h100-80gb-hbm3" and run.sidecar["driver"] is None
    assert "nvidia-h100-80gb-hbm3" in run.report.parts


def test_shape_error_before_anything_runs(fake_bin, fake_launcher, tmp_path):
    with pytest.raises(ShapeError):
        profile_variant(registry.get("v3"), lab_shape("dtype=fp16"), NcuSettings(), tmp_path / "runs")
    assert fake_launcher.calls == []


def test_no_ncu_is_a_user_error(fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setattr(locate, "INSTALL_ROOT", tmp_path / "none")
    monkeypatch.setattr(locate, "CUDA_NCU", tmp_path / "none" / "ncu")
    with pytest.raises(UserError, match="ncu .* not found"):
        profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert fake_launcher.calls == []


def test_profile_variants_continues_past_failures(fake_bin, fake_launcher, tmp_path):
    fake_launcher.variants = {"v2": {"check": {"passed": False, "rel_error": 0.3, "max_abs_error": 1.0,
                                               "tolerance": 1e-5}}}
    variants = [registry.get(v) for v in ("v2", "v3", "v5")]
    outcomes = profile_variants(variants, the_shape(), NcuSettings(), tmp_path / "runs")
    assert [(o.variant.id, bool(o.run), bool(o.failed), bool(o.skipped)) for o in outcomes] == [
        ("v2", False, True, False),
        ("v3", True, False, False),
        ("v5", True, False, False),
    ]
    assert "rel_error=0.3" in str(outcomes[0].failed)


def test_profile_variants_raises_when_every_variant_is_skipped(fake_bin, fake_launcher, tmp_path):
    with pytest.raises(ShapeError):
        profile_variants([registry.get("v3")], lab_shape("dtype=fp16"), NcuSettings(), tmp_path / "runs")
    outcomes = profile_variants(
        [registry.get("v3"), registry.get("v5")], lab_shape("dtype=fp16"), NcuSettings(), tmp_path / "runs"
    )
    assert [(o.variant.id, bool(o.skipped), bool(o.run)) for o in outcomes] == [("v3", True, False), ("v5", False, True)]


def test_end_to_end_with_a_real_h200_report(fake_bin, fake_launcher, tmp_path, monkeypatch):
    report = real_report()
    monkeypatch.setenv("FAKE_NCU_REPORT", str(report))
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    assert run.report.read_bytes() == report.read_bytes()
    loaded = import_ncu_report().load_report(str(run.report))
    assert loaded.num_ranges() >= 1
    assert store.latest(tmp_path / "runs", "v3").report == run.report


@pytest.mark.parametrize("preset, lineinfo", [("default", None), ("source", "1")])
def test_source_preset_builds_kernels_with_line_info(fake_bin, fake_launcher, tmp_path, monkeypatch, preset, lineinfo):
    monkeypatch.delenv("PAPROF_LINEINFO", raising=False)
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(preset=preset), tmp_path / "runs")
    (env,) = fake_launcher.envs
    assert env.get("PAPROF_LINEINFO") == lineinfo
    assert run.sidecar["preset"] == preset
