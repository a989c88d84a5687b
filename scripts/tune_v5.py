"""Sweep v5/v6's kernel choice and compile-time knobs on the GPU.

    python3 scripts/tune_v5.py

Each configuration is checked against the float64 reference, then timed twice with CUDA
events (median of 50 launches each); bandwidth is against the read ceiling measured in
the same run. The sweep swaps entries of ``variants.FAST_TUNING`` for its own use only;
the shipped choice is the table in paprof/kernels/paged_decode/variants.py.
"""

import statistics

from paprof.kernels import harness, registry
from paprof.kernels.paged_decode import variants
from paprof.kernels.problem import parse_shape

MAIN = "batch=64,context=4096"
FAST, MMA = "v5_fast.cu", "v5_mma.cu"
SWEEP = [
    # (variant, shape, source, knobs): the shipped choices, as a re-check after a change
    ("v5", f"{MAIN},dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8}),
    ("v5", f"{MAIN},dtype=fp16", MMA, {"WARPS": 3, "NSTAGES": 2, "COPY_HINT": 1}),
    ("v6", "batch=4,context=32768,dtype=fp16", MMA, {"WARPS": 3, "NSTAGES": 2, "COPY_HINT": 1}),
    ("v6", "batch=4,context=32768,dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8}),
]

ceiling = harness.measure_read_ceiling()["tbs"]
print(f"read ceiling {ceiling:.3f} TB/s")
shipped = dict(variants.FAST_TUNING)
for vid, spec, source, knobs in SWEEP:
    shape = parse_shape(spec)
    variants.FAST_TUNING[shape.dtype] = (source, knobs)
    try:
        prep = harness.prepare(registry.get(vid), shape)
        check = harness.verify(prep)
        runs = [statistics.median(harness.time_steps(prep, 50)) for _ in range(2)]
    except Exception as err:  # report and go on with the sweep
        print(f"{vid} {shape.slug()} {source} {knobs}: {type(err).__name__}: {err}")
        continue
    finally:
        variants.FAST_TUNING.update(shipped)
    tbs = shape.kv_bytes / min(runs) / 1e6
    k = prep.launcher.kernels[0]
    print(f"{vid} {shape.slug():34s} {source} {knobs} regs={k.registers} smem={k.dynamic_smem} "
          f"splits={prep.launcher.num_splits} {runs[0]:8.1f} {runs[1]:8.1f} us {tbs:5.2f} TB/s "
          f"{100 * tbs / ceiling:5.1f} % rel={check.rel_error:.1e} ok={check.passed}")
    del prep
