"""Where a run's time goes (issue 40, point 2): the phases of each variant's ``paprof run``
in its record and ``paprof run --timings``; the fixed costs paid once for several variants
(one launcher process checks and times them all on shared inputs against one reference;
the SASS hashes compiled ahead, in parallel). With the fake ncu, the fake launcher and a
NumPy stand-in for CuPy: no GPU."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from paprof import phases as ph
from paprof import registry
from paprof.errors import UserError
from paprof.family import CallableVariant, Family, Params, Work, param
from paprof.measure.kernels import batch, gpu, harness
from paprof.measure.argv import NcuSettings
from paprof.measure.profile import profile_variant, profile_variants
from paprof.read.record import RunRecord

from helpers import lab_shape, recorded


# -- the record -------------------------------------------------------------------------------

def test_a_record_without_phases_still_loads_and_a_damaged_one_is_one_line(tmp_path):
    shipped = next(recorded("h200").rglob("*.json"))
    old = RunRecord.read(shipped)
    assert ph.KEY not in old.data and old.phases == ()
    good = {**old.data, ph.KEY: [{"phase": "build", "s": 1.25},
                                 {"phase": "replay", "s": 30.0, "passes": 35, "kernels": 1},
                                 {"phase": "inputs", "s": 2.0, "shared": 4},
                                 {"phase": "SASS hash", "s": 5.0, "overlapped": True}]}
    rec = RunRecord.from_sidecar(good)
    assert [p.name for p in rec.phases] == ["build", "replay", "inputs", "SASS hash"]
    assert rec.phases[1].passes == 35 and rec.phases[2].own_seconds == 0.5
    assert rec.phases[3].own_seconds == 0.0
    for bad in ("build", [{"phase": "build"}], [{"phase": "x", "s": -1}], [{"phase": "x", "s": 1e308}],
                [{"s": 1}], [{"phase": "x", "s": 1, "passes": "35"}]):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**old.data, ph.KEY: bad}))
        with pytest.raises(UserError, match=r"damaged record .*bad\.json: .*'phases'"):
            RunRecord.read(path)


def test_totals_count_a_shared_phase_once_and_leave_out_what_ran_beside():
    a = [ph.Phase("launcher start", 3.0, shared=3), ph.Phase("build", 1.0),
         ph.Phase("SASS hash", 4.0, overlapped=True), ph.Phase("replay", 10.0, passes=35)]
    b = [ph.Phase("launcher start", 3.0, shared=3), ph.Phase("build", 2.0), ph.Phase("mine", 1.0)]
    c = [ph.Phase("launcher start", 3.0, shared=3), ph.Phase("replay", 5.0)]
    sums = ph.totals([a, b, c])
    assert list(sums) == ["launcher start", "build", "SASS hash", "replay", "mine"]
    assert sums == pytest.approx({"launcher start": 3.0, "build": 3.0, "SASS hash": 0.0,
                                  "replay": 15.0, "mine": 1.0})
    assert ph.overlapped([a, b, c]) == 4.0


@pytest.fixture
def no_nvcc(monkeypatch):
    """The SASS hash without nvcc (compiling is the static gate's tests' to test): quick."""
    from paprof.measure import sass_hash

    monkeypatch.setattr(sass_hash, "hash_sass", lambda variant, params, arch=None: sass_hash.not_taken("test"))


# -- one variant alone: the launcher's own phases, the hash, ncu's start, replay and end -------

@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_one_variant_records_every_phase_in_running_order(fake_bin, fake_launcher, no_nvcc, tmp_path):
    run = profile_variant(registry.get("v3"), lab_shape("batch=64,context=4096"), NcuSettings(),
                          tmp_path / "runs")
    side = json.loads(run.report.with_suffix(".json").read_text())
    names = [p["phase"] for p in side[ph.KEY]]
    assert names == ["launcher start", "build", "check", "SASS hash", "provenance", "ncu start", "replay",
                     "ncu end"]
    replay = side[ph.KEY][names.index("replay")]
    assert (replay["passes"], replay["kernels"]) == (20, 1)  # counted from ncu's ==PROF== lines
    assert all(p["s"] >= 0 for p in side[ph.KEY])
    assert run.sidecar.phases[names.index("replay")].passes == 20


# -- several variants: the fixed costs paid once -------------------------------------------------

@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_several_variants_are_checked_and_timed_in_one_launcher_process(fake_bin, fake_launcher, no_nvcc, tmp_path):
    variants = [registry.get(v) for v in ("v2", "v3", "v5")]
    outcomes = profile_variants(variants, lab_shape("batch=64,context=4096"), NcuSettings(seed=4),
                                tmp_path / "runs")
    (call,) = fake_launcher.calls  # one process, not one a variant
    assert call[call.index("-m") + 1] == "paprof.measure.kernels.batch"
    assert call[call.index("--variants") + 1] == "v2,v3,v5"
    assert call[call.index("--seed") + 1] == "4" and call[call.index("--time") + 1] == "20"
    for o in outcomes:
        phases = {p.name: p for p in o.run.sidecar.phases}
        for shared in ("launcher start", "inputs", "reference"):
            assert phases[shared].shared == 3
        assert phases["SASS hash"].overlapped  # built ahead, beside the GPU's work
        assert o.run.sidecar["duration_us_event"] == 3350.0 and o.run.sidecar["verified"] is True
    sums = ph.totals([o.run.sidecar.phases for o in outcomes])
    start = outcomes[0].run.sidecar.phases[0]
    assert sums["launcher start"] == pytest.approx(start.seconds)  # once, not three times


@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_a_variant_the_batch_skipped_or_failed_goes_as_alone(fake_bin, fake_launcher, no_nvcc, tmp_path):
    fake_launcher.variants = {"v2": {"skipped": "v2 needs a larger GPU"},
                              "v3": {"error": "CUDARuntimeError: an illegal memory access", "exit_code": 2}}
    variants = [registry.get(v) for v in ("v2", "v5", "v3")]
    with pytest.raises(UserError, match="launcher for paged_decode/v3 failed: CUDARuntimeError"):
        profile_variants(variants, lab_shape("batch=64,context=4096"), NcuSettings(), tmp_path / "runs")
    stored = sorted(p.parent.name for p in (tmp_path / "runs").rglob("*.ncu-rep"))
    assert stored == ["v5"]  # v2 skipped with its reason, v5 profiled, v3 stopped the loop


@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_the_hashes_are_taken_again_for_a_gpu_of_another_target(fake_bin, fake_launcher, tmp_path, monkeypatch):
    from paprof.measure import sass_hash

    asked = []
    monkeypatch.setattr(sass_hash, "hash_sass", lambda v, p, arch: asked.append((v.id, arch)) or
                        {"taken": False, "why": "test"})
    fake_launcher.result = {"arch": "sm_80"}
    profile_variants([registry.get("v2"), registry.get("v3")], lab_shape("batch=64,context=4096"),
                     NcuSettings(), tmp_path / "runs")
    assert sorted(a for a in asked if a[1] == "sm_80") == [("v2", "sm_80"), ("v3", "sm_80")]


@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_run_timings_shows_a_table_per_variant_then_the_totals(paprof_cli, fake_bin, fake_launcher, no_nvcc, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    args = ["run", "--variant", "v2", "--variant", "v3", "--runs", str(tmp_path / "runs"), "--timings"]
    result = CliRunner().invoke(paprof_cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "paged_decode/v2: phases" in out and "paged_decode/v3: phases" in out
    assert "all variants: phases" in out and "wall clock" in out
    assert "20 passes, 1 kernels" in out and "shared by 2 variants" in out
    plain = CliRunner().invoke(paprof_cli, args[:-1] + ["--force"], catch_exceptions=False)
    assert plain.exit_code == 0 and "phases" not in plain.output
    assert "--preset basic" not in out  # the fake's replay passes take no time
    monkeypatch.setenv("FAKE_NCU_MODE", "slow")  # they take most of it: say what basic saves
    slow = CliRunner().invoke(paprof_cli, args + ["--force"], catch_exceptions=False)
    assert slow.exit_code == 0 and "of this run: --preset basic replays fewer" in slow.output


def _outcome(phases):
    run = types.SimpleNamespace(sidecar=types.SimpleNamespace(phases=tuple(phases)))
    return types.SimpleNamespace(run=run, variant=types.SimpleNamespace(name="v"))


def test_timings_say_what_basic_saves_where_replay_passes_were_most_of_the_run():
    from paprof.commands.run_timings import faster_hint

    mostly = [_outcome([ph.Phase(ph.START, 2.0, shared=2), ph.Phase(ph.REPLAY, 28.0, passes=35, kernels=1)]),
              _outcome([ph.Phase(ph.START, 2.0, shared=2), ph.Phase(ph.REPLAY, 3.0, passes=35, kernels=1)])]
    hint = faster_hint(mostly, "default")
    assert hint.startswith("replay passes took 94 % of this run: --preset basic")  # 31 of 33 s (the shared start once)
    assert "no traffic tables or roofline, so causes on the memory side" in hint
    assert faster_hint(mostly, "basic") is None and faster_hint(mostly, "memory") is None
    little = [_outcome([ph.Phase(ph.START, 5.0), ph.Phase(ph.REPLAY, 4.0, passes=35, kernels=1)])]
    assert faster_hint(little, "default") is None
    assert faster_hint([_outcome([])], "default") is None  # a record without phases


# -- the batch launcher itself, on a NumPy stand-in for CuPy -------------------------------------

class _Cupy:
    def __init__(self):
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None),
                                          Event=None)

    def __getattr__(self, name):
        return getattr(np, name)

    def get_default_memory_pool(self):
        return types.SimpleNamespace(free_all_blocks=lambda: None)


@pytest.fixture
def numpy_gpu(monkeypatch):
    device = types.SimpleNamespace(name="fake", l2_bytes=1 << 20, sm_count=4, compute_capability="9.0")
    monkeypatch.setattr(gpu, "cupy", lambda: _Cupy())
    monkeypatch.setattr(gpu, "current_device", lambda: device)
    monkeypatch.setattr(harness, "time_steps", lambda prep, launches: [5.0] * launches)


@pytest.fixture
def toy():
    made = {"inputs": 0, "reference": 0}

    def inputs(p, seed, xp):
        made["inputs"] += 1
        return {"x": np.random.default_rng(seed).standard_normal(p.n)}

    def reference(p, i, xp):
        made["reference"] += 1
        return i["x"] * 2.0

    def double(i, o, p):
        o[:] = i["x"] * 2.0

    def wrong(i, o, p):
        o[:] = i["x"]

    def vandal(i, o, p):  # writes where it should only read
        o[:] = i["x"] * 2.0
        i["x"][0] += 1.0

    family = Family(name="toy_batch", params=_Size, inputs=inputs,
                    output=lambda p, xp: np.empty(p.n), reference=reference,
                    work=lambda p: Work(bytes=16 * p.n),
                    variants=[CallableVariant("a", "right", fn=double),
                              CallableVariant("b", "wrong", fn=wrong),
                              CallableVariant("c", "writes its input", fn=vandal),
                              CallableVariant("d", "right again", fn=double)])
    return family, made


@dataclass(frozen=True)
class _Size(Params):
    n: int = param(64, min=1)


def test_the_batch_shares_the_inputs_and_the_reference_and_says_who_failed(numpy_gpu, toy):
    family, made = toy
    out = batch.check_and_time(family, family.variants, _Size(), seed=1, time_launches=4)
    results = out["variants"]
    assert results["a"]["check"]["passed"] and results["a"]["duration_us_median"] == 5.0
    assert results["b"]["check"]["passed"] is False and "duration_us_median" not in results["b"]
    assert results["c"]["check"]["passed"] and results["c"]["inputs_changed"] is True
    assert results["d"]["check"]["passed"]  # on fresh inputs, not on c's leftovers
    # once for a and b, and again after c wrote into its inputs
    assert (made["inputs"], made["reference"]) == (2 * out["input_sets"], 2)
    shared = [p["phase"] for p in out["phases"]]
    assert shared == ["inputs", "reference", "inputs", "reference"]
    assert [p["phase"] for p in results["a"]["phases"]] == ["build", "check", "timing"]
    assert [p["phase"] for p in results["b"]["phases"]] == ["build", "check"]


def test_the_batch_under_ncu_pushes_each_variants_range_around_its_steps_and_goes_past_a_failure(
        numpy_gpu, toy, monkeypatch):
    """``--profile-launches``: the process one ncu session profiles for every variant."""
    family, made = toy
    said: list = []
    nvtx = types.SimpleNamespace(RangePush=lambda name: said.append(("push", name)),
                                 RangePop=lambda: said.append(("pop",)))
    cupy = _Cupy()
    cupy.cuda.nvtx = nvtx
    monkeypatch.setattr(gpu, "cupy", lambda: cupy)

    def broken(i, o, p):
        raise RuntimeError("an illegal memory access\nmore")

    family.variants.append(CallableVariant("e", "breaks", fn=broken))
    out = batch.profile_all(family, [family.variant(v) for v in ("a", "e", "d")], _Size(), seed=1, launches=2)
    results = out["variants"]
    assert results["a"]["profiled_launches"] == 2 and results["a"]["step_range"] == family.variant("a").nvtx_range
    assert results["e"] == {"error": "RuntimeError: an illegal memory access", "exit_code": 2,
                            "phases": results["e"]["phases"]}
    assert results["d"]["nvtx"] is True and made["reference"] == 0  # nothing checked under ncu
    pushes = [s[1] for s in said if s[0] == "push"]
    a, d = family.variant("a").nvtx_range, family.variant("d").nvtx_range
    assert pushes[:2] == [a, a] and pushes[-2:] == [d, d]
    assert said.count(("pop",)) == len(pushes)


def test_the_launcher_alone_times_its_phases(numpy_gpu, toy, monkeypatch):
    from paprof.measure.kernels import launch

    family, made = toy
    monkeypatch.setattr(registry, "get", lambda variant, fam=None: family.variant(variant))
    monkeypatch.setattr(registry, "family_of", lambda variant: family)
    args = launch.parser().parse_args(["--variant", "a", "--time", "3", "--profile-launches", "0"])
    result = launch.run(args)
    assert [p["phase"] for p in result["phases"]] == ["build", "inputs", "reference", "check", "timing"]
    assert result["check"]["passed"] and made["reference"] == 1
    wrong = launch.run(launch.parser().parse_args(["--variant", "b", "--time", "3"]))
    assert [p["phase"] for p in wrong["phases"]] == ["build", "inputs", "reference", "check"]


@pytest.mark.lab
def test_the_modules_built_ahead_are_the_ones_each_variants_build_asks_for(monkeypatch):
    """The batch compiles every variant's modules in parallel threads first (NVRTC); each
    lab variant's own build (its hook) must then find every module it asks for compiled,
    with the same sources, defines, target and options, or the build ahead buys nothing."""
    from paprof.measure.kernels import kinds

    asked: list = []

    class Kernel:
        num_regs, shared_size_bytes, max_dynamic_shared_size_bytes = 64, 0, 0

    def compile_module(sources, defines=None, arch=None, flags=()):
        asked.append((tuple(map(str, sources)), tuple(sorted((defines or {}).items())), arch, tuple(flags)))
        return types.SimpleNamespace(get_function=lambda name: Kernel())

    device = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", sm_count=132, l2_bytes=50 << 20,
                                   compute_capability="9.0", smem_per_block_optin=227 * 1024,
                                   smem_per_sm=228 * 1024, regs_per_sm=65536, max_threads_per_sm=2048,
                                   max_blocks_per_sm=32)
    cupy = _Cupy()
    cupy.cuda.runtime.getDevice, cupy.cuda.runtime.setDevice = (lambda: 0), (lambda d: None)
    monkeypatch.setattr(gpu, "compile_module", compile_module)
    monkeypatch.setattr(gpu, "cupy", lambda: cupy)
    monkeypatch.setattr(gpu, "current_device", lambda: device)
    variants = registry.resolve(("all",), "paged_decode")
    params = registry.family_of(variants[0]).parse(None)
    assert batch.build_ahead(variants, params, workers=2) >= len(variants)
    ahead = set(asked)
    for variant in variants:
        asked.clear()
        kinds.build(variant, params, device)
        assert asked and set(asked) <= ahead, variant.id


@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_each_variant_alone_as_before_when_asked(fake_bin, fake_launcher, no_nvcc, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPROF_RUN_ALONE", "1")
    outcomes = profile_variants([registry.get("v2"), registry.get("v3")], lab_shape("batch=64,context=4096"),
                                NcuSettings(), tmp_path / "runs")
    assert [c[c.index("-m") + 1] for c in fake_launcher.calls] == ["paprof.measure.kernels.launch"] * 2
    for o in outcomes:
        assert [p.name for p in o.run.sidecar.phases][:3] == ["launcher start", "build", "check"]
        assert not any(p.shared > 1 or p.overlapped for p in o.run.sidecar.phases)


@pytest.mark.lab  # the lab's paged_decode, as a user's plugin
def test_the_gpu_the_driver_and_ncus_version_are_asked_once_a_command(fake_bin, fake_launcher, no_nvcc, tmp_path,
                                                                      monkeypatch):
    from paprof.measure import provenance

    asked: list = []
    run = provenance._run
    monkeypatch.setattr(provenance, "_run", lambda argv, cwd, timeout: asked.append(argv[:2]) or run(argv, cwd, timeout))
    outcomes = profile_variants([registry.get(v) for v in ("v2", "v3", "v5")], lab_shape("batch=64,context=4096"),
                                NcuSettings(), tmp_path / "runs")
    assert all(o.run.sidecar["driver"] == "580.159.04" for o in outcomes)
    names = [Path(a[0]).name for a in asked]
    assert names.count("nvidia-smi") == 1 and [a for a in asked if a[1:] == ["--version"]] != []
    assert sum(a[1:] == ["--version"] for a in asked) == 1
    asked.clear()
    profile_variant(registry.get("v3"), lab_shape("batch=64,context=4096"), NcuSettings(), tmp_path / "more")
    assert [Path(a[0]).name for a in asked].count("nvidia-smi") == 2  # outside a command: asked as before
