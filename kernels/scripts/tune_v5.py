"""Sweep v5/v6's kernel choice and compile-time knobs on the GPU.

    python3 kernels/scripts/tune_v5.py                          # the whole sweep
    python3 kernels/scripts/tune_v5.py --only 3 --no-timing --launches 1   # one entry, for ncu

Each configuration is checked against the float64 reference, then timed twice with CUDA
events (median of 50 launches each); bandwidth is against the read ceiling measured in
the same run (and the streaming-read kernel at 0.5, 1 and 2 GiB, for its fixed cost).
Entries with TIMELINE=1 (tensor-core kernel only) also print, for one more launch, when
the CTAs started and ended, when warp 0 of each passed 1/4, 1/2 and 3/4 of its tiles, each
SM's finish time and rate, and for v6 the merges: how the work spread over the SMs
(kernels/NOTES.md, items 10 and 18). Each entry is built as ``catalog.tuned(variant, tuning)``:
its source and knobs are the whole tuning of that build (``variants.HOST_KNOBS``); the shipped
choice is the table in kernels/paprof_kernels/paged_decode/variants.py, which nothing here changes.
"""

import argparse
import statistics

import numpy as np

from paprof import registry
from paprof.measure.kernels import gpu, harness
from paprof_kernels.paged_decode import catalog, variants
from paprof_kernels.paged_decode.problem import parse_shape

MAIN = "batch=64,context=4096"
B4, B1 = "batch=4,context=32768", "batch=1,context=131072"
B32G8 = "batch=32,context=8192,q_heads=64"  # groups of 8 heads
D64 = "batch=64,context=4096,q_heads=32,kv_heads=32,head_dim=64"  # group 1
RAGGED = "context=17:300:1024:2048:4000:4096:6000:8192:9000:12000:15000:16384:500:3000:7000:10000"
FAST, MMA = "v5_fast.cu", "v5_mma.cu"
SHIPPED = {"WARPS": 3, "FEED": 1, "FEED_HINT": 1}  # K/V straight into registers
RING = {"WARPS": 3, "FEED": 0, "NSTAGES": 2}  # the cp.async ring (head_dim 32, 256)
SWEEP = [
    # (variant, shape, source, knobs): the shipped choices and the alternatives they beat;
    # TIMELINE=1 also prints when the CTAs start and end, and how fast each SM streamed
    ("v5", f"{MAIN},dtype=fp16", MMA, {**SHIPPED, "TIMELINE": 1}),
    ("v5", f"{MAIN},dtype=fp16", MMA, {**RING, "TIMELINE": 1}),
    ("v5", f"{MAIN},dtype=fp16", MMA, {**SHIPPED, "FEED_HINT": 0}),
    ("v5", f"{MAIN},dtype=bf16", MMA, SHIPPED),
    ("v6", f"{B4},dtype=fp16", MMA, {**SHIPPED, "TIMELINE": 1}),
    ("v6", f"{B1},dtype=fp16", MMA, {**SHIPPED, "TIMELINE": 1}),
    ("v6", f"{B1},dtype=fp16", MMA, RING),
    ("v5", f"{MAIN},dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8}),
    ("v6", f"{B4},dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8}),
    # 9..: groups of 8 heads (64 query heads): resident CTAs a SM the registers must allow
    # (NOTES item 19: 2 for fp32, 4 for the register feed)
    ("v5", f"{MAIN},q_heads=64,dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8, "MIN_BLOCKS": 4}),
    ("v5", f"{MAIN},q_heads=64,dtype=fp32", FAST, {"WARPS": 4, "UNROLL": 8, "MIN_BLOCKS": 2}),
    ("v5", f"{MAIN},q_heads=64,dtype=fp16", MMA, {**SHIPPED, "MIN_BLOCKS": 4}),
    ("v5", f"{MAIN},q_heads=64,dtype=fp16", MMA, {**SHIPPED, "MIN_BLOCKS": 2}),
    ("v5", f"{MAIN},q_heads=64,dtype=bf16", MMA, {**SHIPPED, "MIN_BLOCKS": 4}),
    ("v5", f"{MAIN},q_heads=64,dtype=bf16", MMA, {**SHIPPED, "MIN_BLOCKS": 2}),
    # fp8 (e4m3) from here on (FP8_FIRST): the shipped two tiles a step against one, the L2
    # hint, other warp counts at the same 12 warps a SM, and v6 at batch 4 and 1
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "TIMELINE": 1}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "FEED_HINT": 0}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 2, "MIN_BLOCKS": 6}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 4, "MIN_BLOCKS": 3}),
    ("v6", f"{B4},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1}),  # the shipped TSUB 2: paprof bench
    ("v6", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1}),
    # group 1 at head_dim 64 (32/32 heads, D64_FIRST on; v6 87.0 % against FlashInfer's CUDA
    # cores 91.6 %): 104 registers leave 6 CTAs a SM, 792 slots for 2,048 CTAs (2.59 waves).
    # Two tiles a step (149 registers: 4 CTAs, 3.88 waves, a d128 warp's bytes in flight),
    # other warp counts (fp8 at two and four tiles); then v7 on the ragged batch with
    # its CTA timeline
    ("v6", f"{D64},dtype=fp16", MMA, SHIPPED),
    ("v6", f"{D64},dtype=fp16", MMA, {**SHIPPED, "TSUB": 2}),
    ("v6", f"{D64},dtype=fp16", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 2, "MIN_BLOCKS": 6}),
    ("v6", f"{D64},dtype=fp16", MMA, {**SHIPPED, "WARPS": 4, "MIN_BLOCKS": 3}),
    ("v6", f"{D64},dtype=fp16", MMA, {**SHIPPED, "WARPS": 2, "MIN_BLOCKS": 8}),
    # the CUDA-core kernel on the fp16 cache (group 1: a quarter of group 4's arithmetic a
    # byte); UNROLL 8 x 4 warps: 121 registers, 4 CTAs (3.88 waves); UNROLL 4: 80, 6 CTAs
    ("v6", f"{D64},dtype=fp16", FAST, {"WARPS": 4, "UNROLL": 8}),
    ("v6", f"{D64},dtype=fp16", FAST, {"WARPS": 4, "UNROLL": 4}),
    ("v6", f"{D64},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2}),
    ("v6", f"{D64},dtype=fp8", MMA, {**SHIPPED, "TSUB": 4}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "TIMELINE": 1}),
    # v7's chunk (pages a CTA at most) around its own choice: 108 on the ragged batch, 125 at
    # batch 1 (one wave of 528 CTAs); smaller chunks are more waves (ragged 32 / 50 / 80:
    # 2.98 / 1.98 / 1.30; batch 1 32 / 63 / 96: 3.88 / 1.98 / 1.30). At group 1 d64 a chunk
    # makes v7 take the work list instead of v6's no-split kernel (2,048 CTAs, 2.59 waves)
    *[("v7", f"{RAGGED},dtype=fp16,chunk={c}", MMA, SHIPPED) for c in (32, 50, 80, 128, 192)],
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "ORDER": "serpentine"}),  # v7's own chunk (108)
    *[("v7", f"{B1},dtype=fp16,chunk={c}", MMA, SHIPPED) for c in (32, 63, 96, 160)],
    *[("v7", f"{B1},dtype=fp8,chunk={c}", MMA, {**SHIPPED, "TSUB": 2}) for c in (63, 250)],
    *[("v7", f"{D64},dtype=fp16,chunk={c}", MMA, SHIPPED) for c in (86, 128)],
    # D7_FIRST on (--d7, the decode7 stage): group 1 at d64 in bf16 (the fp16 choice, 2 warps
    # x 8 CTAs, taken unmeasured; against the former 3 warps) and fp8 at 2 warps x 8 and
    # 4 warps x 3 with two or four tiles a step; then (PACKED_FIRST on, --packed) v7 packed
    # (PATH, COST: not -D values; COST is V7_PACK_ITEM_COST, 16-bit pages an item costs, fp8
    # twice as many) against tokens on the ragged batch (timelines: the SMs' end spread) and
    # at batch 1 (the same plan: the kernels alone), fp16 and fp8
    ("v6", f"{D64},dtype=bf16", MMA, {**SHIPPED, "WARPS": 2, "MIN_BLOCKS": 8}),
    ("v6", f"{D64},dtype=bf16", MMA, SHIPPED),
    ("v6", f"{D64},dtype=fp8", MMA, {**SHIPPED, "WARPS": 2, "MIN_BLOCKS": 8, "TSUB": 2}),
    ("v6", f"{D64},dtype=fp8", MMA, {**SHIPPED, "WARPS": 2, "MIN_BLOCKS": 8, "TSUB": 4}),
    ("v6", f"{D64},dtype=fp8", MMA, {**SHIPPED, "WARPS": 4, "MIN_BLOCKS": 3, "TSUB": 2}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "PATH": "packed", "TIMELINE": 1}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "PATH": "tokens", "TIMELINE": 1}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "PATH": "packed", "COST": 0}),  # equal pages
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "PATH": "packed", "COST": 6}),
    ("v7", f"{RAGGED},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "PATH": "packed"}),
    ("v7", f"{RAGGED},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "PATH": "tokens"}),
    ("v7", f"{RAGGED},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "PATH": "packed", "COST": 0}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "PATH": "packed"}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "PATH": "tokens"}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "PATH": "packed"}),  # again, after tokens: the order's share
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "PATH": "packed"}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "PATH": "tokens"}),
    # FP8_WARPS_FIRST on (--fp8-warps): fp8 at groups of 4 with more resident warps (NOTES
    # item 80: fp8's warps compute twice as long a byte, so fewer of them have loads in
    # flight). ptxas (sm_90a): shipped 3 x 4 TSUB 2 152 registers; 16 or 15 warps a SM cap
    # them at 128 (TSUB 2: 60 bytes spilled; TSUB 1: none)
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MIN_BLOCKS": 5}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 2, "MIN_BLOCKS": 8}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 4, "MIN_BLOCKS": 4}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1, "MIN_BLOCKS": 5}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1, "WARPS": 2, "MIN_BLOCKS": 8}),
    ("v5", f"{MAIN},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1, "WARPS": 4, "MIN_BLOCKS": 4}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 2, "MIN_BLOCKS": 8}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 1, "WARPS": 2, "MIN_BLOCKS": 8}),
    # MERGE_FIRST on (--merge): v7's merges fused into the last CTA of a sequence's parts
    # against paged_decode_v7_merge after the streaming kernel (MERGE: v7_merge's choice
    # forced, not a -D value), one process, at the shapes whose sequences have several parts: b1 (66 parts a
    # KV head), b4 (16), the ragged batch (packed for 16-bit, tokens for fp8), groups of 8
    # (2 parts); the same 12 warps a SM as 2 CTAs of 6 warps (half the parts: b1 33, b4 8)
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "MERGE": "fused", "TIMELINE": 1}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "MERGE": "kernel", "TIMELINE": 1}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "kernel"}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "fused"}),
    ("v7", f"{B4},dtype=fp16", MMA, {**SHIPPED, "MERGE": "fused"}),
    ("v7", f"{B4},dtype=fp16", MMA, {**SHIPPED, "MERGE": "kernel"}),
    ("v7", f"{B4},dtype=fp16", MMA, {**SHIPPED, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "kernel"}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "MERGE": "fused"}),
    ("v7", f"{RAGGED},dtype=fp16", MMA, {**SHIPPED, "MERGE": "kernel"}),
    ("v7", f"{B32G8},dtype=fp16", MMA, {**SHIPPED, "MERGE": "fused"}),
    ("v7", f"{B32G8},dtype=fp16", MMA, {**SHIPPED, "MERGE": "kernel"}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "fused"}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "kernel"}),
    ("v7", f"{B1},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "kernel"}),
    ("v7", f"{B4},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "fused"}),
    ("v7", f"{B4},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "kernel"}),
    ("v7", f"{B4},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "kernel"}),
    ("v7", f"{RAGGED},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "fused"}),
    ("v7", f"{RAGGED},dtype=fp8", MMA, {**SHIPPED, "TSUB": 2, "MERGE": "kernel"}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "MERGE": "fused"}),  # again, after the rest
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "MERGE": "kernel"}),
    ("v7", f"{B1},dtype=fp16", MMA, {**SHIPPED, "WARPS": 6, "MIN_BLOCKS": 2, "MERGE": "kernel"}),
]
FP8_FIRST = next(i for i, entry in enumerate(SWEEP) if "fp8" in entry[1])
D64_FIRST = next(i for i, entry in enumerate(SWEEP) if entry[1].startswith(D64))
D7_FIRST = next(i for i, entry in enumerate(SWEEP) if entry[1] == f"{D64},dtype=bf16")
PACKED_FIRST = next(i for i, entry in enumerate(SWEEP) if entry[3].get("PATH"))
FP8_WARPS_FIRST = next(i for i, entry in enumerate(SWEEP) if i > PACKED_FIRST and not entry[3].get("PATH"))
MERGE_FIRST = next(i for i, entry in enumerate(SWEEP) if entry[3].get("MERGE"))


def timeline(prep, shape, tuning) -> str:
    """When the CTAs of one more launch started and ended (us from the first start), and
    how each SM fared: the time its last CTA ended and the rate that implies."""
    cp = gpu.cupy()
    name = prep.launcher.kernels[0].name
    module = gpu.compile_module(
        [variants.fast_source(shape, tuning)],
        variants.fast_defines(shape, prep.launcher.details.get("num_splits", 1) > 1, name,
                              worklist=variants._WORKLIST_OF.get(name, 0),
                              defer=prep.launcher.details.get("merge") == "kernel", tuning=tuning)
    )
    prep.step(0)
    cp.cuda.runtime.deviceSynchronize()
    grid = prep.launcher.kernels[0].grid
    n = grid[0] * grid[1] * grid[2]
    rec = cp.ndarray((n, 8), dtype=cp.uint64, memptr=module.get_global("paprof_timeline")).get().astype(float)
    t0 = rec[:, 0].min()
    start, end, work_end, q1, q2, q3, counted = ((rec[:, i] - t0) / 1e3 for i in (0, 1, 3, 4, 5, 6, 7))
    sm = rec[:, 2].astype(int)
    ctas = np.bincount(sm)
    last = np.zeros(len(ctas))
    np.maximum.at(last, sm, end)
    first = np.full(len(ctas), np.inf)
    np.minimum.at(first, sm, end)
    used = ctas > 0
    rate = ctas[used] * (shape.kv_bytes / n) / last[used] / 1e3  # GB/s an SM streamed
    by_load = " ".join(f"{k}/SM: {end[ctas[sm] == k].mean():.1f} (n={(ctas[sm] == k).sum()})" for k in np.unique(ctas[sm]))

    def q(a):
        return " ".join(f"{x:6.1f}" for x in np.percentile(a, [0, 10, 50, 90, 99, 100]))

    return "\n".join([
        f"    SM GB/s by smid: {' '.join(f'{r:.0f}' for r in rate)}",
        f"    SM finish us by smid: {' '.join(f'{e:.0f}' for e in last[used])}",
        f"    within-SM end spread us (0/50/90/100 %): {np.percentile((last - first)[used], [0, 50, 90, 100]).round(1)}",
        f"    CTAs {n}: start us (0/10/50/90/99/100 %) {q(start)} | end {q(end)}",
        f"    work end {q(work_end)} | merge us {q(end - work_end)}",
        f"    mean end by CTAs per SM: {by_load}",
        *progress(sm, last, ctas, start, q1, q2, q3, work_end),
        *merges(start, work_end, counted, end, prep.launcher.details.get("num_splits", 1) > 1),
    ])


def progress(sm, last, ctas, start, q1, q2, q3, work_end) -> list[str]:
    """Mean times (us) at which warp 0 of a CTA passed 1/4, 1/2, 3/4 of its tiles, by the
    class of its SM (the SM's finish time in thirds of the spread, and its CTA count)."""
    lo, hi = last[ctas > 0].min(), last[ctas > 0].max()
    cls = np.minimum(2, ((last[sm] - lo) / max(hi - lo, 1e-9) * 3).astype(int))
    lines = []
    for c in range(3):
        for k in np.unique(ctas[sm]):
            sel = (cls == c) & (ctas[sm] == k)
            if sel.any():
                marks = " ".join(f"{a[sel].mean():6.1f}" for a in (start, q1, q2, q3, work_end))
                lines.append(f"    SMs ending in third {c}, {k}/SM ({len(np.unique(sm[sel]))} SMs): start/q1/q2/q3/work {marks}")
    return lines


def merges(start, work_end, counted, end, split) -> list[str]:
    """For v6: when each merging CTA (the last of its item) stopped streaming, was counted
    and ended; and when the last CTA that did not merge ended."""
    if not split:
        return []
    merge = (end - work_end) > 2 * np.median(end - work_end)
    order = np.argsort(end[merge])[-8:]
    rows = " | ".join(f"{w:.1f}/{c:.1f}/{e:.1f}" for w, c, e in zip(work_end[merge][order], counted[merge][order], end[merge][order]))
    return [
        f"    non-merging CTAs: counted - work (0/50/100 %) {np.percentile((counted - work_end)[~merge], [0, 50, 100]).round(2)}, "
        f"last end {end[~merge].max():.1f}",
        f"    {merge.sum()} merging CTAs, last 8 work/counted/end us: {rows}",
    ]


def run(entry, launches: int, ceiling: float | None) -> None:
    vid, spec, source, knobs = entry
    shape = parse_shape(spec)
    tuning = {"SOURCE": source, **knobs}  # the entry's source and knobs are the whole tuning
    try:
        variant = catalog.tuned(registry.get(vid, "paged_decode"), tuning)
        prep = harness.prepare(registry.family("paged_decode"), variant, shape)
        check = harness.verify(prep)
        if ceiling is None:  # under ncu: a few launches, nothing timed
            for i in range(launches):
                prep.step(0)
            gpu.cupy().cuda.runtime.deviceSynchronize()
            print(f"{vid} {shape.slug()} {knobs} rel={check.rel_error:.1e} ok={check.passed}")
            return
        runs = [statistics.median(harness.time_steps(prep, launches)) for _ in range(2)]
        spans = timeline(prep, shape, tuning) if knobs.get("TIMELINE") else None
    except Exception as err:  # report and go on with the sweep
        print(f"{vid} {shape.slug()} {source} {knobs}: {type(err).__name__}: {err}")
        return
    tbs = shape.kv_bytes / min(runs) / 1e6
    k = prep.launcher.kernels[0]
    path = prep.launcher.details.get("path")
    plan = f" path={path} ctas={k.grid[1]} max_pages={prep.launcher.details.get('pages_per_cta', prep.launcher.details.get('chunk_pages'))}" if path else ""
    print(f"{vid} {shape.slug():34s} {source} {knobs} regs={k.registers} smem={k.dynamic_smem}{plan} "
          f"splits={prep.launcher.details.get('num_splits', 1)} {runs[0]:8.1f} {runs[1]:8.1f} us {tbs:5.2f} TB/s "
          f"{100 * tbs / ceiling:5.1f} % rel={check.rel_error:.1e} ok={check.passed}", flush=True)
    if spans:
        print(spans, flush=True)


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--only", type=int, action="append", help="index into SWEEP (repeatable)")
parser.add_argument("--fp8", action="store_true", help="only the fp8 entries (FP8_FIRST to D64_FIRST)")
parser.add_argument("--v7", action="store_true",
                    help="only group 1 at head_dim 64, v7's timeline and chunk sweep (D64_FIRST to D7_FIRST)")
parser.add_argument("--d7", action="store_true",
                    help="only the decode7 stage's entries: group 1 d64 bf16 / fp8, v7 packed against tokens")
parser.add_argument("--packed", action="store_true",
                    help="only v7 packed against tokens: the ragged batch and batch 1, fp16 and fp8 (PACKED_FIRST on)")
parser.add_argument("--fp8-warps", action="store_true",
                    help="only fp8 at groups of 4 with more resident warps (FP8_WARPS_FIRST on)")
parser.add_argument("--merge", action="store_true",
                    help="only v7's fused merges against its merge kernel (MERGE_FIRST on)")
parser.add_argument("--launches", type=int, default=50)
parser.add_argument("--no-timing", action="store_true", help="for ncu: verify and launch, no ceiling")
args = parser.parse_args()
ceiling = None if args.no_timing else harness.measure_read_ceiling()["tbs"]
if ceiling:
    print(f"read ceiling {ceiling:.3f} TB/s")
    for gib in (0.5, 1, 2):  # its own fixed cost: time against size
        c = harness.measure_read_ceiling(int(gib * (1 << 30)))
        print(f"  stream read {gib} GiB: {c}")
chosen = (range(FP8_FIRST, D64_FIRST) if args.fp8 else range(D64_FIRST, D7_FIRST) if args.v7
          else range(D7_FIRST, FP8_WARPS_FIRST) if args.d7 else range(PACKED_FIRST, FP8_WARPS_FIRST) if args.packed
          else range(FP8_WARPS_FIRST, MERGE_FIRST) if args.fp8_warps else range(MERGE_FIRST, len(SWEEP)) if args.merge
          else range(len(SWEEP)))
for i in args.only or chosen:
    run(SWEEP[i], args.launches, ceiling)
