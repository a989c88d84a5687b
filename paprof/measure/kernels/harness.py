"""Build a variant on the GPU, check it against the float64 reference, time it.

Shared by the launcher that ncu runs (``paprof.measure.kernels.launch``) and ``paprof bench``.
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

from paprof.family import Family, Sample, relative_error
from paprof.measure.kernels import gpu, kinds

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

    def step(self, i: int = 0):
        """Enqueue one step on input set ``i``; a callable's own output when it returns one."""
        return self.launcher(self.args[i % len(self.args)], self.out_arg)


def prepare(family: Family, variant, params, seed: int | None = None, input_sets: int = 1) -> Prepared:
    variant.check(params)
    launcher = kinds.build(variant, params, gpu.current_device())
    return prepare_on(family, variant, params, launcher, *make_inputs(family, params, seed, input_sets))


def make_inputs(family: Family, params, seed: int | None = None, input_sets: int = 1) -> tuple[list, object]:
    """``input_sets`` sets of fresh random inputs and an output array, on the GPU."""
    cp = gpu.cupy()
    rng = np.random.default_rng(seed)
    inputs = [family.inputs(params, int(rng.integers(2**31)), cp) for _ in range(input_sets)]
    return inputs, family.output(params, cp)


def prepare_on(family: Family, variant, params, launcher, inputs: list, out) -> Prepared:
    """A built ``launcher`` over given inputs and output (several variants of one shape
    share them: ``paprof.measure.kernels.batch``)."""
    cp = gpu.cupy()
    device = gpu.current_device()
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


def compare(out, ref, tol: float, xp, name: str = "family") -> Check:
    """``out`` against the reference: a whole float64 array (``||out - ref|| / ||ref||``)
    or a :class:`~paprof.family.Sample` (the largest relative error over its rows)."""
    if isinstance(ref, Sample):
        rel, max_abs = ref.error(out, xp)
        return Check(math.isfinite(rel) and rel <= tol, rel, max_abs, tol)
    ref = xp.asarray(ref)
    if ref.shape != out.shape:
        raise ValueError(f"{name}: reference shape {ref.shape} != output {out.shape}")
    rel = relative_error(out, ref, xp)
    if not math.isfinite(rel):
        return Check(False, math.inf, math.inf, tol)
    max_abs = float(xp.abs(out.astype(xp.float64) - ref).max())
    return Check(rel <= tol, rel, max_abs, tol)


def produced_array(produced, like):
    """What a callable returned (a CuPy array or anything with ``__dlpack__``) as a CuPy
    array of ``like``'s shape (a reshape, a copy where its strides need one)."""
    cp = gpu.cupy()
    array = produced if isinstance(produced, cp.ndarray) else cp.from_dlpack(produced)
    if array.size != like.size:
        raise ValueError(f"the variant returned an array of shape {tuple(array.shape)}; "
                         f"the output is {tuple(like.shape)}")
    return array.reshape(like.shape)


def reference(prep: Prepared):
    """The family's float64 reference on input set 0 (on the GPU)."""
    return prep.family.reference(prep.params, prep.inputs[0], gpu.cupy())


def verify(prep: Prepared, ref=None) -> Check:
    """Poison, run once on input set 0, compare with the float64 reference (on the GPU;
    ``ref``: one computed before on the same inputs, else computed here).

    A callable that returns its own output (``CallableVariant``) is checked on that."""
    cp = gpu.cupy()
    prep.out.fill(cp.nan if prep.out.dtype.kind in "fc" else -1)  # poison: unwritten fails
    produced = prep.step(0)
    cp.cuda.runtime.deviceSynchronize()
    out = prep.out if produced is None else produced_array(produced, prep.out)
    if ref is None:
        ref = reference(prep)
    return compare(out, ref, prep.family.tolerance_for(prep.params), cp, prep.family.name)


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


GEMM_SIZE = 8192
"""The GEMM ceiling multiplies two GEMM_SIZE x GEMM_SIZE matrices."""

_CUDA_R_16F, _CUDA_R_16BF, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT = 2, 14, 68, -1
"""cuBLAS / CUDA library enum values (cublas_api.h, library_types.h)."""


def _gemm_cupy(cp, n: int, dtype: str):
    """``cupy.matmul`` on ``dtype`` (bf16 needs CuPy's optional ml_dtypes support)."""
    if dtype == "bf16":
        import ml_dtypes  # noqa: PLC0415 (optional)

        kind = np.dtype(ml_dtypes.bfloat16)
    else:
        kind = np.dtype(np.float16)
    rng = cp.random.default_rng(11)
    a = rng.standard_normal((n, n), dtype=cp.float32).astype(kind)
    b = rng.standard_normal((n, n), dtype=cp.float32).astype(kind)
    c = cp.matmul(a, b)
    small = cp.matmul(a[:64, :256], b[:256, :64]).astype(cp.float32)
    want = cp.matmul(a[:64, :256].astype(cp.float32), b[:256, :64].astype(cp.float32))
    return (lambda: cp.matmul(a, b, out=c)), small, want


def _gemm_cublas(cp, n: int, dtype: str):
    """cuBLAS ``GemmEx`` straight through CuPy's binding, on 16-bit bit patterns: bf16
    without any bf16 dtype in CuPy (row-major C = A B is column-major C^T = B^T A^T)."""
    from cupy.cuda import cublas  # noqa: PLC0415

    kind = _CUDA_R_16BF if dtype == "bf16" else _CUDA_R_16F
    rng = cp.random.default_rng(11)

    def bits(x):
        if dtype == "fp16":
            return x.astype(cp.float16).view(cp.uint16)
        u = x.astype(cp.float32).view(cp.uint32)  # bf16: round to nearest even
        return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(cp.uint16)

    def value(x):
        if dtype == "fp16":
            return x.view(cp.float16).astype(cp.float32)
        return (x.astype(cp.uint32) << 16).view(cp.float32)

    a = bits(rng.standard_normal((n, n), dtype=cp.float32))
    b = bits(rng.standard_normal((n, n), dtype=cp.float32))
    c = cp.empty((n, n), dtype=cp.uint16)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    handle = cp.cuda.device.get_cublas_handle()

    def gemm(m, k, cols, pa, pb, pc):
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, 0)  # CUBLAS_POINTER_MODE_HOST: alpha, beta on the host
        try:
            cublas.gemmEx(handle, 0, 0, cols, m, k, one.ctypes.data, pb, kind, cols,
                          pa, kind, k, zero.ctypes.data, pc, kind, cols,
                          _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)
        finally:
            cublas.setPointerMode(handle, mode)

    sa, sb = cp.ascontiguousarray(a[:64, :256]), cp.ascontiguousarray(b[:256, :64])
    sc = cp.empty((64, 64), dtype=cp.uint16)
    gemm(64, 256, 64, sa.data.ptr, sb.data.ptr, sc.data.ptr)
    want = cp.matmul(value(sa), value(sb))
    return (lambda: gemm(n, n, n, a.data.ptr, b.data.ptr, c.data.ptr)), value(sc), want


def measure_gemm_ceiling(dtype: str = "bf16", n: int = GEMM_SIZE, launches: int = 20) -> dict:
    """Median FLOP rate (TFLOP/s) of a cuBLAS ``n``^3 GEMM on the tensor cores, fp32
    accumulation: the compute ceiling of tensor-core work (``Family.ceiling = "gemm"``).

    bf16 goes through cuBLAS ``GemmEx`` directly (CuPy's binding) on bf16 bit patterns,
    since CuPy has a bf16 dtype only with ml_dtypes installed; failing that through
    ``cupy.matmul`` on that dtype; only when both fail is it measured in fp16 (the same
    tensor-core rate on Hopper), and ``dtype`` and ``method`` in the result say which. Each path first multiplies a small product and checks it
    against fp32, so a path that computes garbage is not timed."""
    cp = gpu.cupy()
    attempts = [("cublas.gemmEx", _gemm_cublas, dtype), ("cupy.matmul", _gemm_cupy, dtype)]
    if dtype != "fp16":
        attempts.append(("cupy.matmul", _gemm_cupy, "fp16"))
    notes = []
    for method, make, kind in attempts:
        try:
            run, small, want = make(cp, n, kind)
            err = float(cp.abs(small - want).max() / (cp.abs(want).max() + 1e-30))
            if not err < 2e-2:
                raise ValueError(f"small product off by {err:.2g}")
            for _ in range(3):
                run()
            starts = [cp.cuda.Event() for _ in range(launches)]
            ends = [cp.cuda.Event() for _ in range(launches)]
            for s, e in zip(starts, ends):
                s.record()
                run()
                e.record()
            ends[-1].synchronize()
        except Exception as err:  # this path is missing here (no ml_dtypes ...): the next one
            notes.append(f"{method} {kind}: {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")
            continue
        us = sorted(cp.cuda.get_elapsed_time(s, e) * 1000.0 for s, e in zip(starts, ends))
        median = us[len(us) // 2]
        flops = 2 * n**3
        cp.get_default_memory_pool().free_all_blocks()
        return {"dtype": kind, "method": method, "n": n, "flops": flops, "median_us": median,
                "tflops": flops / median / 1e6, "launches": launches, "notes": notes}
    raise RuntimeError("no GEMM could be timed: " + "; ".join(notes))


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
