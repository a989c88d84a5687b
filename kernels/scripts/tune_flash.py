"""Bench flash_fwd mma128's layouts, or wgmma2's knobs (their -D values) on the GPU, in one process.

    python3 kernels/scripts/tune_flash.py                              # the whole sweep
    python3 kernels/scripts/tune_flash.py --only 0 --only 1            # entries of SWEEP
    python3 kernels/scripts/tune_flash.py --knobs "BC=32,KSUB=32,STAGES=3" --shape "head_dim=128"
    python3 kernels/scripts/tune_flash.py --only 0 --no-timing --launches 1   # for ncu
    python3 kernels/scripts/tune_flash.py --variant wgmma2             # WGMMA2_SWEEP: FA3's steps one by one
    python3 kernels/scripts/tune_flash.py --variant wgmma2 --knobs "OVERLAP=0,PINGPONG=0,QSMEM=1"
    python3 kernels/scripts/tune_flash.py --variant wgmma2 --sweep diet --peer sdpa_cudnn --peer sdpa_flash

Each configuration is built (NVRTC, through the catalogue: grid, block, shared memory and
-D values follow the knobs), checked against the float64 reference, then timed twice with
CUDA events (median of --launches each); TFLOP/s against the cuBLAS GEMM ceiling measured
in the same process. The peer sdpa_flash is timed the same way at each shape (--no-peer:
not). Each configuration is the variant ``catalog.tuned`` makes with its knobs; the shipped
choices are ``catalog.MMA128_4X32`` and ``catalog.WGMMA2_SHIPPED``, which nothing here changes.
"""

import argparse
import statistics
from types import SimpleNamespace

from paprof import registry
from paprof_kernels.flash_fwd import catalog, problem
from paprof.measure.kernels import gpu, harness

BASE = "batch=4,q_heads=32,seq_q=8192,head_dim=128,dtype=bf16"
D128, CAUSAL, D64 = BASE, f"{BASE},causal=true", BASE.replace("head_dim=128", "head_dim=64")
SWEEP = [
    # (shape, name, knobs over the shipped layout): d128 non-causal and causal, then d64;
    # the causal entries reuse the d128 builds (6 compiles in all)
    (D128, "4x32 shipped (BC 64, S in 32-key halves, Q from sQ, 2 buffers)", {}),
    (D128, "4x32 BC 32, 3 buffers", {"BC": 32, "KSUB": 32, "STAGES": 3}),
    (CAUSAL, "4x32 shipped", {}),
    (D64, "4x32 shipped (Q in registers, 3 buffers)", {}),
    (D64, "4x32 Q from sQ, 2 buffers", {"QREG": 0, "STAGES": 2}),
]


WGMMA2_SWEEP = [
    # (shape, name, knobs over WGMMA2_SHIPPED): the shipped build, then each of FA3's steps
    # taken away (kernels/NOTES.md items 59-64, 77-79 predict each), then the causal shape
    (D128, "shipped (BC 128, RS Q, overlap, ping-pong, TMA producer, 3 stages, setmaxnreg, the diet)", {}),
    (CAUSAL, "TMA producer, 3 stages (shipped)", {"TMA": 1, "STAGES": 3}),
    (D128, "TMA, 2 stages", {"STAGES": 2}),
    (D128, "cp.async producer, 2 stages (the first build)", {"TMA": 0, "STAGES": 2}),
    (D128, "no ping-pong", {"PINGPONG": 0}),
    (D128, "no intra-warpgroup overlap (Q from shared memory: OVERLAP 0 needs it)", {"OVERLAP": 0, "QSMEM": 1}),
    (D128, "neither (producer + mbarriers only; SS Q)", {"OVERLAP": 0, "PINGPONG": 0, "QSMEM": 1}),
    (D128, "Q from shared memory (SS)", {"QSMEM": 1}),
    (D128, "BC 64", {"BC": 64}),
    (D128, "cp.async producer, 3 stages", {"TMA": 0}),
    (CAUSAL, "shipped", {}),
    (CAUSAL, "cp.async producer, 2 stages", {"TMA": 0, "STAGES": 2}),
    (CAUSAL, "no ping-pong", {"PINGPONG": 0}),
]
WGMMA2_DIET = [
    # (NOTES items 85-86) the consumers' instruction diet (shipped since item 85's call), each
    # step taken away; the shipped build first and last (the
    # call's drift), then the causal shape
    (D128, "shipped (RS Q, the diet)", {}),
    (D128, "maxima scaled first (FAST_MAX 0)", {"FAST_MAX": 0}),
    (D128, "descriptors from addresses (DESC_ADD 0)", {"DESC_ADD": 0}),
    (D128, "Q from shared memory (QSMEM 1)", {"QSMEM": 1}),
    (D128, "setmaxnreg 240 / 24", {"REG_CONSUMER": 240, "REG_PRODUCER": 24}),
    (D128, "shipped (again)", {}),
    (CAUSAL, "shipped", {}),
    (CAUSAL, "shipped (again)", {}),
]
TUNINGS = {"mma128": SWEEP, "wgmma2": WGMMA2_SWEEP}
SWEEPS = {"diet": WGMMA2_DIET}
"""Other sweeps of wgmma2 (--sweep NAME)."""


def timed(vid: str, spec: str, launches: int, timing: bool, knobs: dict | None = None):
    """(prepared, check, [median us of each round]) for ``vid`` at ``spec``, built with
    ``knobs`` (-D values over the shipped ones; None: the shipped build)."""
    family = registry.family("flash_fwd")
    shape = family.parse(spec)
    variant = registry.get(vid, "flash_fwd")
    prep = harness.prepare(family, variant if knobs is None else catalog.tuned(variant, knobs), shape)
    check = harness.verify(prep)
    if not timing:  # under ncu: a few launches, nothing timed
        for _ in range(launches):
            prep.step(0)
        gpu.cupy().cuda.runtime.deviceSynchronize()
        return prep, check, []
    return prep, check, [statistics.median(harness.time_steps(prep, launches)) for _ in range(2)]


def line(label: str, spec: str, prep, check, runs, gemm) -> str:
    shape = registry.family("flash_fwd").parse(spec)
    flops = problem.work(shape).flops
    head = f"{shape.slug():44s} {label:70s}"
    tail = f"rel={check.rel_error:.1e} ok={check.passed}"
    if prep.variant.kind == "cuda":
        k = prep.launcher.kernels[0]
        ctas = gpu.blocks_per_sm(SimpleNamespace(num_regs=k.registers, shared_size_bytes=k.static_smem),
                                 k.block[0], k.dynamic_smem, prep.device)
        tail = f"regs={k.registers} smem={k.dynamic_smem} block={k.block[0]} CTAs/SM={ctas} {tail}"
    if not runs:
        return f"{head} {tail}"
    tf = flops / min(runs) / 1e6
    return f"{head} {runs[0]:9.1f} {runs[1]:9.1f} us {tf:6.1f} TFLOP/s {100 * tf / gemm:5.1f} % {tail}"


def run(spec: str, label: str, knobs: dict, args, gemm) -> None:
    vid = args.variant
    try:
        prep, check, runs = timed(vid, spec, args.launches, not args.no_timing, knobs)
        print(f"{vid} {line(f'{label} {knobs}', spec, prep, check, runs, gemm)}", flush=True)
    except Exception as err:  # report and go on with the sweep
        print(f"{vid} {spec} {label} {knobs}: {type(err).__name__}: {err}", flush=True)


def peer(spec: str, args, gemm) -> None:
    for vid in args.peer or ["sdpa_flash"]:
        try:
            prep, check, runs = timed(vid, spec, args.launches, True)
            print(f"{vid} {line('(peer)', spec, prep, check, runs, gemm)}", flush=True)
        except Exception as err:
            print(f"{vid} {spec}: {type(err).__name__}: {err}", flush=True)


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--variant", choices=sorted(TUNINGS), default="mma128")
parser.add_argument("--only", type=int, action="append", help="index into the variant's sweep (repeatable)")
parser.add_argument("--knobs", help='one configuration instead of the sweep: "NAME=INT,..."')
parser.add_argument("--shape", default="", help=f"with --knobs: overrides of {BASE}")
parser.add_argument("--launches", type=int, default=30)
parser.add_argument("--no-timing", action="store_true", help="for ncu: verify and launch, no ceiling")
parser.add_argument("--no-peer", action="store_true", help="do not time the peers at each shape")
parser.add_argument("--peer", action="append", choices=["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"],
                    help="the peer timed at each shape, before the first entry there (repeatable; default sdpa_flash)")
parser.add_argument("--sweep", choices=sorted(SWEEPS), help="wgmma2: another sweep than WGMMA2_SWEEP (diet: NOTES item 85)")
args = parser.parse_args()
if args.sweep and args.variant != "wgmma2":
    parser.error("--sweep is wgmma2's (--variant wgmma2)")
if args.knobs is not None:
    try:
        entries = [(",".join(filter(None, [BASE, args.shape])), "--knobs", catalog.parse_knobs(args.knobs, args.variant))]
    except ValueError as err:
        parser.error(str(err))
else:
    sweep = SWEEPS[args.sweep] if args.sweep else TUNINGS[args.variant]
    entries = [sweep[i] for i in (args.only or range(len(sweep)))]
gemm = 0.0
if not args.no_timing:
    gemm = harness.measure_gemm_ceiling()["tflops"]
    print(f"GEMM ceiling {gemm:.1f} TFLOP/s (bf16)", flush=True)
seen = set()
for spec, label, knobs in entries:
    if not args.no_timing and not args.no_peer and spec not in seen:
        seen.add(spec)
        peer(spec, args, gemm)
    run(spec, label, knobs, args, gemm)
