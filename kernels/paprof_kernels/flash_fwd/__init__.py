"""The built-in family ``flash_fwd``: flash-attention forward (prefill), with GQA.

``O = softmax(Q K^T / sqrt(head_dim)) V`` for every (batch, query head), optionally under a
bottom-right aligned causal mask (query i sees keys j <= i + seq_k - seq_q). Compute-bound:
its throughput is held to a measured tensor-core GEMM ceiling (``ceiling="gemm"``) where
it runs on tensor cores (fp16, bf16). ``problem.py`` holds the parameters, inputs, work
model and the sampled float64 reference, ``catalog.py`` the variants (four kernels written
here, ``handbook.cu``, ``mma.cu``, ``mma128.cu`` and Hopper's ``wgmma.cu``, and PyTorch's SDPA
backends as peers, ``sdpa.py``).
Built on the public family interface only (``paprof/family.py``).
"""

from __future__ import annotations

from paprof_kernels.flash_fwd import catalog, problem
from paprof.family import Family

TOLERANCE = {"fp32": 2e-3, "fp16": 4e-3, "bf16": 2e-2}
"""Largest accepted relative error of a sampled row, ||o_r - ref_r|| / ||ref_r||: the
inputs are exact in the reference, so this is the kernels' own rounding. fp16/bf16: P
rounded to 16 bits before P V and O's final rounding (11- and 8-bit significands; a NumPy
model of that rounding gives 3.5e-4 and 2.9e-3 at the largest over 256 rows of 8192
keys). fp32: the handbook kernel stays under 1e-6, but a peer may multiply in TF32 on
the tensor cores (the model: 6e-4), so 2e-3. A wrong row is off by ~1."""

GATE_METRICS = ("tensor_pipe_pct", "sm_throughput_pct", "duration_us", "work_tflops")
"""Compute-bound: the gate holds the tensor pipe's and the SM's busy share, the duration
and the useful FLOP rate, not DRAM throughput."""

FAMILY = Family(
    name=catalog.FAMILY,
    summary="flash-attention forward (prefill): softmax(Q K^T / sqrt(d)) V per head, GQA, "
            "optional bottom-right causal mask",
    params=problem.Shape,
    variants=catalog.VARIANTS,
    inputs=lambda shape, seed, xp: problem.make_inputs(shape, seed, xp=xp),
    output=lambda shape, xp: problem.make_output(shape, xp),
    reference=lambda shape, inputs, xp: problem.reference(shape, inputs, xp),
    work=problem.work,
    tolerance=lambda shape: TOLERANCE[shape.dtype],
    arch="sm_90",  # the static gate's target: the H200 these kernels are tuned for
    gate_metrics=GATE_METRICS,
    ceiling="gemm",
    notes=("compute-bound: the FLOPs are held to a cuBLAS bf16 GEMM measured in the same call "
           "(bench), not to DRAM bandwidth",),
)
