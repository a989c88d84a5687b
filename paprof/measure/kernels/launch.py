"""The process ncu profiles: ``python -m paprof.measure.kernels.launch --variant v3 --shape ...``.

``--ceiling`` also measures the GPU's read ceiling (``harness.measure_read_ceiling``) in
the same process, recorded as ``read_ceiling_tbs``: the gate's calibration; for work held
to the GEMM ceiling (``Family.ceiling == "gemm"``) also ``harness.measure_gemm_ceiling``,
recorded as ``gemm_ceiling_tflops`` (``--gemm-ceiling`` measures that one alone: what
``paprof run`` asks for such work, so that every stored run of it names its ceiling).

Find the variant's family (built-in, installed, or the ``[tool.paprof]`` of the current
folder's repository), build the variant, check it against the family's float64 reference
on fresh random inputs (exit 1 on a mismatch), optionally time it with CUDA events, then
make the launches to profile, each step inside its own push of an NVTX range named after
the variant (``paged_decode.v3``), so that ``ncu --nvtx --nvtx-include paged_decode.v3/``
sees only those (compiling, autotuning and warm-up stay outside) and the report says which
launches make up each step (``paprof.model.steps``).
Exit codes: 0 ok, 1 verification failed, 2 bad shape or environment (a variant that
turns the shape down when built or first run also writes ``{"skipped": why}`` to
``--result``, so ``paprof run`` skips it as it skips one whose ``accepts`` refuses).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from paprof.errors import PaprofError, ShapeError
from paprof import registry
from paprof.family import throughput
from paprof.measure.kernels import gpu, harness, kinds
from paprof.phases import BUILD, CEILING, CHECK, INPUTS, REFERENCE, TIMING, Clock


def _nvtx(cp):
    nvtx = getattr(cp.cuda, "nvtx", None)
    if nvtx is None or not getattr(nvtx, "available", True):
        return None
    return nvtx


def describe(variant, family, params, work, prep, sets: int) -> dict:
    """What the launcher reports of a built variant (the result JSON's first keys)."""
    return {
        "family": variant.family,
        "variant": variant.id,
        "kind": variant.kind,
        "idea": variant.idea,
        "kernel_regex": variant.kernel_regex_for(params),
        "shape": params.spec(),
        "shape_slug": params.slug(),
        "params": params.to_dict(),
        "work": work.to_dict(),
        "gpu": prep.device.name,
        "sm_count": prep.device.sm_count,
        "arch": "sm_" + prep.device.compute_capability.replace(".", ""),
        "kernels": [k.name for k in prep.launcher.kernels],
        "launches": [k.to_dict() for k in prep.launcher.kernels],
        "launch_details": dict(prep.launcher.details),
        "launch_words": prep.launcher.words(),
        "nvtx_range": variant.nvtx_range,
        "input_sets": sets,
    }


def timed(prep, work, launches: int) -> dict:
    """``launches`` CUDA-event-timed steps: the result's timing keys."""

    times = harness.time_steps(prep, launches)
    median = statistics.median(times)
    rates = throughput(work, median)
    return {"duration_us_median": median, "duration_us_all": times, "timed_launches": launches,
            "bandwidth_tbs": rates["tbs"], "tflops": rates["tflops"]}


def synced(cp) -> None:
    """Wait for the GPU (a phase's time includes its queued work)."""
    cp.cuda.runtime.deviceSynchronize()


def ceilings(read: bool, gemm_asked: bool, family, work, cp, clock) -> dict:
    """The read ceiling (``read``; with it the GEMM ceiling for work its family holds to
    it) and the GEMM ceiling (``gemm_asked``), timed as one phase."""

    result: dict = {}
    if not (read or gemm_asked):
        return result
    cp.get_default_memory_pool().free_all_blocks()
    with clock.phase(CEILING):
        if read:
            ceiling = harness.measure_read_ceiling()
            result.update(read_ceiling_tbs=ceiling["tbs"], read_ceiling=ceiling)
        if gemm_asked or (read and family.holds_to_gemm(work)):
            gemm = harness.measure_gemm_ceiling()
            result.update(gemm_ceiling_tflops=gemm["tflops"], gemm_ceiling=gemm)
    return result


def profiled_steps(variant, prep, cp, launches: int, warm: bool) -> dict:
    """The launches ncu profiles: ``warm``, one first outside the range (compiling,
    autotuning, module loading), then each step inside its own push of the variant's NVTX
    range (the report then says which launches make up each step: the fast reader reads
    which push each launch sat in); the result's keys that say so."""
    if warm:
        prep.step(0)
        cp.cuda.runtime.deviceSynchronize()
    nvtx = _nvtx(cp)
    for i in range(launches):
        if nvtx is not None:
            nvtx.RangePush(variant.nvtx_range)
        try:
            prep.step(i)
        finally:  # (a step that fails leaves no range open around the next variant's)
            if nvtx is not None:
                nvtx.RangePop()  # (a range holds the launches made in it: no sync needed)
    cp.cuda.runtime.deviceSynchronize()
    result = {"nvtx": nvtx is not None, "profiled_launches": launches}
    if nvtx is not None:
        result["step_range"] = variant.nvtx_range
    return result


def run(args) -> dict:

    clock = Clock()  # the phases, written into the result (paprof.phases)
    variant = registry.get(args.variant, args.family)
    family = registry.family_of(variant)
    params = family.parse(args.shape)
    variant.check(params)
    work = family.work(params)
    cp = gpu.cupy()
    sets = harness.input_sets_for(work.bytes, gpu.current_device().l2_bytes) if args.time else 1
    with clock.phase(BUILD):
        launcher = kinds.build(variant, params, gpu.current_device())
    with clock.phase(INPUTS):
        prep = harness.prepare_on(family, variant, params, launcher,
                                  *harness.make_inputs(family, params, args.seed, sets))
        synced(cp)
    result = describe(variant, family, params, work, prep, sets)
    if not args.no_check:
        with clock.phase(REFERENCE):
            ref = harness.reference(prep)
            synced(cp)
        with clock.phase(CHECK):
            check = harness.verify(prep, ref)
        del ref
        result["check"] = check.to_dict()
        if not check.passed:
            result["phases"] = clock.to_record()
            return result
    if args.time:
        with clock.phase(TIMING):
            result.update(timed(prep, work, args.time))
    if args.profile_launches:
        result.update(profiled_steps(variant, prep, cp, args.profile_launches,
                                     warm=args.no_check and not args.time))
    del prep  # after the variant's launches: its inputs out of the way of the ceilings
    result.update(ceilings(args.ceiling, args.gemm_ceiling, family, work, cp, clock))
    result["phases"] = clock.to_record()
    return result


def shared_options(p: argparse.ArgumentParser) -> None:
    """The options this launcher and the batch one (``paprof.measure.kernels.batch``) share."""
    p.add_argument("--family", default=None, help="kernel family (default: any)")
    p.add_argument("--shape", default="", help="the family's parameters, KEY=VALUE,...")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: fresh)")
    p.add_argument("--time", type=int, default=0, metavar="N", help="CUDA-event-timed launches (0: none)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paprof.measure.kernels.launch", description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True, help="variant id, e.g. v3 or paged_decode/v3")
    shared_options(p)
    p.add_argument("--profile-launches", type=int, default=1, metavar="N",
                   help="launches inside the NVTX range (default 1)")
    p.add_argument("--result", default=None, metavar="FILE", help="write the result as JSON here")
    p.add_argument("--no-check", action="store_true", help="skip the reference check")
    p.add_argument("--ceiling", action="store_true",
                   help="also measure the read ceiling (read_ceiling_tbs in the result; and the GEMM "
                        "ceiling for work its family holds to it)")
    p.add_argument("--gemm-ceiling", action="store_true",
                   help="also measure the GEMM ceiling (gemm_ceiling_tflops in the result)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        result = run(args)
    except ShapeError as err:
        if args.result:
            with open(args.result, "w") as fh:
                json.dump({"skipped": str(err)}, fh)
        print(f"paprof launch: error: {err}", file=sys.stderr)
        return err.exit_code
    except PaprofError as err:
        print(f"paprof launch: error: {err}", file=sys.stderr)
        return err.exit_code
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh, indent=1)
    check = result.get("check")
    if check is not None:
        status = "ok" if check["passed"] else "FAILED"
        print(
            f"{result['variant']} {result['shape_slug']}: check {status} rel_error={check['rel_error']} "
            f"max_abs_error={check['max_abs_error']} (tolerance {check['tolerance']})",
            file=sys.stderr,
        )
        if not check["passed"]:
            return 1
    if "duration_us_median" in result:
        print(f"{result['variant']}: median {result['duration_us_median']:.1f} us, "
              f"{result['bandwidth_tbs']:.2f} TB/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
