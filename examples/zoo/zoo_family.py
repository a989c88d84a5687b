"""The ``zoo`` family: pairs of kernels, each pair slow for ONE known reason.

Ground truth for paprof's explanations. Every pair ``<pair>_slow`` / ``<pair>_fast``
computes the same function of the same inputs (both are checked against one float64
reference) and differs in exactly one performance cause, named in ``causes.toml``
together with the ncu metrics a correct explanation should cite.

One family, one function per pair: paprof's ``inputs``, ``output`` and ``reference`` are
functions of the parameters alone, so the parameter ``pair`` names the pair (and thereby
the function); a variant refuses (is skipped for) parameters of another pair. Profile a
pair with::

    paprof run --family zoo --variant uncoalesced_slow --variant uncoalesced_fast --shape pair=uncoalesced
    paprof compare uncoalesced_slow uncoalesced_fast

``n`` and ``iters`` default to 0: the pair's own default size (``PAIRS``), chosen so each
kernel takes ~50 us to ~1 ms on an H200; ``sms`` (132, the H200's SM count) sizes the
pairs whose shape follows the GPU (partial_wave, dependent_chain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from paprof.family import CudaVariant, Family, KernelLaunch, Launcher, ParamError, Params, Work, param

# -- the affine step of the compute-bound pairs (zoo_common.cuh) ----------------------------
C = 0.999755859375      # 1 - 2^-12, exact in float32
C2 = 0.99951171875      # 1 - 2^-11 (divergence's odd branch)
SEG = 4096              # atomics: floats per segment
W = 36                  # spills: floats per thread's vector
PW_EPT = 16             # partial_wave: elements a thread in the slow variant
PW_TAIL = 4             # partial_wave: CTAs past a full wave
PW_SMEM = 120 * 1024    # partial_wave: dynamic shared memory (one CTA an SM)
OCC_SMEM = 100 * 1024   # occupancy_shared_mem: the unused dynamic shared memory
DC_THREADS, DC_CHAINS = 128, 8
L2_SHIFT = 65568         # l2_resident: floats each term's reads move on (l2_resident.cu)
COLS14 = 4096            # case14: columns of the output
V19 = 16                 # case19: floats per thread's vector
TAB20 = 1024             # case20: floats of the table
STRIDE21 = 65568         # case21: the table's step (a multiple of 32)
THREADS21 = 256          # case21: threads an SM (one 256-thread CTA an SM)
DIV22 = 12345            # case22: the smallest of the four divisors (all in [2^13, 2^14))
LCG22 = (1664525, 1013904223)  # case22: v <- a v + c (mod 2^32)
TILE23, ROWS23_A, WARPS23_A, ROWS23_B = 32, 8, 8, 32  # case23's launch shapes (case23.cu)
NEW_PAIRS = tuple(f"case{k}" for k in range(14, 24))
"""The pairs added for issue 37 (neutral names: the cause is in causes.toml and
expected.toml, not in the kernel or variant names)."""


@dataclass(frozen=True)
class PairInfo:
    cause: str
    n: Callable[["Zoo"], int]      # default size (elements, or matrix side / rows)
    iters: int                     # default iterations / repetitions / launches (0: none)
    tol: float
    summary: str


def _sms_n(per_sm: int) -> Callable:
    return lambda p: p.sms * per_sm


PAIRS: dict[str, PairInfo] = {
    "uncoalesced": PairInfo("uncoalesced", lambda p: 1 << 25, 0, 1e-6,
                            "out = 2x+1 on a (n/4096) x 4096 matrix; n elements"),
    "vector_loads": PairInfo("vector_loads", lambda p: 1 << 26, 0, 1e-6,
                             "out = 2x+1, n floats, grid of 4 CTAs an SM"),
    "occupancy_shared_mem": PairInfo("occupancy_shared_mem", lambda p: 1 << 26, 0, 1e-6,
                                     "out = 2x+1, n floats, a thread each"),
    "partial_wave": PairInfo("partial_wave", lambda p: (p.sms + PW_TAIL) * 1024 * PW_EPT, 1024, 1e-3,
                             "out = iters affine steps of x; n = (sms+4) x 1024 x 16"),
    "bank_conflicts": PairInfo("bank_conflicts", lambda p: 8192, 0, 0.0,
                               "out = x^T, an n x n matrix"),
    "barrier": PairInfo("barrier", lambda p: 1 << 22, 1024, 1e-3,
                        "out = iters affine steps of x, n floats"),
    "divergence": PairInfo("divergence", lambda p: 1 << 22, 512, 1e-3,
                           "even/odd elements: two recurrences of iters steps, n floats"),
    "dependent_chain": PairInfo("dependent_chain", _sms_n(DC_THREADS * DC_CHAINS), 16384, 1e-3,
                                "out = iters affine steps of x; n = sms x 128 x 8"),
    "l2_resident": PairInfo("l2_resident", lambda p: 1 << 22, 64, 1e-5,
                            "out[i] = sum over r < iters of x[(i + r*65568) % n] (n floats, 16 MB)"),
    "atomics": PairInfo("atomics", lambda p: 1 << 24, 0, 1e-4,
                        "out[s] = sum of x over 4096-float segment s, n floats"),
    "spills": PairInfo("spills", lambda p: 1 << 20, 64, 1e-4,
                       "iters rounds of a 36-wide circulant averaging map, n rows"),
    "launch_overhead": PairInfo("launch_overhead", lambda p: 1 << 23, 32, 1e-6,
                                "out = 2x+1, n floats; iters = launches of the slow variant"),
    "fp64": PairInfo("fp64", lambda p: 1 << 22, 1024, 1e-3,
                     "out = iters affine steps of x, n floats"),
    "case14": PairInfo("uncoalesced_stores", lambda p: 1 << 26, 0, 1e-6,
                       "out[r][c] = x[c] s[r] + 1 on an (n/4096) x 4096 matrix"),
    "case15": PairInfo("scalar_fp16", lambda p: 1 << 24, 256, 1e-6,
                       "iters steps of y <- 1/2 - y in fp16, n halves (exact)"),
    "case16": PairInfo("no_tensor_cores", lambda p: 2048, 1024, 1e-4,
                       "C = A B, A n x iters and B iters x n in fp16, C in fp32"),
    "case17": PairInfo("xu_pipe", lambda p: 1 << 21, 256, 1e-4,
                       "iters steps of y <- (y cos(y/8) + sin(y/8))/2 + x/2, n floats"),
    "case18": PairInfo("unfused", lambda p: 1 << 25, 0, 1e-6,
                       "out = (2x + 1)^2, n floats"),
    "case19": PairInfo("local_array", lambda p: 1 << 20, 64, 1e-4,
                       "iters in-place sweeps of a 16-wide averaging map on n vectors"),
    "case20": PairInfo("constant_divergent", lambda p: 1 << 21, 64, 1e-5,
                       "out[i] = x[i] + iters entries of a fixed 1024-float table, n floats"),
    "case21": PairInfo("pointer_chase", lambda p: 1 << 22, 2048, 1e-6,
                       "sms x 256 walks of iters steps through an n-int table of steps of 65568"),
    "case22": PairInfo("int_division", lambda p: 1 << 20, 512, 0.0,
                       "iters steps of a 32-bit LCG from n seeds, each step's quotient and "
                       "remainder by one of four divisors summed (exact)"),
    "case23": PairInfo("layout_transpose", lambda p: 8192, 8192, 1e-5,
                       "out[c] = sum over r of x[r][c], x row-major of n rows and iters columns"),
}

CAUSES = {
    "uncoalesced": "uncoalesced global accesses: many sectors per request",
    "vector_loads": "4-byte instead of 16-byte loads: 4x the load instructions, too few bytes in flight",
    "occupancy_shared_mem": "occupancy limited by shared memory: too few warps to hide latency",
    "partial_wave": "a partial last wave: most SMs idle while a few CTAs finish",
    "bank_conflicts": "shared-memory bank conflicts: many wavefronts per request",
    "barrier": "barrier stalls: a needless __syncthreads() in the hot loop",
    "divergence": "warp divergence: both sides of a branch run with half the lanes masked",
    "dependent_chain": "dependent-instruction latency: one chain, no ILP, few warps",
    "l2_resident": "bytes served by DRAM instead of the L2",
    "atomics": "contended atomics on one address",
    "spills": "register spills: local-memory loads and stores",
    "launch_overhead": "many small launches: per-launch latency, ramp-up and drain",
    "fp64": "FP64 arithmetic: the H200's FP64 pipe has half the FP32 lanes",
    "uncoalesced_stores": "uncoalesced global stores (loads coalesced): many sectors per store request",
    "scalar_fp16": "scalar fp16 arithmetic instead of packed half2: twice the FP16 instructions",
    "no_tensor_cores": "a matrix product on the FMA pipe instead of the tensor cores",
    "xu_pipe": "special functions on the XU pipe (MUFU) instead of FFMA polynomials",
    "unfused": "two kernels with the intermediate through DRAM instead of one fused kernel",
    "local_array": "a per-thread array indexed at run time: local memory instead of registers",
    "constant_divergent": "divergent __constant__ reads: the constant cache serialises the lanes' addresses",
    "pointer_chase": "pointer chasing: dependent loads, one in flight a thread",
    "int_division": "32-bit integer division by a run-time divisor in the hot loop instead of a precomputed multiply-shift",
    "layout_transpose": "a layout transpose written to DRAM and read back before a reduction, instead of reducing the original layout in place",
}
"""The cause vocabulary of ``causes.toml`` (each pair's cause is one of these)."""
assert set(CAUSES) == {i.cause for i in PAIRS.values()}


@dataclass(frozen=True)
class Zoo(Params):
    pair: str = param("uncoalesced", choices=tuple(PAIRS), help="which pair's function (and shape)")
    n: int = param(0, min=0, omit_default=True,
                   help="the pair's size: elements (matrix side for bank_conflicts, rows for "
                        "spills and case23); 0: the pair's default")
    iters: int = param(0, min=0, max=1 << 16, omit_default=True,
                       help="iterations (compute pairs), copies (l2_resident), rounds (spills), "
                            "launches (launch_overhead), columns (case23); 0: the pair's default")
    sms: int = param(132, min=1, max=1024, omit_default=True,
                     help="the GPU's SM count (132 on the H200): sizes partial_wave and dependent_chain")

    @property
    def size(self) -> int:
        return self.n or PAIRS[self.pair].n(self)

    @property
    def reps(self) -> int:
        return self.iters or PAIRS[self.pair].iters

    def validate(self) -> None:
        n, pair = self.size, self.pair
        if self.n and self.n > (1 << 28) and pair != "bank_conflicts":
            raise ParamError(f"n = {n}: at most 2**28 elements")
        if pair == "uncoalesced" and n % 4096:
            raise ParamError(f"uncoalesced: n ({n}) must be a multiple of 4096 (rows of 4096)")
        if pair == "vector_loads" and n % 4:
            raise ParamError(f"vector_loads: n ({n}) must be a multiple of 4 (float4s)")
        if pair == "bank_conflicts" and (n % 32 or n > 16384):
            raise ParamError(f"bank_conflicts: n ({n}) must be a multiple of 32, at most 16384")
        if pair == "l2_resident" and n * self.reps > (1 << 30):
            raise ParamError("l2_resident: n x iters must be at most 2**30 floats (the big buffer)")
        if pair == "launch_overhead" and n % self.reps:
            raise ParamError(f"launch_overhead: n ({n}) must be a multiple of iters ({self.reps})")
        rows = n // COLS14
        if pair == "case14" and (n % COLS14 or rows & (rows - 1)):
            raise ParamError(f"case14: n ({n}) must be 4096 x a power of two")
        if pair == "case15" and n % 2:
            raise ParamError(f"case15: n ({n}) must be even (half2s)")
        if pair == "case16" and (n % 16 or self.reps % 16 or n > 16384):
            raise ParamError(f"case16: n ({n}) and iters ({self.reps}) must be multiples of 16, n at most 16384")
        if pair == "case21" and (n & (n - 1) or n < 1024):
            raise ParamError(f"case21: n ({n}) must be a power of two, at least 1024")
        if pair == "case23" and (n % TILE23 or self.reps % TILE23 or n * self.reps > (1 << 28)):
            raise ParamError(f"case23: n ({n}, rows) and iters ({self.reps}, columns) must be multiples "
                             f"of 32, n x iters at most 2**28")


# -- inputs, output, reference, work -----------------------------------------------------


def inputs(p: Zoo, seed, xp) -> dict:
    rng = xp.random.default_rng(seed)
    n = p.size
    if p.pair == "bank_conflicts":
        return {"x": rng.standard_normal((n, n), dtype=xp.float32)}
    if p.pair == "spills":
        return {"x": rng.standard_normal((W, n), dtype=xp.float32)}
    if p.pair in NEW_PAIRS:
        return _new_inputs(p, rng, xp)
    x = rng.standard_normal(n, dtype=xp.float32)
    if p.pair == "l2_resident":
        return {"x": x, "big": xp.tile(x, p.reps)}  # big: iters copies of x, end to end
    return {"x": x}


def _new_inputs(p: Zoo, rng, xp) -> dict:
    n, pair = p.size, p.pair
    if pair == "case14":
        return {"x": rng.standard_normal(COLS14, dtype=xp.float32),
                "s": rng.standard_normal(n // COLS14, dtype=xp.float32)}
    if pair == "case15":  # odd multiples of 1/64 in (-4, 4): every step exact in fp16
        return {"x": ((2 * rng.integers(-128, 128, n) + 1) / 64).astype(xp.float16)}
    if pair == "case16":
        k = p.reps
        return {"a": rng.standard_normal((n, k), dtype=xp.float32).astype(xp.float16),
                "b": rng.standard_normal((k, n), dtype=xp.float32).astype(xp.float16)}
    if pair == "case17":
        return {"x": rng.uniform(-1.0, 1.0, n).astype(xp.float32)}
    if pair == "case19":
        return {"x": rng.standard_normal((V19, n), dtype=xp.float32)}
    if pair == "case21":  # the table of steps: a fixed function of n
        return {"nxt": ((xp.arange(n, dtype=xp.int64) + STRIDE21) & (n - 1)).astype(xp.int32)}
    if pair == "case22":  # the seeds: 32 random bits each, from two 16-bit draws
        hi, lo = rng.integers(0, 1 << 16, n), rng.integers(0, 1 << 16, n)
        return {"s": ((hi << 16) | lo).astype(xp.uint32)}
    if pair == "case23":  # the matrix: n rows of iters floats, row-major
        return {"x": rng.standard_normal((n, p.reps), dtype=xp.float32)}
    return {"x": rng.standard_normal(n, dtype=xp.float32)}  # case18, case20


def case20_table() -> np.ndarray:
    """case20's fixed table (constant memory in one kernel, global in the other): small
    multiples of 1/64, exact in float32."""
    return (((np.arange(TAB20) * 37) % 101 - 50) / 64).astype(np.float32)


def case21_threads(p: Zoo) -> int:
    return p.sms * THREADS21


def _new_output(p: Zoo, xp):
    n, pair = p.size, p.pair
    if pair == "case15":
        return xp.empty(n, xp.float16)
    if pair == "case16":
        return xp.empty((n, n), xp.float32)
    if pair == "case19":
        return xp.empty((V19, n), xp.float32)
    if pair == "case21":
        return xp.empty(case21_threads(p), xp.float32)
    if pair == "case23":  # a sum a column
        return xp.empty(p.reps, xp.float32)
    return xp.empty(n, xp.float32)


def _new_reference(p: Zoo, inputs: dict, xp):
    n, k, pair = p.size, p.reps, p.pair
    if pair == "case14":
        x, s = inputs["x"].astype(xp.float64), inputs["s"].astype(xp.float64)
        return (xp.outer(s, x) + 1.0).reshape(-1)
    if pair == "case15":
        x = inputs["x"].astype(xp.float64)
        return x if k % 2 == 0 else 0.5 - x
    if pair == "case16":
        return inputs["a"].astype(xp.float64) @ inputs["b"].astype(xp.float64)
    if pair == "case17":
        x = inputs["x"].astype(xp.float64)
        y = x.copy()
        for _ in range(k):
            t = y / 8
            y = 0.5 * (y * xp.cos(t) + xp.sin(t)) + 0.5 * x
        return y
    if pair == "case18":
        return (2.0 * inputs["x"].astype(xp.float64) + 1.0) ** 2
    if pair == "case19":
        v = inputs["x"].astype(xp.float64).copy()
        for _ in range(k):
            for j in range(V19):  # in place, j in order: v[15] reads the new v[0]
                v[j] = 0.75 * v[j] + 0.25 * v[(j + 1) % V19]
        return v
    if pair == "case20":
        tab = xp.asarray(case20_table()).astype(xp.float64)
        lane = (xp.arange(n, dtype=xp.int64) * 7)
        acc = inputs["x"].astype(xp.float64)
        for step in range(k):
            acc = acc + tab[((step * 32) & (TAB20 - 1)) + ((lane + step) & 31)]
        return acc
    if pair == "case21":  # the walk from i: i + S, i + 2S, ... (mod n), the low 8 bits summed
        i = xp.arange(case21_threads(p), dtype=xp.int64)
        acc = xp.zeros(i.shape, xp.int64)
        for step in range(1, k + 1):
            acc += ((i + step * STRIDE21) & (n - 1)) & 255
        return acc.astype(xp.float64)
    if pair == "case22":
        return case22_sums(inputs["s"], k, xp).astype(xp.float64)
    if pair == "case23":
        return inputs["x"].astype(xp.float64).sum(axis=0)
    raise ValueError(pair)


def case22_sums(seeds, iters: int, xp, divide=None):
    """case22's sums: ``iters`` steps of the LCG from each seed, the quotient and
    remainder of each step by ``DIV22 + (v >> 30)``, ``(q ^ r) & 255`` summed. ``divide(v,
    e)`` computes the quotient (default: exact integer division)."""
    a, c = (xp.uint32(t) for t in LCG22)
    v = xp.asarray(seeds, dtype=xp.uint32).copy()
    acc = xp.zeros(v.shape, xp.uint32)
    for _ in range(iters):
        v = v * a + c
        e = xp.uint32(DIV22) + (v >> xp.uint32(30))
        q = v // e if divide is None else divide(v, e)
        acc += (q ^ (v - q * e)) & xp.uint32(255)
    return acc


def case22_multipliers() -> tuple[list[int], int]:
    """Kernel b's multipliers for the divisors ``DIV22 .. DIV22 + 3`` and their shift
    (Granlund and Montgomery, 1994, figure 4.1: ``m = floor(2^32 (2^l - e) / e) + 1`` with
    ``l = ceil(log2 e)``; the quotient is ``(t + ((v - t) >> 1)) >> (l - 1)``, ``t =
    umulhi(m, v)``, exact for every 32-bit ``v``). The four share ``l``."""
    ls = {(e - 1).bit_length() for e in range(DIV22, DIV22 + 4)}
    assert len(ls) == 1, "the four divisors must share their power of two"
    (l,) = ls
    return [((1 << 32) * ((1 << l) - e)) // e + 1 for e in range(DIV22, DIV22 + 4)], l - 1


def _new_work(p: Zoo) -> Work:
    n, k, pair = p.size, p.reps, p.pair
    if pair == "case14":
        return Work(bytes=4 * n + 4 * COLS14 + 4 * (n // COLS14), flops=2 * n)
    if pair == "case15":
        return Work(bytes=4 * n, flops=2 * n * k)
    if pair == "case16":
        return Work(bytes=4 * n * k + 4 * n * n, flops=2 * n * n * k, flop_kind="tensor")
    if pair == "case17":  # the sin, the cos and ~8 more operations a step
        return Work(bytes=8 * n, flops=10 * n * k)
    if pair == "case18":  # what must move: x in, out back
        return Work(bytes=8 * n, flops=3 * n)
    if pair == "case19":
        return Work(bytes=8 * V19 * n, flops=3 * V19 * n * k)
    if pair == "case20":
        return Work(bytes=8 * n, flops=n * k)
    if pair == "case21":  # the bytes requested: iters ints a walk
        return Work(bytes=4 * case21_threads(p) * (k + 1), flops=case21_threads(p) * k)
    if pair == "case22":  # the seeds in, the sums out; a division a step
        return Work(bytes=8 * n, flops=n * k)
    if pair == "case23":  # what must move: x in, out back (not the slow variant's round trip)
        return Work(bytes=4 * n * k + 4 * k, flops=n * k)
    raise ValueError(pair)


def output(p: Zoo, xp):
    n = p.size
    if p.pair in NEW_PAIRS:
        return _new_output(p, xp)
    if p.pair == "bank_conflicts":
        return xp.empty((n, n), xp.float32)
    if p.pair == "spills":
        return xp.empty((W, n), xp.float32)
    if p.pair == "atomics":
        return xp.empty(-(-n // SEG), xp.float32)
    return xp.empty(n, xp.float32)


def affine(x, k: int, c: float = C, fixed: float = 1.0):
    """``k`` steps of y <- c y + (1 - c) fixed: ``fixed + c^k (x - fixed)``."""
    return fixed + (c ** k) * (x - fixed)


def circulant_power(k: int, xp):
    a = 0.75 * np.eye(W) + 0.25 * np.roll(np.eye(W), 1, axis=1)  # (A v)[j] = .75 v[j] + .25 v[j+1]
    return xp.asarray(np.linalg.matrix_power(a, k))


def reference(p: Zoo, inputs: dict, xp):
    if p.pair in NEW_PAIRS:
        return _new_reference(p, inputs, xp)
    x = inputs["x"].astype(xp.float64)
    pair, k = p.pair, p.reps
    if pair in ("uncoalesced", "vector_loads", "occupancy_shared_mem", "launch_overhead"):
        return 2.0 * x + 1.0
    if pair in ("partial_wave", "barrier", "dependent_chain", "fp64"):
        return affine(x, k)
    if pair == "divergence":
        odd = (xp.arange(x.size) & 1).astype(bool)
        return xp.where(odd, affine(x, k, C2, -1.0), affine(x, k))
    if pair == "bank_conflicts":
        return x.T.copy()
    if pair == "l2_resident":  # sum over r of x[(i + r*SHIFT) % n], read from big's copy r
        big = inputs["big"].astype(xp.float64).reshape(k, -1)
        n = big.shape[1]
        return sum(xp.roll(big[r], -((r * L2_SHIFT) % n)) for r in range(k))
    if pair == "atomics":
        pad = (-x.size) % SEG
        return xp.concatenate([x, xp.zeros(pad)]).reshape(-1, SEG).sum(axis=1)
    if pair == "spills":
        return circulant_power(k, xp) @ x
    raise ValueError(pair)


def tolerance(p: Zoo) -> float:
    return PAIRS[p.pair].tol


def work(p: Zoo) -> Work:
    n, k, pair = p.size, p.reps, p.pair
    if pair in NEW_PAIRS:
        return _new_work(p)
    if pair in ("uncoalesced", "vector_loads", "occupancy_shared_mem", "launch_overhead"):
        return Work(bytes=8 * n, flops=2 * n)
    if pair in ("partial_wave", "barrier", "dependent_chain", "fp64", "divergence"):
        return Work(bytes=8 * n, flops=2 * n * k)
    if pair == "bank_conflicts":
        return Work(bytes=8 * n * n)
    if pair == "l2_resident":
        # the bytes both kernels request (iters reads of x) and the output: TB/s reads as
        # request throughput, the same for both variants
        return Work(bytes=4 * n * k + 4 * n, flops=n * k)
    if pair == "atomics":
        return Work(bytes=4 * n + 4 * (-(-n // SEG)), flops=n)
    if pair == "spills":
        return Work(bytes=8 * W * n, flops=3 * W * n * k)
    raise ValueError(pair)


# -- launching ----------------------------------------------------------------------------


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Plan:
    """How a variant launches: ``grid(p, sm_count)``, ``block``, dynamic shared memory,
    ``args(p, inputs, out, k)`` for launch ``k`` of ``launches(p)``, and whether ``out`` is
    zeroed first (atomics)."""

    grid: Callable
    block: tuple
    args: Callable
    smem: int = 0
    launches: Callable = lambda p: 1
    zero_out: bool = False
    kernels: tuple = ("",)
    """Suffixes of the kernels each launch runs, in order (case18's slow one: two)."""
    stages: tuple = ()
    """For several kernels: each one's ``(grid, block)`` where they differ (case23's slow
    one); empty: every kernel launches with ``grid`` and ``block``."""
    mid: Callable = lambda p: p.size
    """For several kernels: the floats of the intermediate buffer between them."""


def _i64(v):
    return np.int64(v)


def _xo(p, i, out, k):
    return i["x"], out, _i64(p.size)


def _xoi(p, i, out, k):
    return i["x"], out, _i64(p.size), np.int32(p.reps)


def _elementwise(block=256):
    return lambda p, sms: (_cdiv(p.size, block), 1, 1)


PLANS: dict[str, tuple[Plan, Plan]] = {}


def _lo_args(p, i, out, k):
    count = p.size // p.reps
    return i["x"], out, _i64(k * count), _i64(count)


def _lo_fast_args(p, i, out, k):
    return i["x"], out, _i64(0), _i64(p.size)


PLANS = {
    "uncoalesced": (
        Plan(_elementwise(), (256, 1, 1), lambda p, i, o, k: (i["x"], o, np.int32(p.size // 4096), np.int32(4096))),
        Plan(_elementwise(), (256, 1, 1), lambda p, i, o, k: (i["x"], o, np.int32(p.size // 4096), np.int32(4096))),
    ),
    "vector_loads": (
        Plan(lambda p, sms: (4 * sms, 1, 1), (256, 1, 1), _xo),
        Plan(lambda p, sms: (4 * sms, 1, 1), (256, 1, 1), _xo),
    ),
    "occupancy_shared_mem": (
        Plan(_elementwise(), (256, 1, 1), _xo, smem=OCC_SMEM),
        Plan(_elementwise(), (256, 1, 1), _xo),
    ),
    "partial_wave": (
        Plan(lambda p, sms: (_cdiv(p.size, 1024 * PW_EPT), 1, 1), (1024, 1, 1),
             lambda p, i, o, k: (i["x"], o, _i64(p.size), np.int32(PW_EPT), np.int32(p.reps)), smem=PW_SMEM),
        Plan(lambda p, sms: (sms, 1, 1), (1024, 1, 1),
             lambda p, i, o, k: (i["x"], o, _i64(p.size), np.int32(PW_EPT), np.int32(p.reps)), smem=PW_SMEM),
    ),
    "bank_conflicts": (
        Plan(lambda p, sms: (p.size // 32, p.size // 32, 1), (32, 8, 1), lambda p, i, o, k: (i["x"], o, np.int32(p.size))),
        Plan(lambda p, sms: (p.size // 32, p.size // 32, 1), (32, 8, 1), lambda p, i, o, k: (i["x"], o, np.int32(p.size))),
    ),
    "barrier": (
        Plan(_elementwise(1024), (1024, 1, 1), _xoi),
        Plan(_elementwise(1024), (1024, 1, 1), _xoi),
    ),
    "divergence": (
        Plan(_elementwise(), (256, 1, 1), _xoi),
        Plan(lambda p, sms: (_cdiv(_cdiv(p.size, 64) * 64, 256), 1, 1), (256, 1, 1), _xoi),
    ),
    "dependent_chain": (
        Plan(lambda p, sms: (_cdiv(p.size, DC_THREADS * DC_CHAINS), 1, 1), (DC_THREADS, 1, 1), _xoi),
        Plan(lambda p, sms: (_cdiv(p.size, DC_THREADS * DC_CHAINS), 1, 1), (DC_THREADS, 1, 1), _xoi),
    ),
    "l2_resident": (
        Plan(lambda p, sms: (_cdiv(p.size, 256 * 8), 1, 1), (256, 1, 1),
             lambda p, i, o, k: (i["x"], i["big"], o, _i64(p.size), np.int32(p.reps))),
        Plan(lambda p, sms: (_cdiv(p.size, 256 * 8), 1, 1), (256, 1, 1),
             lambda p, i, o, k: (i["x"], i["big"], o, _i64(p.size), np.int32(p.reps))),
    ),
    "atomics": (
        Plan(_elementwise(), (256, 1, 1), _xo, zero_out=True),
        Plan(_elementwise(), (256, 1, 1), _xo, zero_out=True),
    ),
    "spills": (
        Plan(_elementwise(), (256, 1, 1), _xoi),
        Plan(_elementwise(), (256, 1, 1), _xoi),
    ),
    "launch_overhead": (
        Plan(lambda p, sms: (_cdiv(p.size // p.reps, 256), 1, 1), (256, 1, 1), _lo_args, launches=lambda p: p.reps),
        Plan(_elementwise(), (256, 1, 1), _lo_fast_args),
    ),
    "fp64": (
        Plan(lambda p, sms: (_cdiv(p.size, 4 * 256), 1, 1), (256, 1, 1), _xoi),
        Plan(lambda p, sms: (_cdiv(p.size, 4 * 256), 1, 1), (256, 1, 1), _xoi),
    ),
}


def _log2(v: int) -> np.int32:
    return np.int32(int(v).bit_length() - 1)


def _case14_args(p, i, o, k):
    return i["x"], i["s"], o, _log2(p.size // COLS14), _log2(COLS14)


def _case16_args(p, i, o, k):
    return i["a"], i["b"], o, np.int32(p.size), np.int32(p.size), np.int32(p.reps)


def _case20_args(p, i, o, k):
    return i["x"], i["tab"], o, _i64(p.size), np.int32(p.reps)


def _case21_args(p, i, o, k):
    return (i["nxt"], o, _i64(case21_threads(p)), np.int32(p.size - 1), np.int32(STRIDE21),
            np.int32(p.reps))


def _case22_args(p, i, o, k):
    ms, sh = case22_multipliers()
    return (i["s"], o, _i64(p.size), np.uint32(DIV22), *(np.uint32(m) for m in ms), np.int32(sh),
            np.int32(p.reps))


def _case23_args(p, i, o, k):
    return i["x"], o, np.int32(p.size), np.int32(p.reps)


def _case23_tiles(p, sms):
    """Kernel a1's grid: a CTA a 32 x 32 tile of x (columns along x, rows along y)."""
    return p.reps // TILE23, p.size // TILE23, 1


def _both(plan: Plan) -> tuple[Plan, Plan]:
    return plan, plan


PLANS.update({
    "case14": _both(Plan(_elementwise(), (256, 1, 1), _case14_args)),
    "case15": _both(Plan(lambda p, sms: (_cdiv(p.size // 2, 256), 1, 1), (256, 1, 1),
                         lambda p, i, o, k: (i["x"], o, _i64(p.size // 2), np.int32(p.reps)))),
    "case16": _both(Plan(lambda p, sms: (_cdiv((p.size // 16) ** 2, 4), 1, 1), (128, 1, 1), _case16_args)),
    "case17": _both(Plan(_elementwise(), (256, 1, 1), _xoi)),
    "case18": (Plan(_elementwise(), (256, 1, 1), _xo, kernels=("1", "2")),
               Plan(_elementwise(), (256, 1, 1), _xo)),
    "case19": _both(Plan(_elementwise(), (256, 1, 1), _xoi)),
    "case20": _both(Plan(_elementwise(), (256, 1, 1), _case20_args)),
    "case21": _both(Plan(lambda p, sms: (_cdiv(case21_threads(p), THREADS21), 1, 1), (THREADS21, 1, 1),
                         _case21_args)),
    "case22": _both(Plan(_elementwise(), (256, 1, 1), _case22_args)),
    "case23": (Plan(_case23_tiles, (TILE23, ROWS23_A, 1), _case23_args, kernels=("1", "2"),
                    stages=((_case23_tiles, (TILE23, ROWS23_A, 1)),
                            (lambda p, sms: (_cdiv(p.reps, WARPS23_A), 1, 1), (32 * WARPS23_A, 1, 1))),
                    mid=lambda p: p.size * p.reps),
               Plan(lambda p, sms: (p.reps // TILE23, 1, 1), (TILE23, ROWS23_B, 1), _case23_args)),
})
assert set(PLANS) == set(PAIRS)

SOURCES = {
    "uncoalesced": "uncoalesced.cu", "vector_loads": "vector_loads.cu",
    "occupancy_shared_mem": "occupancy.cu", "partial_wave": "partial_wave.cu",
    "bank_conflicts": "bank_conflicts.cu", "barrier": "barrier.cu", "divergence": "divergence.cu",
    "dependent_chain": "dependent_chain.cu", "l2_resident": "l2_resident.cu",
    "atomics": "atomics.cu", "spills": "spills.cu", "launch_overhead": "launch_overhead.cu",
    "fp64": "fp64.cu",
    **{pair: f"{pair}.cu" for pair in NEW_PAIRS},
}


def kernel_name(pair: str, speed: str) -> str:
    """The kernel's name (for case18's slow variant: the prefix of its two kernels' names).
    The new pairs' kernels are ``zoo_caseNN_a`` (slow) and ``zoo_caseNN_b`` (fast): nothing
    in a name says which is which or why."""
    if pair in NEW_PAIRS:
        return f"zoo_{pair}_{'a' if speed == 'slow' else 'b'}"
    return "zoo_launch_overhead" if pair == "launch_overhead" else f"zoo_{pair}_{speed}"


def _build(variant, p: Zoo, device) -> Launcher:
    """Compile the pair's source, launch the variant's kernel as its ``Plan`` says."""
    from paprof.measure.kernels import gpu  # GPU side only

    pair, speed = variant.id.rsplit("_", 1)
    plan = PLANS[pair][0 if speed == "slow" else 1]
    name = kernel_name(pair, speed)
    module = gpu.compile_module(variant.source_paths())
    if len(plan.kernels) > 1:
        return _build_split(variant, p, device, module, name, plan, gpu)
    kernel = module.get_function(name)
    grid, block, smem = plan.grid(p, device.sm_count), plan.block, plan.smem
    info = gpu.kernel_launch(kernel, name, grid, block, smem)
    count = plan.launches(p)
    extra = _case20_table(module, gpu) if pair == "case20" else {}

    def run(inputs, out):
        if plan.zero_out:
            out.fill(0)  # a CuPy fill kernel, outside the kernel regex
        if extra:
            inputs = {**inputs, **extra}
        for k in range(count):
            kernel(grid, block, tuple(plan.args(p, inputs, out, k)), shared_mem=smem)

    details = {"launches": count} if count > 1 else {}
    return Launcher(variant.id, [info] * count, run, details=details)


def _case20_table(module, gpu) -> dict:
    """case20's fixed table: copied once into the module's ``__constant__`` array (read by
    kernel a) and into a global array (``tab``, read by kernel b); both kernels take it."""
    cp = gpu.cupy()
    tab = cp.asarray(case20_table())
    symbol = module.get_global("zoo_case20_table")
    cp.ndarray(tab.shape, cp.float32, symbol)[...] = tab
    cp.cuda.runtime.deviceSynchronize()
    return {"tab": tab}


def _build_split(variant, p: Zoo, device, module, name: str, plan: Plan, gpu) -> Launcher:
    """A variant of two kernels in a row (case18's and case23's slow ones): the first
    writes an intermediate of ``plan.mid(p)`` floats (allocated once, here), the next
    reads it; each launches with its stage's grid and block (``plan.stages``), or the
    plan's. Both take the plan's arguments with the intermediate in place of the output
    (the first) or of the input (the second)."""
    cp = gpu.cupy()
    names = [name + suffix for suffix in plan.kernels]
    kernels = [module.get_function(k) for k in names]
    stages = [(g(p, device.sm_count), b) for g, b in (plan.stages or [(plan.grid, plan.block)] * len(names))]
    infos = [gpu.kernel_launch(k, nm, g, b) for k, nm, (g, b) in zip(kernels, names, stages)]
    mid = cp.empty(plan.mid(p), cp.float32)
    (grid1, block1), (grid2, block2) = stages

    def run(inputs, out):
        x, _, *rest = plan.args(p, inputs, out, 0)
        kernels[0](grid1, block1, (x, mid, *rest))
        kernels[1](grid2, block2, (mid, out, *rest))

    return Launcher(variant.id, infos, run)


def _accepts(pair: str):
    def check(p: Zoo) -> None:
        if p.pair != pair:
            raise ParamError(f"a variant of pair {pair}; the parameters are pair {p.pair} "
                             f"(--shape pair={pair})")
    return check


IDEAS = {
    "uncoalesced": ("a warp's lanes walk down a column: 32 rows, 32 sectors a request",
                    "a warp's lanes take 32 consecutive floats: 4 sectors a request"),
    "vector_loads": ("one 4-byte load per loop trip: 4 KB in flight an SM",
                     "one 16-byte float4 load per trip: 4x the bytes in flight, 1/4 the instructions"),
    "occupancy_shared_mem": ("100 KiB of dynamic shared memory it never uses: 2 CTAs (16 warps) an SM",
                             "no shared memory: 8 CTAs (64 warps) an SM hide the DRAM latency"),
    "partial_wave": ("sms+4 CTAs of one a SM: a full wave, then 4 CTAs alone while the other SMs idle",
                     "exactly sms CTAs striding over the same elements: one wave"),
    "bank_conflicts": ("32x32 tile read column-wise: a 32-way bank conflict per read",
                       "32x33 tile: the padding spreads a column over the 32 banks"),
    "barrier": ("a needless __syncthreads() in every iteration of the hot loop",
                "the same loop without the barrier"),
    "divergence": ("even and odd lanes take different branches: each warp runs both",
                   "even elements to one warp, odd to the next: the branch is uniform per warp"),
    "dependent_chain": ("8 elements one after another: each FFMA waits for the last, one warp per scheduler",
                        "8 elements interleaved: 8 independent FFMA chains"),
    "l2_resident": ("reads a 1 GB buffer (iters copies of x) once: every byte from DRAM",
                    "reads the 16 MB x iters times: the re-reads hit the L2"),
    "atomics": ("every thread atomicAdd()s to its segment's one address",
                "a warp-shuffle + shared-memory CTA reduction, one atomicAdd a CTA"),
    "spills": ("__launch_bounds__(256, 8): 32 registers, the 36-float vector spills to local memory",
               "__launch_bounds__(256, 4): 64 registers, the vector stays in registers"),
    "launch_overhead": ("iters (32) launches, each on 1/32 of the elements",
                        "one launch on all the elements"),
    "fp64": ("the FMA chains in double (DFMA)", "the FMA chains in float (FFMA)"),
    # the new pairs: neutral words (which is slow, and why, is in causes.toml / expected.toml)
    **{pair: (f"kernel a of {pair}.cu", f"kernel b of {pair}.cu") for pair in NEW_PAIRS},
}


def _launch_text(pair: str, speed: str, plan: Plan) -> str:
    blocks = [b for _, b in plan.stages] or [plan.block]
    text = ", then ".join("x".join(str(b) for b in block if b > 1) + "-thread CTAs" for block in blocks)
    if plan.smem:
        text += f", {plan.smem // 1024} KiB dynamic shared memory"
    if pair == "launch_overhead" and speed == "slow":
        text += ", iters launches"
    return text


def _variants() -> list[CudaVariant]:
    out = []
    for pair in PAIRS:
        for index, speed in enumerate(("slow", "fast")):
            plan = PLANS[pair][index]
            name = kernel_name(pair, speed)
            out.append(CudaVariant(
                id=f"{pair}_{speed}",
                idea=f"[{pair}] {IDEAS[pair][index]}",
                sources=(SOURCES[pair],),
                kernel_regex=name,
                build=_build,
                compile_units=lambda p, s=SOURCES[pair]: [((s,), {})],
                accepts=_accepts(pair),
                launch=_launch_text(pair, speed, plan),
            ))
    return out


family = Family(
    name="zoo",
    summary="ground-truth pairs: <pair>_slow vs <pair>_fast, one known cause each (--shape pair=NAME)",
    params=Zoo, variants=_variants(), inputs=inputs, output=output, reference=reference,
    work=work, tolerance=tolerance,
    notes=("each pair's slow variant is slow for one cause, named in examples/zoo/causes.toml",),
)
