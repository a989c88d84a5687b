"""The GPU's environment while timing (NVML, faked here): recorded in the sidecar, and a
regression measured on a throttled or shared GPU is "ambiguous (environment)", measured
again within the gate's bound."""

from __future__ import annotations

import json
import os
import sys

import pytest

from paprof import registry
from paprof.gate import environment as environment_gate
from paprof.gate import Baseline, Entry, Provenance, Settings, Stat, compare_to_baseline
from paprof.measure import environment
from paprof.measure.argv import NcuSettings
from paprof.measure.profile import profile_variant

from helpers import FakeNvml, lab_shape

SW_THERMAL, SW_POWER, IDLE = 0x20, 0x4, 0x1


def _watch(monkeypatch, fake, in_process=False):
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with environment.Watch(in_process=in_process, interval=0.001) as w:
        pass
    return w.record


def test_a_clean_gpu_is_observed_and_clean(monkeypatch):
    fake = FakeNvml(reasons=IDLE, own_pid=os.getpid())  # idle is no slowdown; we are not "others"
    record = _watch(monkeypatch, fake)
    assert record["observed"] is True and record["disturbed"] is None
    assert record["throttled"] == [] and record["other_processes"] == []
    assert record["sm_clock_mhz"] == {"min": 1980, "max": 1980}
    assert record["memory_clock_mhz"]["max"] == 3201 and record["temperature_c_max"] == 71
    assert record["samples"] >= 2 and fake.calls[0] == "init" and fake.calls[-1] == "shutdown"
    assert environment_gate.provenance_fields({"environment": record}) == {"environment": "clean"}


def test_a_throttled_gpu_names_the_reasons(monkeypatch):
    record = _watch(monkeypatch, FakeNvml(reasons=SW_THERMAL | SW_POWER | IDLE, sm_clock=1410))
    assert record["throttled"] == ["SW power cap", "SW thermal slowdown"]
    assert record["disturbed"] == "throttled (SW power cap, SW thermal slowdown)"
    assert record["clock_event_reasons"] == "0x25"
    assert environment_gate.provenance_fields({"environment": record}) == {
        "environment": "disturbed: throttled (SW power cap, SW thermal slowdown)"}


def test_another_process_on_the_gpu_is_named(monkeypatch):
    record = _watch(monkeypatch, FakeNvml(processes=[4242]))
    assert record["other_processes"] == [{"pid": 4242, "used_memory_bytes": 512 << 20}]
    assert record["disturbed"] == "1 other process on the GPU (pid 4242)"
    assert record["processes_read"] == "before and after"
    assert _watch(monkeypatch, FakeNvml(), in_process=True)["processes_read"] == "before"


def test_without_nvml_it_is_not_observed_and_nothing_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with environment.Watch() as w:
        pass
    assert w.record == {"observed": False, "why": "nvidia-ml-py is not installed (pip install 'paprof[nvml]')"}
    assert environment_gate.provenance_fields({"environment": w.record}) == {
        "environment": "not observed: nvidia-ml-py is not installed (pip install 'paprof[nvml]')"}
    record = _watch(monkeypatch, FakeNvml(fail_init=True))
    assert record["observed"] is False and "Driver Not Loaded" in record["why"]
    assert environment_gate.provenance_fields({}) == {"environment": None}  # an older run


@pytest.mark.lab
def test_profile_variant_records_the_environment(fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(reasons=SW_THERMAL))
    run = profile_variant(registry.get("v3"), lab_shape("batch=64,context=4096"),
                          NcuSettings(), tmp_path / "runs")
    side = json.loads(run.report.with_suffix(".json").read_text())
    assert side["environment"]["observed"] is True
    assert side["environment"]["disturbed"] == "throttled (SW thermal slowdown)"


# -- the gate ------------------------------------------------------------------------------

SLOW = [110.0, 111.0, 110.5, 110.2, 110.8, 111.1, 110.4]
BASE = [100.0, 100.5, 100.2, 99.8, 100.1, 100.3, 99.9]


def _entry(samples, environment=None, variant="v3"):
    return Entry("paged_decode", variant, "batch=64", {"duration_us_event": Stat.of(samples)},
                 Provenance(gpu="NVIDIA H200", environment=environment))


THROTTLED = "disturbed: throttled (HW thermal slowdown)"


def test_a_regression_on_a_throttled_gpu_is_ambiguous_with_its_reason():
    verdict = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(SLOW, THROTTLED)])
    (r,) = verdict.results
    assert r.verdict == "ambiguous (environment)" and r.status == "pass"
    assert "throttled (HW thermal slowdown)" in r.message
    assert verdict.exit_code == 0 and verdict.ambiguous == [r]
    assert any("ambiguous (environment)" in n for n in verdict.notes)
    strict = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(SLOW, THROTTLED)],
                                 Settings(fail_ambiguous=True))
    assert strict.exit_code == 1


def test_a_disturbed_run_is_measured_again_within_the_bound():
    calls = []

    def clean_now(entry):
        calls.append(entry.key)
        return _entry(SLOW, "clean")

    verdict = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(SLOW, THROTTLED)],
                                  remeasure=clean_now)
    assert len(calls) == 1 and verdict.results[0].verdict == "regressed"  # a clean GPU: real
    calls.clear()

    def still_throttled(entry):
        calls.append(entry.key)
        return _entry(SLOW, THROTTLED)

    verdict = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(SLOW, THROTTLED)],
                                  Settings(rounds=3), remeasure=still_throttled)
    assert len(calls) == 2  # 3 measurements in all
    assert "in all 3 measurements" in verdict.results[0].noise
    assert verdict.exit_code == 0


def test_a_clean_or_unobserved_run_is_judged_as_before():
    clean = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(SLOW, "clean")])
    assert clean.results[0].verdict == "regressed" and clean.exit_code == 1
    old = compare_to_baseline(Baseline([_entry(BASE)]), [_entry(SLOW)])
    assert old.results[0].verdict == "regressed"
    assert any("not observed" in n and "older run" not in n for n in old.notes)
    # a throttled GPU only slows a kernel down: a pass stays a pass
    same = compare_to_baseline(Baseline([_entry(BASE, "clean")]), [_entry(BASE, THROTTLED)])
    assert same.results[0].verdict == "same"


def test_counts_are_not_excused_by_the_environment():
    base = Entry("paged_decode", "v3", "b", {"registers_per_thread": Stat.of([64])},
                 Provenance(environment="clean"))
    now = Entry("paged_decode", "v3", "b", {"registers_per_thread": Stat.of([96])},
                Provenance(environment=THROTTLED))
    assert compare_to_baseline(Baseline([base]), [now]).exit_code == 1


def test_the_baseline_keeps_the_environment(tmp_path):
    from paprof.gate import load_baseline, save_baseline

    path = save_baseline(Baseline([_entry(BASE, THROTTLED)]), tmp_path / "b.json")
    assert load_baseline(path).entries[0].provenance.environment == THROTTLED
    verdict = compare_to_baseline(load_baseline(path), [_entry(BASE, "clean")])
    assert any("the baseline was measured while the GPU was throttled" in n for n in verdict.notes)


@pytest.mark.lab
def test_bench_records_the_environment_and_warns_when_throttled(monkeypatch):
    from click.testing import CliRunner

    from paprof.cli import main
    from paprof.measure.kernels import bench as kbench

    fam = registry.family("paged_decode")
    params = fam.parse("batch=8,context=1024")
    work = fam.work(params)
    rows = [kbench.BenchRow("v3", "cuda", kernels=["paged_decode_v3"], medians_us=[50.0, 50.5],
                            rel_error=1e-7, passed=True)]
    monkeypatch.setattr(kbench, "run_bench", lambda fam, chosen, params, *a, **k: kbench.BenchResult(
        fam.name, params, work, "NVIDIA H200", 4.5, 100, 2, rows))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(reasons=SW_POWER, own_pid=os.getpid()))
    result = CliRunner().invoke(main, ["bench", "--family", "paged_decode", "--variant", "v3",
                                       "--shape", "batch=8,context=1024", "--json"])
    assert result.exit_code == 0, result.output
    assert "warning: measured while the GPU was throttled (SW power cap)" in result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["environment"]["throttled"] == ["SW power cap"]
    assert data["environment"]["other_processes"] == []  # this process's own context is not "other"
