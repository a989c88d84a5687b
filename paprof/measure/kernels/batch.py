"""Check and time several variants of one family at one shape in one process:
``python -m paprof.measure.kernels.batch --family F --shape S --variants v1,v2 --result FILE``.

What ``paprof run --variant all`` pays once instead of once a variant: the process's start
(Python, imports, the CUDA context), the shape's random inputs and its float64 reference
(every variant is checked against the same reference on the same inputs), and the NVRTC
compiles of every variant's modules, made ahead in parallel threads (``build_ahead``;
``PAPROF_BUILD_THREADS`` sets how many). Each variant is then built, checked (its output
poisoned first) and CUDA-event timed as
``paprof.measure.kernels.launch`` does it alone; the read and GEMM ceilings, when asked, are
measured once after them all.

The result (JSON) holds ``phases`` (the shared ones, ``paprof.phases``) and, per variant id,
what ``paprof.measure.kernels.launch`` would have written for it alone, with its own ``phases``, or
``{"skipped": why}`` (it turned the shape down when built or first run) or ``{"error":
message, "exit_code": N}``. A variant whose launch changed its inputs (a kernel that writes
where it should only read) is said so (``inputs_changed``) and the inputs and the reference
are made afresh for the next one: no variant is checked on another's leftovers.
With ``--profile-launches N`` it is the process one ncu session profiles for every variant
(``profile_all``): each variant's N steps inside pushes of its own NVTX range, in turn,
nothing checked or timed; ``paprof.read.ncu_split`` then splits the one report by range.
Exit codes: 0 (each variant's fate is in the result), 2 bad arguments or no usable GPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from paprof.errors import PaprofError, ShapeError
from paprof import registry
from paprof.measure.kernels import gpu, harness, kinds
from paprof.measure.kernels.launch import (ceilings, describe, profiled_steps, shared_options,
                                           synced, timed)
from paprof.phases import BUILD, BUILD_AHEAD, CHECK, INPUTS, REFERENCE, TIMING, Clock


def _fingerprint(cp, inputs: dict) -> tuple:
    """A cheap checksum of one input set (its bytes summed on the GPU)."""
    out = []
    for name, array in sorted(inputs.items()):
        if hasattr(array, "view") and hasattr(array, "nbytes"):
            raw = cp.ascontiguousarray(array).view(cp.uint8)
            out.append((name, int(raw.sum(dtype=cp.uint64))))
        else:
            out.append((name, repr(array)[:200]))
    return tuple(out)


BUILD_THREADS = "PAPROF_BUILD_THREADS"
"""Threads that compile the variants' modules ahead (default: the cores but two; 0 or 1:
none, each variant compiles in its turn)."""


def build_threads() -> int:
    try:
        return max(0, int(os.environ[BUILD_THREADS]))
    except (KeyError, ValueError):
        return max(1, (os.cpu_count() or 2) - 2)


def build_ahead(variants, params, workers: int) -> int:
    """NVRTC compiles of every CUDA variant's modules (its compile units, as the static
    gate lists them) in ``workers`` threads, into this process's module cache
    (``gpu.compile_module``), where each variant's own build then finds them; the number
    of modules. What fails here is left to the variant's own build, which says it in its
    turn; a module its build asks for with other options is compiled then."""
    from paprof.measure import static

    units = []
    for variant in variants:
        try:
            units += static.compile_units(variant, params)
        except PaprofError:  # not CUDA, or a build hook without compile units
            continue
    if workers < 2 or len(units) < 2:
        return 0
    cp = gpu.cupy()
    device = cp.cuda.runtime.getDevice()
    gpu.current_device()  # (cached once, before the threads ask)

    def compile_one(unit) -> None:
        try:
            cp.cuda.runtime.setDevice(device)  # this thread's context: the process's one
            gpu.compile_module(list(unit.sources), unit.defines, arch=unit.arch, flags=tuple(unit.flags))
        except Exception:  # noqa: BLE001 (the variant's own build raises it, in its turn)
            pass

    with ThreadPoolExecutor(max_workers=min(workers, len(units)),
                            thread_name_prefix="paprof-nvrtc") as pool:
        list(pool.map(compile_one, units))
    return len(units)


def _built_ahead(shared: Clock, variants, params) -> None:
    """Every variant's modules compiled ahead in threads (``build_ahead``), timed as shared."""
    workers = build_threads()
    if workers > 1:
        with shared.phase(BUILD_AHEAD):
            build_ahead(variants, params, workers)


def _shape_setup(family, variants, params):
    """What every variant of one shape shares: its work model, CuPy, the device, the clock
    of what is paid once (the builds ahead already on it)."""
    work, cp, device = family.work(params), gpu.cupy(), gpu.current_device()
    shared = Clock()
    _built_ahead(shared, variants, params)
    return work, cp, device, shared


def _prepared(family, variant, params, device, inputs, out, own: Clock, cp):
    """``variant`` built and set up on the shared ``inputs`` and ``out``, timed as its build."""
    with own.phase(BUILD):
        launcher = kinds.build(variant, params, device)
        prep = harness.prepare_on(family, variant, params, launcher, inputs, out)
        synced(cp)
    return prep


def _free(cp) -> None:
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")  # a callable's framework keeps a cache of its own
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def run(args) -> dict:

    variants = [registry.get(v, args.family) for v in args.variants.split(",") if v]
    family = registry.family_of(variants[0])
    if args.profile_launches:
        return profile_all(family, variants, family.parse(args.shape), seed=args.seed,
                           launches=args.profile_launches)
    return check_and_time(family, variants, family.parse(args.shape), seed=args.seed,
                          time_launches=args.time, check=not args.no_check,
                          ceiling=args.ceiling, gemm_ceiling=args.gemm_ceiling)


def check_and_time(family, variants, params, *, seed: int | None = None, time_launches: int = 0,
                   check: bool = True, ceiling: bool = False, gemm_ceiling: bool = False) -> dict:
    """Each of ``variants`` (of ``family``) built, checked on the shared inputs against the
    shared reference, and timed with ``time_launches`` CUDA-event-timed steps: the
    module's result (its docstring)."""

    work, cp, device, shared = _shape_setup(family, variants, params)
    sets = harness.input_sets_for(work.bytes, device.l2_bytes) if time_launches else 1
    inputs = out = ref = stamp = None
    results: dict[str, dict] = {}
    for variant in variants:
        own = Clock()
        prep = None
        try:
            variant.check(params)
            if inputs is None:
                with shared.phase(INPUTS):
                    inputs, out = harness.make_inputs(family, params, seed, sets)
                    stamp = _fingerprint(cp, inputs[0])
                    synced(cp)
            prep = _prepared(family, variant, params, device, inputs, out, own, cp)
            result = describe(variant, family, params, work, prep, sets)
            if check:
                if ref is None:
                    with shared.phase(REFERENCE):
                        ref = harness.reference(prep)
                        synced(cp)
                with own.phase(CHECK):
                    result["check"] = harness.verify(prep, ref).to_dict()
            if time_launches and result.get("check", {}).get("passed", True):
                with own.phase(TIMING):
                    result.update(timed(prep, work, time_launches))
        except Exception as err:  # noqa: BLE001 (a kernel's fault, an illegal address ...: its own)
            result = _failed(err)
        del prep
        if inputs is not None and _fingerprint(cp, inputs[0]) != stamp:
            result["inputs_changed"] = True  # the next variant gets fresh inputs and reference
            inputs = out = ref = stamp = None
        result["phases"] = own.to_record()
        results[variant.id] = result
        _free(cp)
    inputs = out = ref = None
    _free(cp)
    answer = {"variants": results, "input_sets": sets}
    answer.update(ceilings(ceiling, gemm_ceiling, family, work, cp, shared))
    answer["phases"] = shared.to_record()
    return answer


def _failed(err: Exception) -> dict:
    """A variant's own failure, as its result says it."""
    if isinstance(err, ShapeError):
        return {"skipped": str(err)}
    if isinstance(err, PaprofError):
        return {"error": str(err), "exit_code": err.exit_code}
    detail = (str(err).splitlines() or [""])[0][:300]  # a kernel's fault: its own error
    return {"error": f"{type(err).__name__}: {detail}", "exit_code": 2}


def profile_all(family, variants, params, *, seed: int | None = None, launches: int = 1) -> dict:
    """The launches ncu profiles, for each of ``variants`` in turn, in one process (one ncu
    session for them all): each built and set up on the shape's shared inputs, launched
    once outside any range, then ``launches`` steps, each inside a push of its own NVTX
    range (``launch.profiled_steps``), which is what tells its results from the others'
    in the one report. Nothing is checked or timed (the batch did that before ncu). The
    result: per variant id, what the launcher alone says of its launches (``describe``,
    ``profiled_steps``) or its failure; a variant that fails is left out of the session and
    the next one runs."""

    work, cp, device, shared = _shape_setup(family, variants, params)
    inputs = out = None
    results: dict[str, dict] = {}
    for variant in variants:
        own = Clock()
        prep = None
        try:
            variant.check(params)
            if inputs is None:
                with shared.phase(INPUTS):
                    inputs, out = harness.make_inputs(family, params, seed, 1)
                    synced(cp)
            prep = _prepared(family, variant, params, device, inputs, out, own, cp)
            result = describe(variant, family, params, work, prep, 1)
            result.update(profiled_steps(variant, prep, cp, launches, warm=True))
        except Exception as err:  # noqa: BLE001 (its own failure: the next variant runs)
            result = _failed(err)
        del prep
        result["phases"] = own.to_record()
        results[variant.id] = result
        _free(cp)
    return {"variants": results, "input_sets": 1, "phases": shared.to_record()}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paprof.measure.kernels.batch", description=__doc__.split("\n")[0])

    p.add_argument("--variants", required=True, help="variant ids, comma-separated (one family)")
    shared_options(p)
    p.add_argument("--result", required=True, metavar="FILE", help="write the result as JSON here")
    p.add_argument("--profile-launches", type=int, default=0, metavar="N",
                   help="profile mode (under ncu): N launches of each variant, each inside a push "
                        "of its NVTX range; nothing checked or timed")
    p.add_argument("--no-check", action="store_true", help="skip the reference check")
    p.add_argument("--ceiling", action="store_true", help="also measure the read ceiling")
    p.add_argument("--gemm-ceiling", action="store_true", help="also measure the GEMM ceiling")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        result = run(args)
    except PaprofError as err:
        print(f"paprof batch: error: {err}", file=sys.stderr)
        return err.exit_code
    with open(args.result, "w") as fh:
        json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
