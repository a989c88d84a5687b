"""Build a variant on the GPU, check it against the float64 reference, time it.

Shared by the launcher that ncu runs (``paprof.kernels.launch``) and ``paprof bench``.
Every check draws fresh random inputs and poisons the output with NaN first, so an
element the kernel forgot to write fails the check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paprof.kernels import gpu, problem
from paprof.kernels.problem import Shape

TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 2e-3}
"""Largest accepted ||out - ref|| / ||ref|| per K/V dtype."""

ROTATE_FACTOR = 5
"""Timed launches rotate over input sets until the K/V bytes are this many times the L2."""
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
    """A compiled variant with its inputs and output on the device."""

    variant: object
    shape: Shape
    device: gpu.Device
    launcher: object
    inputs: list = field(default_factory=list)
    out: object = None

    def step(self, i: int = 0) -> None:
        self.launcher(self.inputs[i % len(self.inputs)], self.out)


def prepare(variant, shape: Shape, seed: int | None = None, input_sets: int = 1) -> Prepared:
    cp = gpu.cupy()
    variant.check(shape)
    device = gpu.current_device()
    launcher = variant.build(shape, device)
    rng = np.random.default_rng(seed)
    inputs = [problem.make_inputs(shape, int(rng.integers(2**31)), xp=cp) for _ in range(input_sets)]
    out = cp.empty((shape.batch, shape.q_heads, shape.head_dim), dtype=cp.float32)
    return Prepared(variant, shape, device, launcher, inputs, out)


def input_sets_for(shape: Shape, l2_bytes: int) -> int:
    """How many K/V copies keep timed launches from being served by the L2."""
    need = ROTATE_FACTOR * l2_bytes
    return max(1, min(MAX_INPUT_SETS, -(-need // max(1, shape.kv_bytes))))


def verify(prep: Prepared) -> Check:
    """Poison, run once on input set 0, compare with the float64 reference (on the GPU)."""
    cp = gpu.cupy()
    prep.out.fill(cp.nan)
    prep.step(0)
    cp.cuda.runtime.deviceSynchronize()
    ref = problem.reference(prep.inputs[0], prep.shape, xp=cp)
    out = prep.out.astype(cp.float64)
    tol = TOLERANCE[prep.shape.dtype]
    if not bool(cp.isfinite(out).all()):
        return Check(False, math.inf, math.inf, tol)
    rel = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
    max_abs = float(cp.abs(out - ref).max())
    return Check(rel <= tol, rel, max_abs, tol)


def time_steps(prep: Prepared, launches: int, warmup: int = 3) -> list[float]:
    """Per-launch durations in microseconds, CUDA events around each decode step."""
    cp = gpu.cupy()
    for i in range(warmup):
        prep.step(i)
    starts = [cp.cuda.Event() for _ in range(launches)]
    ends = [cp.cuda.Event() for _ in range(launches)]
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
    module = gpu.compile_module([Path(__file__).resolve().parent / "common" / "stream_read.cu"])
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
