"""Build a variant on the GPU, check it against the float64 reference, time it.

Shared by the launcher that ncu runs (``paprof.kernels.launch``) and ``paprof bench``.
Every check draws fresh random inputs and poisons the output with NaN first, so an
element the kernel forgot to write fails the check.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paprof.family import Family, relative_error
from paprof.kernels import gpu, kinds

STREAM_READ_SOURCE = Path(__file__).resolve().parent / "common" / "stream_read.cu"
"""The streaming-read kernel that measures the read ceiling."""
SPIN_SOURCE = Path(__file__).resolve().parent / "common" / "spin.cu"
"""The kernel that holds the stream ahead of timed launches (``hold_stream``)."""
HOLD_MAX_S = 0.5
"""The longest hold ahead of one series of timed launches."""

ROTATE_FACTOR = 5
"""Timed launches rotate over input sets until the bytes they read are this many times the L2."""
MAX_INPUT_SETS = 16


@dataclass
class Check:
    """The outcome of one comparison with the float64 reference."""

    passed: bool
    rel_error: float
    max_abs_error: float
    tolerance: float

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "rel_error": self.rel_error if math.isfinite(self.rel_error) else None,
            "max_abs_error": self.max_abs_error if math.isfinite(self.max_abs_error) else None,
            "tolerance": self.tolerance,
        }


@dataclass
class Prepared:
    """A built variant with its inputs and output on the device.

    ``inputs`` and ``out`` are CuPy arrays (what the reference and the check read);
    ``args`` and ``out_arg`` the same memory as the launcher takes it (PyTorch tensors for
    a callable that asked for them)."""

    family: Family
    variant: object
    params: object
    device: gpu.Device
    launcher: object
    inputs: list = field(default_factory=list)
    out: object = None
    args: list = field(default_factory=list)
    out_arg: object = None

    def step(self, i: int = 0) -> None:
        self.launcher(self.args[i % len(self.args)], self.out_arg)


def prepare(family: Family, variant, params, seed: int | None = None, input_sets: int = 1) -> Prepared:
    cp = gpu.cupy()
    variant.check(params)
    device = gpu.current_device()
    launcher = kinds.build(variant, params, device)
    rng = np.random.default_rng(seed)
    inputs = [family.inputs(params, int(rng.integers(2**31)), cp) for _ in range(input_sets)]
    out = family.output(params, cp)
    convert = launcher.convert or (lambda a: a)
    args = [{k: convert(a) for k, a in i.items()} for i in inputs]
    out_arg = convert(out)
    if launcher.setup is not None:  # a callable's prepare: plans, workspaces, converted inputs
        for a in args:
            launcher.setup(a, out_arg)
        cp.cuda.runtime.deviceSynchronize()
    return Prepared(family, variant, params, device, launcher, inputs, out, args, out_arg)


def input_sets_for(nbytes: int, l2_bytes: int) -> int:
    """How many input copies keep timed launches that move ``nbytes`` out of the L2."""
    need = ROTATE_FACTOR * l2_bytes
    return max(1, min(MAX_INPUT_SETS, -(-need // max(1, nbytes))))


def verify(prep: Prepared) -> Check:
    """Poison, run once on input set 0, compare with the float64 reference (on the GPU)."""
    cp = gpu.cupy()
    prep.out.fill(cp.nan if prep.out.dtype.kind in "fc" else -1)  # poison: unwritten fails
    prep.step(0)
    cp.cuda.runtime.deviceSynchronize()
    ref = cp.asarray(prep.family.reference(prep.params, prep.inputs[0], cp))
    tol = prep.family.tolerance_for(prep.params)
    if ref.shape != prep.out.shape:
        raise ValueError(f"{prep.family.name}: reference shape {ref.shape} != output {prep.out.shape}")
    rel = relative_error(prep.out, ref, cp)
    if not math.isfinite(rel):
        return Check(False, math.inf, math.inf, tol)
    max_abs = float(cp.abs(prep.out.astype(cp.float64) - ref).max())
    return Check(rel <= tol, rel, max_abs, tol)


def hold_seconds(host_step_s: float, launches: int) -> float:
    """How long to hold the stream ahead of ``launches`` timed steps that each take
    ``host_step_s`` of host time to enqueue: twice their enqueue time (the two events of a
    step add their own) plus a millisecond, at most HOLD_MAX_S."""
    return min(HOLD_MAX_S, 2.0 * launches * max(0.0, host_step_s) + 1e-3)


def hold_stream(seconds: float) -> None:
    """Queue a one-thread kernel that keeps the current stream busy for ``seconds``."""
    kernel = gpu.compile_module([SPIN_SOURCE]).get_function("paprof_spin")
    kernel((1,), (1,), (np.uint64(int(seconds * 1e9)),))


def time_steps(prep: Prepared, launches: int, warmup: int = 3, hold: bool = True) -> list[float]:
    """Per-launch durations in microseconds, CUDA events around each step.

    With ``hold`` (the default) the timed steps queue up behind ``hold_stream``, sized from
    the host time of the warm-up steps, so the events time the GPU's work back to back:
    a step whose host side is slower than its kernels (a Python library's launch) would
    otherwise be timed with the host's gaps in it."""
    cp = gpu.cupy()
    host = []
    for i in range(warmup):
        t0 = time.perf_counter()
        prep.step(i)
        host.append(time.perf_counter() - t0)
    starts = [cp.cuda.Event() for _ in range(launches)]
    ends = [cp.cuda.Event() for _ in range(launches)]
    if hold:
        cp.cuda.runtime.deviceSynchronize()  # the warm-up is done: the hold starts now
        hold_stream(hold_seconds(statistics.median(host) if host else 1e-4, launches))
    for i in range(launches):
        starts[i].record()
        prep.step(i)
        ends[i].record()
    ends[-1].synchronize()
    return [cp.cuda.get_elapsed_time(s, e) * 1000.0 for s, e in zip(starts, ends)]


def measure_read_ceiling(nbytes: int = 2 << 30, launches: int = 20) -> dict:
    """Median bandwidth (TB/s) of the streaming-read kernel over ``nbytes`` of random data."""
    cp = gpu.cupy()
    device = gpu.current_device()
    module = gpu.compile_module([STREAM_READ_SOURCE])
    kernel = module.get_function("stream_read")
    words = nbytes // 4
    buf = cp.random.default_rng(7).integers(0, 2**31, size=words, dtype=cp.int32)
    sink = cp.zeros(1, dtype=cp.uint32)
    n_vec = np.uint64(words // 4)
    grid = (device.sm_count * 8,)
    for _ in range(3):
        kernel(grid, (256,), (buf, n_vec, sink))
    starts = [cp.cuda.Event() for _ in range(launches)]
    ends = [cp.cuda.Event() for _ in range(launches)]
    for s, e in zip(starts, ends):
        s.record()
        kernel(grid, (256,), (buf, n_vec, sink))
        e.record()
    ends[-1].synchronize()
    us = sorted(cp.cuda.get_elapsed_time(s, e) * 1000.0 for s, e in zip(starts, ends))
    median = us[len(us) // 2]
    del buf
    return {"bytes": int(words * 4), "median_us": median, "tbs": words * 4 / median / 1e6}
