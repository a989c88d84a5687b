"""The process ncu profiles: ``python -m paprof.kernels.launch --variant v3 --shape ...``.

Compile, check against the float64 reference on fresh random inputs (exit 1 on a
mismatch), optionally time with CUDA events, then make the launches to profile inside
an NVTX push/pop range named after the variant (``paged_decode.v3``), so that
``ncu --nvtx --nvtx-include paged_decode.v3/`` sees only those.
Exit codes: 0 ok, 1 verification failed, 2 bad shape or environment.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from paprof.errors import PaprofError


def _nvtx(cp):
    nvtx = getattr(cp.cuda, "nvtx", None)
    if nvtx is None or not getattr(nvtx, "available", True):
        return None
    return nvtx


def run(args) -> dict:
    from paprof.kernels import gpu, harness, registry
    from paprof.kernels.problem import parse_shape

    variant = registry.get(args.variant, args.family)
    shape = parse_shape(args.shape)
    variant.check(shape)
    cp = gpu.cupy()
    sets = harness.input_sets_for(shape, gpu.current_device().l2_bytes) if args.time else 1
    prep = harness.prepare(variant, shape, seed=args.seed, input_sets=sets)
    result = {
        "family": variant.family,
        "variant": variant.id,
        "idea": variant.idea,
        "kernel_regex": variant.kernel_regex,
        "shape": shape.spec(),
        "shape_slug": shape.slug(),
        "shape_fields": shape.to_dict(),
        "gpu": prep.device.name,
        "sm_count": prep.device.sm_count,
        "kernels": [k.name for k in prep.launcher.kernels],
        "launches": [k.to_dict() for k in prep.launcher.kernels],
        "num_splits": prep.launcher.num_splits,
        "kv_bytes": shape.kv_bytes,
        "nvtx_range": variant.nvtx_range,
        "input_sets": sets,
    }
    if not args.no_check:
        check = harness.verify(prep)
        result["check"] = check.to_dict()
        if not check.passed:
            return result
    if args.time:
        times = harness.time_steps(prep, args.time)
        median = statistics.median(times)
        result.update(
            duration_us_median=median,
            duration_us_all=times,
            timed_launches=args.time,
            bandwidth_tbs=shape.kv_bytes / median / 1e6,
        )
    if args.profile_launches:
        if args.no_check and not args.time:
            prep.step(0)  # one launch outside the range: module loading stays out of it
        nvtx = _nvtx(cp)
        result["nvtx"] = nvtx is not None
        if nvtx is not None:
            nvtx.RangePush(variant.nvtx_range)
        for i in range(args.profile_launches):
            prep.step(i)
        cp.cuda.runtime.deviceSynchronize()
        if nvtx is not None:
            nvtx.RangePop()
        result["profiled_launches"] = args.profile_launches
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paprof.kernels.launch", description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True, help="variant id, e.g. v3 or paged_decode/v3")
    p.add_argument("--family", default=None, help="kernel family (default: any)")
    p.add_argument("--shape", default="", help="e.g. batch=64,context=4096,dtype=fp16")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: fresh)")
    p.add_argument("--time", type=int, default=0, metavar="N", help="CUDA-event-timed launches (0: none)")
    p.add_argument("--profile-launches", type=int, default=1, metavar="N",
                   help="launches inside the NVTX range (default 1)")
    p.add_argument("--result", default=None, metavar="FILE", help="write the result as JSON here")
    p.add_argument("--no-check", action="store_true", help="skip the reference check")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        result = run(args)
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
