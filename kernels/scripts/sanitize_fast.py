"""v5/v6's tensor-core kernel under compute-sanitizer (memcheck), on the shapes where the
register feed clamps, splits a tile over pages or leaves splits empty:

    compute-sanitizer --tool memcheck python3 kernels/scripts/sanitize_fast.py [--dtype fp8] [--v7]

(--v7: v7's work list on its own shapes instead; --merge-kernel: v7 tuned with MERGE "kernel",
its merges in paged_decode_v7_merge.)
"""

import sys

from paprof import registry
from paprof.measure.kernels import harness
from paprof_kernels.paged_decode import catalog
from paprof_kernels.paged_decode.problem import Shape

SHAPES = [
    Shape(batch=4, page_size=8, context=(1, 7, 9, 999), dtype="fp16"),
    Shape(batch=4, page_size=32, context=(1, 31, 33, 999), dtype="bf16"),
    Shape(batch=5, head_dim=64, context=(15, 16, 17, 1000, 4096), dtype="bf16"),
    Shape(batch=3, q_heads=64, kv_heads=8, context=(700, 1, 129), dtype="fp16"),
    Shape(batch=4, context=(1, 17, 200, 2000), num_splits=16, dtype="fp16"),
    # fp8: two tiles a step (a second tile past the end at 16, 4112), pages of 8, head_dim 64
    Shape(batch=4, page_size=8, context=(1, 16, 17, 4112), dtype="fp8"),
    Shape(batch=3, head_dim=64, q_heads=32, kv_heads=32, context=(15, 16, 1000), dtype="fp8"),
    Shape(batch=4, context=(1, 17, 200, 2000), num_splits=16, dtype="fp8"),
]
V7_SHAPES = [
    # v7's work list (--v7): one-part sequences beside many-part ones, fp32 (v5_fast.cu, not
    # emulated on the CPU), the cp.async ring (head_dim 32, 256), pages of 8, a part a page
    Shape(batch=6, context=(1, 15, 16, 17, 3000, 9000), dtype="fp16"),
    Shape(batch=6, context=(1, 15, 16, 17, 3000, 9000), dtype="fp32"),
    Shape(batch=4, head_dim=32, context=(5, 300, 33, 20000), dtype="fp16"),
    Shape(batch=4, head_dim=256, context=(5, 300, 33, 20000), dtype="bf16"),
    Shape(batch=5, page_size=8, context=(1, 7, 9, 999, 12000), dtype="fp8"),
    Shape(batch=3, context=(17, 200, 2000), chunk_pages=1, dtype="fp16"),
    # packed (the ragged ones above are packed; these: a sequence across many CTAs beside
    # one-page ones, groups of 8, group 1 at d64 in fp8, the 16 lengths)
    Shape(batch=5, context=(1, 1, 1, 1, 40000), q_heads=64, dtype="fp16"),
    Shape(batch=5, context=(1, 1, 1, 1, 40000), q_heads=32, kv_heads=32, head_dim=64, dtype="fp8"),
    Shape(batch=16, context=(17, 300, 1024, 2048, 4000, 4096, 6000, 8192, 9000, 12000, 15000, 16384, 500, 3000,
                             7000, 10000), dtype="bf16"),
]
only = sys.argv[sys.argv.index("--dtype") + 1] if "--dtype" in sys.argv else None
tuning = {"MERGE": "kernel"} if "--merge-kernel" in sys.argv else None
runs = [(s, ("v7",)) for s in V7_SHAPES] if "--v7" in sys.argv else [(s, ("v5", "v6")) for s in SHAPES]
for shape, vids in ((s, v) for s, v in runs if only in (None, s.dtype)):
    for vid in vids:
        variant = registry.get(vid, "paged_decode")
        if tuning and vid == "v7":
            variant = catalog.tuned(variant, tuning)
        prep = harness.prepare(registry.family("paged_decode"), variant, shape)
        check = harness.verify(prep)
        path = prep.launcher.details.get("path")
        merge = prep.launcher.details.get("merge")
        print(f"{vid} {shape.slug()}{f' ({path})' if path else ''}{f' merge {merge}' if merge else ''}: rel {check.rel_error:.1e} ok={check.passed}", flush=True)
