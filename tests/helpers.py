"""What several test modules build from: stand-ins, synthetic rows and runs, paths.

One module for all of them (``from helpers import make_row``: pytest puts tests/ on the
path, tests/ being no package); fixtures that several modules use are in conftest.py.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pandas as pd

from paprof.explain import compare as C
from paprof.read import metrics as M
from paprof.model.load import columns, variant_rows
from paprof.gate import Settings, compare_to_baseline
from paprof.measure import profile
from paprof.read import store
from paprof.sweep import results
from paprof.sweep.run import VariantOutcome

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


# -- recorded runs (tests/data: copies of runs shipped in examples/, frozen for the tests) ---

ARCHIVES = {"h200": "h200-paged_decode", "h200-source": "h200-paged_decode",
            "sweeps": "h200-paged_decode", "h200-flash_fwd": "h200-flash_fwd"}
"""Which tests/data archive holds each top folder of examples/ the tests read a copy of
(tests/data/README.md; scripts/pack_test_data.sh makes them)."""
_UNPACKED: dict[Path, Path] = {}


def extract(archive: Path, where: Path) -> Path:
    """Extract ``archive`` into ``where`` (data only: no links out, no devices); ``where``."""
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    return where


def _remove(where: Path, owner: int) -> None:
    if os.getpid() == owner:  # not a forked child that inherited the handler
        shutil.rmtree(where, ignore_errors=True)


def unpacked(archive: Path) -> Path:
    """The folder ``archive`` (a ``.tar.xz`` of runs, in tests/data or shipped in
    examples/) is extracted into, once a test process (each pytest-xdist worker is one),
    whichever tests ask; a temporary folder removed when the process exits, usable at
    collection time. Read it, never change it (a test that changes runs copies them first,
    or extracts its own copy: ``extract``)."""
    archive = Path(archive).resolve()
    if archive not in _UNPACKED:
        where = Path(tempfile.mkdtemp(prefix=f"paprof-tests-{archive.name.split('.')[0]}-"))
        atexit.register(_remove, where, os.getpid())
        _UNPACKED[archive] = extract(archive, where)
    return _UNPACKED[archive]


def recorded(path: str = "h200") -> Path:
    """The recorded copy of ``examples/<path>`` (``"h200"``, ``"h200-source"``,
    ``"sweeps/h200-profile"``, ``"h200-flash_fwd"`` ...) from its tests/data archive
    (``unpacked``)."""
    return unpacked(DATA / f"{ARCHIVES[path.split('/')[0]]}.tar.xz") / path


def __getattr__(name: str) -> Path:
    """``EXAMPLES``: the recorded H200 paged_decode runs (``recorded("h200")``, a copy of
    examples/h200), extracted on first use."""
    if name == "EXAMPLES":
        return recorded("h200")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def shipped(variant: str) -> Path:
    """The recorded H200 paged_decode report of ``variant`` (a copy of examples/h200's)."""
    folder = recorded("h200") / "nvidia-h200" / "paged_decode" / variant
    reports = sorted(folder.glob("*.ncu-rep"))
    assert reports and reports[0].with_suffix(".json").is_file(), f"{folder}: no report with its sidecar"
    return reports[0]


def relabelled(report: Path, where: Path, variant: str) -> Path:
    """A run store holding ``report`` as ``variant``'s run (its code regressed to it)."""
    folder = where / "nvidia-h200" / report.parent.parent.name / variant
    folder.mkdir(parents=True)
    shutil.copy(report, folder / report.name)
    side = json.loads(report.with_suffix(".json").read_text())
    side["variant"] = variant
    (folder / report.with_suffix(".json").name).write_text(json.dumps(side))
    return where


# -- ncu_report stand-ins and the rows the analysis reads (paprof.model) -----------------

#: A v3-like kernel on the H200: the value (in the catalogue's column unit) per column.
V3_COLUMNS = {
    "gpu": "NVIDIA H200",
    "duration_us": 600.0,
    "elapsed_cycles": 1.19e6,
    "sm_throughput_pct": 22.0,
    "memory_throughput_pct": 86.0,
    "dram_throughput_pct": 84.9,
    "l1_throughput_pct": 40.0,
    "l2_throughput_pct": 60.0,
    "dram_active_cycles": 1.6e6,
    "registers_per_thread": 39.0,
    "theoretical_occupancy_pct": 41.7,
    "achieved_occupancy_pct": 38.0,
    "block_limit_registers": 12.0,
    "block_limit_shared_mem": 5.0,
    "block_limit_warps": 16.0,
    "block_limit_blocks": 32.0,
    "waves_per_sm": 0.78,
    "grid_size": 512.0,
    "block_size": 128.0,
    "dram_bytes_per_second": 3.6e12,
    "shared_mem_static_bytes": 0.0,
    "shared_mem_dynamic_bytes": 16384.0,
    "sm_count": 132.0,
    "sm_active_cycles": 1.1e6,
    "lsu_pipe_pct": 12.0,
    "fma_pipe_pct": 8.0,
    "alu_pipe_pct": 6.0,
    "fp64_pipe_pct": 0.0,
    "xu_pipe_pct": 2.0,
    "tensor_pipe_pct": 0.0,
    "issue_slots_busy_pct": 15.0,
    "issue_active_pct": 16.0,
    "warps_active_per_scheduler": 6.1,
    "warps_eligible_per_scheduler": 0.2,
    "warp_cycles_per_issue": 38.0,
    "l1_hit_rate_pct": 1.0,
    "l2_hit_rate_pct": 5.0,
    "stall_long_scoreboard": 30.0,
    "stall_barrier": 3.0,
    "stall_selected": 1.0,
}


class FakeMetric:
    """An IMetric with one value in ncu's unit."""

    def __init__(self, value, unit):
        self._value, self._unit = value, unit

    def has_value(self):
        return self._value is not None

    def as_double(self):
        return float(self._value)

    def as_string(self):
        return str(self._value)

    def unit(self):  # ncu 2025.3.1's own module segfaults here: paprof must never call it
        raise AssertionError("IMetric.unit() crashes the ncu_report of Nsight Compute 2025.3.1")


class FakeRule:
    """An IRuleResult with a message and an optional speedup estimate."""

    def __init__(self, rule_id, message, kind=3, title=None, speedup=None):
        self.rule_id, self.message, self.kind = rule_id, message, kind
        self.title, self.speedup = title or rule_id, speedup

    def rule_identifier(self):
        return self.rule_id

    def name(self):
        return self.title

    def has_rule_message(self):
        return self.message is not None

    def rule_message(self):
        return {"title": self.title, "message": self.message, "type": self.kind}

    def has_speedup_estimation(self):
        return self.speedup is not None

    def speedup_estimation(self):
        return {"type": 2, "speedup": self.speedup}


class FakeAction:
    """An IAction: metrics by ncu name, rule results, a kernel name."""

    def __init__(self, name, metrics, rules=()):
        self._name, self._metrics, self._rules = name, metrics, list(rules)
        self.lookups = 0

    def name(self):
        return self._name

    def metric_by_name(self, name):
        self.lookups += 1
        return self._metrics.get(name)

    def rule_results(self):
        return self._rules


def make_action(kernel="paged_decode_v3", rules=(), **columns) -> FakeAction:
    """A fake action with V3_COLUMNS overridden by ``columns`` (None: metric absent).

    Values are given in the catalogue's unit and stored in ncu's unit (1/scale).
    """
    values = dict(V3_COLUMNS, **columns)
    metrics = {}
    for entry in M.MEASURED:
        value = values.get(entry.column)
        if value is None:
            continue
        stored = value if entry.text else value / entry.scale
        metrics[entry.ncu_name] = FakeMetric(stored, entry.ncu_unit)
    return FakeAction(kernel, metrics, rules)


def make_metrics(dram_pct=30.0, sm_pct=30.0, l1_pct=30.0, l2_pct=30.0, lsu_pct=20.0,
                 fma_pct=20.0, alu_pct=10.0, tensor_pct=0.0, issue_pct=25.0,
                 memory_pct=None, occ_pct=60.0, waves=8.0, grid=4096.0, sms=132.0,
                 rules=None, **extra) -> dict:
    """A row (dict of columns) for the bottleneck rules; defaults: a latency-bound
    kernel with every unit well under its peak and plenty of blocks."""
    row = {
        "dram_throughput_pct": dram_pct, "sm_throughput_pct": sm_pct,
        "l1_throughput_pct": l1_pct, "l2_throughput_pct": l2_pct,
        "memory_throughput_pct": (max((v for v in (dram_pct, l1_pct, l2_pct)
                                       if v is not None), default=None)
                                  if memory_pct is None else memory_pct),
        "lsu_pipe_pct": lsu_pct, "fma_pipe_pct": fma_pct, "alu_pipe_pct": alu_pct,
        "fp64_pipe_pct": 0.0, "xu_pipe_pct": 3.0, "tensor_pipe_pct": tensor_pct,
        "issue_slots_busy_pct": issue_pct, "issue_active_pct": issue_pct,
        "achieved_occupancy_pct": occ_pct, "waves_per_sm": waves, "grid_size": grid,
        "sm_count": sms, "top_stall_reason": "long_scoreboard", "top_stall_cycles": 25.0,
        "rules": rules or [],
    }
    row.update(extra)
    return {k: (math.nan if v is None else v) for k, v in row.items()}


# -- the loader's frame, for compare and the reports (paprof.explain.compare) ---------------

SIDE = {
    "schema": 1, "family": "paged_decode", "gpu": "NVIDIA H200", "gpu_slug": "nvidia-h200",
    "driver": "580.159.04", "ncu_version": "2025.3.1.0", "clock_control": "none",
    "preset": "default", "shape": "batch=64,q_heads=32,kv_heads=8,head_dim=128,page=16,context=4096,dtype=fp32",
    "shape_slug": "b64_ctx4096_h32x8_d128_p16_fp32", "created": "2026-11-29T13:00:00+00:00",
    "git_commit": "abc1234", "git_dirty": False,
    "verification": {"passed": True, "rel_error": 1e-7, "max_abs_error": 1e-6, "tolerance": 1e-5},
}

V2 = dict(
    duration_us=4950.0, elapsed_cycles=9.8e6, sm_throughput_pct=17.0, memory_throughput_pct=57.4,
    dram_throughput_pct=57.4, l1_throughput_pct=30.0, l2_throughput_pct=55.0,
    dram_active_cycles=39.1e6, dram_bytes=2.147e9, achieved_bandwidth_gbs=2.147e9 / 4950e-6 / 1e9,
    registers_per_thread=64, shared_mem_per_block_bytes=0, theoretical_occupancy_pct=50.0,
    achieved_occupancy_pct=37.6, block_limit_registers=32, block_limit_shared_mem=32,
    block_limit_warps=64, block_limit_blocks=16, occupancy_limiter="blocks", waves_per_sm=0.97,
    grid_size=2048, block_size=32, bottleneck="latency-bound", sm_count=132,
    issue_active_pct=20.0, top_stall_reason="long_scoreboard", top_stall_cycles=30.0,
)
V3 = dict(
    V2, duration_us=3350.0, elapsed_cycles=6.6e6, sm_throughput_pct=20.0, memory_throughput_pct=84.9,
    dram_throughput_pct=84.9, l1_throughput_pct=33.0, l2_throughput_pct=80.0,
    achieved_bandwidth_gbs=2.147e9 / 3350e-6 / 1e9, registers_per_thread=39,
    shared_mem_per_block_bytes=16384, theoretical_occupancy_pct=41.7, achieved_occupancy_pct=40.1,
    block_limit_registers=12, block_limit_shared_mem=5, block_limit_warps=16, block_limit_blocks=16,
    occupancy_limiter="shared_mem", waves_per_sm=0.78, grid_size=512, block_size=128,
    bottleneck="dram-bound",
)


def make_row(variant="v2", kernel=None, report=None, sidecar="default", launch=0, rules=(),
             evidence=None, **metrics) -> dict:
    """One loader row: V2's numbers overridden by ``metrics``."""
    row = {c: math.nan for c in columns()}
    row.update({k: v for k, v in V2.items()})
    row.update(metrics)
    side = dict(SIDE, variant=variant) if sidecar == "default" else sidecar
    row.update(
        variant=variant, family="paged_decode", kernel=kernel or f"paged_decode_{variant}",
        launch=launch, step=launch, shape=(side or {}).get("shape", ""), gpu=(side or {}).get("gpu", "NVIDIA H200"),
        rules=list(rules), report_path=report or f"/runs/nvidia-h200/paged_decode/{variant}/b64.ncu-rep",
        sidecar=side, result_index=0,
        bottleneck_evidence=evidence if evidence is not None else [f"evidence for {metrics.get('bottleneck', V2['bottleneck'])}"],
    )
    return row


def make_frame(*rows: dict) -> pd.DataFrame:
    """The loader's frame from rows (result_index numbered per report)."""
    seen: dict[str, int] = {}
    for row in rows:
        row["result_index"] = seen.get(row["report_path"], 0)
        seen[row["report_path"]] = row["result_index"] + 1
    df = pd.DataFrame(list(rows), columns=columns())
    df.attrs["missing"] = {}
    return df


def comparison(*rows: dict, thresholds=C.THRESHOLDS, order=None, cross=False) -> C.Comparison:
    df = make_frame(*rows)
    return C.compare(df, variant_rows(df), order=order, thresholds=thresholds, cross=cross)


def split_rows(variant="v4", **kw) -> list[dict]:
    """A split-KV variant: a partial kernel and a small merge kernel in one report."""
    report = f"/runs/nvidia-h200/paged_decode/{variant}/b64.ncu-rep"
    partial = make_row(variant, kernel=f"paged_decode_{variant}_partial", report=report,
                       **dict(dict(duration_us=3920.0, dram_throughput_pct=73.4, grid_size=8192,
                                   block_size=32, bottleneck="dram-bound", dram_bytes=2.2e9,
                                   dram_active_cycles=40e6, waves_per_sm=3.9), **kw))
    merge = make_row(variant, kernel=f"paged_decode_{variant}_merge", report=report,
                     duration_us=22.6, dram_throughput_pct=85.7, grid_size=2048, block_size=32,
                     dram_bytes=0.02e9, dram_active_cycles=0.2e6, bottleneck="dram-bound")
    return [partial, merge]


# -- per-launch tables and verdicts for the regression gate (paprof.gate) --------------------

SHAPE = "batch=64,q_heads=32,kv_heads=8,head_dim=128,page=16,context=4096,dtype=fp32"
OTHER_SHAPE = SHAPE.replace("batch=64", "batch=8")
SECTIONS = ["SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats"]


def make_sidecar(**override) -> dict:
    side = {
        "schema": 1,
        "family": "paged_decode",
        "gpu": "NVIDIA H200",
        "ncu_version": "2025.3.1.0",
        "clock_control": "none",
        "sections": SECTIONS,
        "preset": "default",
        "driver": "580.159.04",
        "git_commit": "abc1234",
        "created": "2026-11-29T13:00:00+00:00",
    }
    side.update(override)
    return side


def make_rows(
    variant="v3",
    dram=(80.0,),
    duration=(1000.0,),
    dram_bytes=(2.0e9,),
    shape=SHAPE,
    family="paged_decode",
    report=None,
    **sidecar,
) -> list[dict]:
    """One row per launch (the loader's ``variant_rows`` layout) of one report; a
    metric given one value has that value at every launch."""
    n = max(len(dram), len(duration), len(dram_bytes))
    dram, duration, dram_bytes = (v * n if len(v) == 1 else v for v in (dram, duration, dram_bytes))
    assert len(dram) == len(duration) == len(dram_bytes) == n
    side = make_sidecar(**sidecar)
    report = report or f"runs/nvidia-h200/{family}/{variant}/{shape}.ncu-rep"
    return [
        {
            "variant": variant,
            "family": family,
            "launch": i,
            "shape": shape,
            "gpu": side.get("gpu"),
            "dram_throughput_pct": d,
            "duration_us": t,
            "dram_bytes": b,
            "report_path": report,
            "sidecar": side,
        }
        for i, (d, t, b) in enumerate(zip(dram, duration, dram_bytes))
    ]


def make_table(*row_lists, missing=None) -> pd.DataFrame:
    df = pd.DataFrame([row for rows in row_lists for row in rows])
    df.attrs["missing"] = missing or {}
    return df


def verdict_for(baseline, *row_lists, **settings):
    return compare_to_baseline(baseline, make_table(*row_lists), Settings(**settings))


# -- a fake ncu and nvidia-smi (tests/fake_ncu) and a fake launcher (paprof.measure) --------

FAKE_DIR = Path(__file__).resolve().parent / "fake_ncu"
REPORT_ENV = "PAPROF_TEST_NCU_REP"
"""A real .ncu-rep for the end-to-end test; default: the first of the recorded H200 runs."""
FAKE_VARS = ("FAKE_NCU_MODE", "FAKE_NCU_REPORT", "FAKE_NCU_ARGV", "FAKE_NCU_PASSES", "FAKE_NCU_PID",
             "FAKE_NCU_APP_PID", "FAKE_NVIDIA_SMI", "FAKE_NCU_ARGVS", "FAKE_NCU_TIMING_REPORT",
             "FAKE_NCU_SESSION_FAIL", "FAKE_NCU_CHILDREN")


def real_report() -> Path:
    """A report ncu 2025.3 wrote on the H200 (``$PAPROF_TEST_NCU_REP``, else the first
    recorded one)."""
    named = os.environ.get(REPORT_ENV)
    if named:
        return Path(named)
    return sorted(recorded("h200").rglob("*.ncu-rep"))[0]


def _arg(argv, name):
    return argv[argv.index(name) + 1]


@dataclass
class FakeLauncher:
    """Replaces ``profile.run_launcher`` (the GPU step): records argv, writes ``--result``."""

    returncode: int = 0
    output: str = ""
    result: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    envs: list = field(default_factory=list)

    variants: dict = field(default_factory=dict)
    """With the batch launcher (``--variants``): per variant id, what to put in its result
    instead (``{"check": {"passed": False, ...}}``, ``{"skipped": why}``)."""

    def _one(self, argv, variant):
        data = {
            "family": _arg(argv, "--family"),
            "variant": variant,
            "shape": _arg(argv, "--shape"),
            "gpu": "NVIDIA H200",
            "kernels": [f"{_arg(argv, '--family')}_{variant}"],
            "check": {"passed": True, "rel_error": 1.2e-7, "max_abs_error": 3.0e-7, "tolerance": 1e-5},
            "duration_us_median": 3350.0,
            "work": {"bytes": 2147483648, "flops": 4294967296, "flop_kind": "fp32"},
            "bandwidth_tbs": 4.1,
            "phases": [{"phase": "build", "s": 0.0}, {"phase": "check", "s": 0.0}],
        }
        data.update(self.result)
        data.update(self.variants.get(variant, {}))
        return data

    def __call__(self, argv, env):
        argv = list(argv)
        self.calls.append(argv)
        self.envs.append(dict(env))
        if "--variants" in argv:  # paprof.measure.kernels.batch: every variant in one result
            data = {"variants": {v: self._one(argv, v) for v in _arg(argv, "--variants").split(",")},
                    "phases": [{"phase": "inputs", "s": 0.0}, {"phase": "reference", "s": 0.0}]}
        else:
            data = self._one(argv, _arg(argv, "--variant"))
        if self.returncode == 0:
            Path(_arg(argv, "--result")).write_text(json.dumps(data))
        return profile.LauncherOutcome(self.returncode, self.output)


# -- a sweep's point runner that writes synthetic bench records (paprof.sweep) ---------------

GPU = "NVIDIA H200"


def record(family: str, variant: str, params, median_us: float, gpu: str = GPU, **extra) -> dict:
    """A bench record as ``bench_point`` writes it, with made-up numbers."""
    work = {"bytes": 2 * params.batch * params.context * 8 * 128 * 2, "flops": 0, "flop_kind": "fp32"}
    tbs = work["bytes"] / median_us / 1e6
    data = {
        "kind": results.BENCH_KIND, "schema": results.BENCH_SCHEMA, "family": family,
        "variant": variant, "shape": params.spec(), "shape_slug": params.slug(),
        "params": params.to_dict(), "work": work, "gpu": gpu, "gpu_slug": store.slug(gpu),
        "driver": "580.159.04", "read_ceiling_tbs": 4.5, "launches": 100, "rounds": 2,
        "median_us": median_us, "tbs": tbs, "tflops": None, "pct_of_ceiling": 100 * tbs / 4.5,
        "passed": True, "rel_error": 1e-4, "git_commit": "abc1234", "paprof_version": "0.1.0",
        "created": "2026-12-01T10:00:00+00:00",
    }
    data.update(extra)
    return data


def write_record(runs: Path, data: dict) -> Path:
    path = results.bench_path(runs, data["gpu_slug"], data["family"], data["variant"], data["shape_slug"])
    store.write_json_atomic(path, data)
    return path


def v5_v6_times(variant: str, params) -> float:
    """v6 is 3x faster than v5 below batch 16, the same from batch 16 on (both ~ bytes)."""
    base = params.batch * params.context / 1000.0
    if variant == "v6" and params.batch < 16:
        return base / 3
    return base * (1.005 if variant == "v6" else 1.0)


@dataclass
class FakeRunner:
    """A ``PointRunner``: records each call, writes a record per variant; ``interrupt_at``
    (1-based call number) raises KeyboardInterrupt there; ``fail`` names variants that
    fail verification."""

    times: Callable = v5_v6_times
    interrupt_at: int | None = None
    fail: tuple = ()
    gpu: str = GPU
    calls: list = field(default_factory=list)

    def __call__(self, family, variants, params, runs, settings, say):
        self.calls.append((params.slug(), [v.id for v in variants]))
        say("timing")
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        out = []
        for v in variants:
            if v.id in self.fail:
                out.append(VariantOutcome(v.id, "failed", "relative error 3e-01 is over the tolerance"))
                continue
            path = write_record(Path(runs), record(family.name, v.id, params, self.times(v.id, params),
                                                   gpu=self.gpu))
            out.append(VariantOutcome(v.id, "done", result=path, summary="ok"))
        return out


# -- pynvml (nvidia-ml-py) for tests without a GPU (paprof.measure.environment) -------------

class NVMLError(Exception):
    pass


class FakeNvml:
    """Put into ``sys.modules["pynvml"]``: it answers the calls ``paprof.measure.environment``
    makes, with the clock event reasons and processes the test gives."""

    NVMLError = NVMLError
    __version__ = "12.0.0-fake"

    def __init__(self, reasons: int = 0, processes=(), sm_clock: int = 1980,
                 fail_init: bool = False, own_pid: int | None = None):
        self.reasons = reasons
        self.processes = [SimpleNamespace(pid=p, usedGpuMemory=512 << 20) for p in processes]
        if own_pid is not None:
            self.processes.append(SimpleNamespace(pid=own_pid, usedGpuMemory=None))
        self.sm_clock = sm_clock
        self.fail_init = fail_init
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.fail_init:
            raise NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return ("gpu", uuid)

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return self.sm_clock if kind == 1 else 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 71

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return list(self.processes)


# -- the kernel lab, the tests' sample plugin (tests marked ``lab``) --------------------------

LAB_FAMILY = "paged_decode"
"""The lab family the ``lab`` tests use as a real plugin, reached through the registry
like any user's family (never imported: the tool's tests name no module of the lab)."""


def lab_params():
    """``paged_decode``'s parameter class (``Family.params``)."""
    from paprof import registry

    return registry.family(LAB_FAMILY).params


def lab_shape(text: str | None = None):
    """``paged_decode``'s parameters parsed from ``text`` (its defaults for None)."""
    return lab_params().parse(text)


def gone(pid: int) -> bool:
    """Whether the process ``pid`` has ended: absent, or a zombie (killed, not yet reaped
    by the process it was handed to)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


# -- a lighter preset, emulated on recorded reports --------------------------------------------

def preset_readers(preset, metrics: Callable, rules: Callable, opcodes: bool = False,
                   seen_rules: set | None = None) -> tuple[Callable, Callable]:
    """Stand-ins for the loader's ``_metrics`` and ``read_rules`` (given as ``metrics`` and
    ``rules``) that read a report as a run under ``preset`` would hold it: every catalogue
    column the preset does not collect absent (NaN, or "" for text, as a report without
    the metric gives it), every rule of a section it leaves out gone. ``opcodes``: keep
    the per-opcode counts whatever the sections (ncu 2025.3.1's basic sections collect
    them). ``seen_rules`` collects the ids of every rule read."""

    def collected(m: M.Metric) -> bool:
        return m.section == M.DEVICE or m.section in preset.sections or m.ncu_name in preset.metrics

    keep_opcodes = opcodes or "InstructionStats" in preset.sections or M.OPCODE_METRIC in preset.metrics

    def preset_metrics(action, entries):
        values = metrics(action, entries)
        for column in values:
            m = M.BY_COLUMN.get(column)
            if m is None:
                continue
            if column in M.OPCODE_COLUMNS and not keep_opcodes:
                values[column] = math.nan
            elif column not in M.OPCODE_COLUMNS and not m.derived and not collected(m):
                values[column] = "" if m.text else math.nan
        return values

    def preset_rules(action):
        found = rules(action)
        if seen_rules is not None:
            seen_rules.update(r["id"] for r in found)
        return [r for r in found if M.RULE_SECTIONS.get(r["id"]) in preset.sections]

    return preset_metrics, preset_rules
