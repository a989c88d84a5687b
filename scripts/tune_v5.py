"""Sweep v5/v6's compile-time knobs on the GPU: tokens in flight (UNROLL), head split, warps.

    python3 scripts/tune_v5.py

Each configuration is checked against the float64 reference, then timed twice with CUDA
events (median of 50 launches each); bandwidth is against the read ceiling measured in
the same run. The sweep patches ``fast_defines`` for its own use only; the shipped
defaults live in paprof/kernels/paged_decode/variants.py.
"""

import statistics

from paprof.kernels import harness, registry
from paprof.kernels.paged_decode import variants
from paprof.kernels.problem import parse_shape

MAIN = "batch=64,context=4096"
SWEEP = [
    # (variant, shape, {define overrides})
    ("v5", f"{MAIN},dtype=fp32", {"PIPE": 0, "UNROLL": 8}),
    ("v5", f"{MAIN},dtype=fp32", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 8}),
    ("v5", f"{MAIN},dtype=fp32", {"PIPE": 1, "UNROLL": 4, "NSTAGES": 12}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 0, "UNROLL": 4}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 8}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 12}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 1, "UNROLL": 4, "NSTAGES": 8}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 1, "UNROLL": 4, "NSTAGES": 16}),
    ("v5", f"{MAIN},dtype=fp16", {"PIPE": 1, "UNROLL": 1, "NSTAGES": 8}),
    ("v5", f"{MAIN},dtype=bf16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 8}),
    ("v6", "batch=4,context=32768,dtype=fp16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 8}),
    ("v6", "batch=4,context=32768,dtype=fp16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 12}),
    ("v6", "batch=1,context=131072,dtype=fp16", {"PIPE": 1, "UNROLL": 2, "NSTAGES": 8}),
    ("v6", "batch=1,context=131072,dtype=fp16", {"PIPE": 0, "UNROLL": 4}),
]

ceiling = harness.measure_read_ceiling()["tbs"]
print(f"read ceiling {ceiling:.3f} TB/s")
original = variants.fast_defines
for vid, spec, overrides in SWEEP:
    shape = parse_shape(spec)

    def patched(s, split, name, overrides=overrides):
        d = original(s, split, name)
        d.update(overrides)
        d.setdefault("NSTAGES", 8)
        return d

    variants.fast_defines = patched
    try:
        prep = harness.prepare(registry.get(vid), shape)
        check = harness.verify(prep)
        runs = [statistics.median(harness.time_steps(prep, 50)) for _ in range(2)]
    except Exception as err:  # report and go on with the sweep
        print(f"{vid} {shape.slug()} {overrides}: {type(err).__name__}: {err}")
        continue
    finally:
        variants.fast_defines = original
    tbs = shape.kv_bytes / min(runs) / 1e6
    k = prep.launcher.kernels[0]
    print(f"{vid} {shape.slug():34s} {overrides} regs={k.registers} splits={prep.launcher.num_splits} "
          f"{runs[0]:8.1f} {runs[1]:8.1f} us {tbs:5.2f} TB/s {100 * tbs / ceiling:5.1f} % "
          f"rel={check.rel_error:.1e} ok={check.passed}")
    del prep
