"""The SASS of every build the kernel lab ships, hashed: proof that a change to the sources
or to the build path left the shipped kernels as they were.

Every build the builders ask for (paged_decode baseline..v7, v7's merge kernel (DEFER_MERGE)
included, over the K/V dtypes, several head layouts and page sizes 16 and 8; flash_fwd's CUDA
variants over dtypes, head dims and causal) is compiled as the static gate compiles it
(``paprof.measure.static.compile_units``: the same sources concatenated, -D values, arch and compiler
options) into a cubin by ``nvcc -cubin``, and ``cuobjdump -sass`` of it is hashed. Builds
whose inputs are the same (source text, -D values, arch, options) are compiled once.

    PYTHONPATH=..:. python3 scripts/shipped_sass.py -o before.txt          # before a change
    PYTHONPATH=..:. python3 scripts/shipped_sass.py -o after.txt --compare before.txt

prints ``N builds, U compiled, M distinct SASS`` and, with --compare, how many builds'
SASS differs from the file's (exit 1 if any, or if a build of one file is missing in the
other). ``--defaults`` also compiles each .cu of both families with no -D values at all
and says which shipped builds it equals (a .cu compiled with no defines is what ships).
Needs nvcc and cuobjdump (the nvidia-cuda-cuobjdump wheel does); no GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from paprof.measure import static
from paprof.errors import ShapeError, UserError
from paprof.family import CudaVariant

PAGED_DTYPES = ("fp32", "fp16", "bf16", "fp8")
PAGED_LAYOUTS = (
    # (q_heads, kv_heads, head_dim): groups 1, 2, 4, 8; head_dim 64 and 128 (the register
    # feed), 32 and 256 (fp32's dims and the cp.async ring of the 16-bit caches)
    (32, 32, 128), (32, 32, 64), (32, 16, 128), (32, 8, 128), (32, 8, 64), (32, 4, 128),
    (32, 8, 256), (32, 8, 32),
)
PAGE_SIZES = (16, 8)
FLASH_DTYPES = ("fp32", "fp16", "bf16")
FLASH_DIMS = (64, 128)


def _paged_units():
    from paprof_kernels.paged_decode import FAMILY, variants
    from paprof_kernels.paged_decode.problem import parse_shape

    for variant in FAMILY.variants:
        if not isinstance(variant, CudaVariant):
            continue
        for dtype in PAGED_DTYPES:
            for q, kv, d in PAGED_LAYOUTS:
                for page in PAGE_SIZES:
                    shape = parse_shape(f"batch=4,heads={q},kv_heads={kv},d={d},page={page},"
                                        f"dtype={dtype},context=1024")
                    label = f"paged_decode {variant.id} {shape.slug()}"
                    try:
                        units = static.compile_units(variant, shape, FAMILY.arch)
                    except (ShapeError, UserError):
                        continue
                    for k, unit in enumerate(units):
                        yield f"{label} #{k}", unit
                    if variant.id == "v7":  # its merge kernel: the streaming kernels with DEFER_MERGE
                        for name, worklist in variants._WORKLIST_OF.items():
                            defines = variants.fast_defines(shape, True, name, worklist, defer=True)
                            yield (f"{label} {name} DEFER_MERGE",
                                   static.CompileUnit((variants.fast_source(shape),), defines,
                                                      units[0].arch, units[0].flags))


def _flash_units():
    from paprof_kernels.flash_fwd import FAMILY
    from paprof_kernels.flash_fwd.problem import Shape

    for variant in FAMILY.variants:
        if not isinstance(variant, CudaVariant):
            continue
        for dtype in FLASH_DTYPES:
            for d in FLASH_DIMS:
                for causal in (False, True):
                    shape = Shape.parse(f"batch=2,heads=8,seq=1024,d={d},dtype={dtype},causal={int(causal)}")
                    try:
                        units = static.compile_units(variant, shape, FAMILY.arch)
                    except (ShapeError, UserError):
                        continue
                    for k, unit in enumerate(units):
                        yield f"flash_fwd {variant.id} {shape.slug()} #{k}", unit


def shipped_units() -> list[tuple[str, static.CompileUnit]]:
    """(label, unit) of every shipped build enumerated here, labels unique."""
    return list(_paged_units()) + list(_flash_units())


def _key(unit: static.CompileUnit) -> str:
    """What decides the cubin: the concatenated source text (includes resolved by the
    compiler from the same folder), the -D values, the arch and the options."""
    text = "\n".join(Path(s).read_text() for s in unit.sources)
    includes = sorted((p.name, p.read_text()) for p in unit.sources[0].parent.glob("*.cuh"))
    return hashlib.sha256(repr((text, includes, sorted(unit.defines.items()), unit.arch,
                                unit.flags)).encode()).hexdigest()


def _sass_hash(unit: static.CompileUnit) -> str:
    nvcc, cuobjdump = static.find_nvcc(), static.find_cuobjdump()
    with tempfile.TemporaryDirectory(prefix="shipped-sass-") as scratch:
        _, cubin = static.compile_cubin(unit, Path(scratch), nvcc)
        sass = static._cuobjdump(cuobjdump, "-sass", cubin)
    if not sass.strip():
        raise RuntimeError(f"cuobjdump printed no SASS for {unit.sources}")
    return hashlib.sha256(sass.encode()).hexdigest()[:16]


def _default_units():
    """Each .cu of both families compiled with no -D values (wgmma's at sm_90a)."""
    from paprof_kernels.flash_fwd import catalog as flash_catalog
    from paprof_kernels import flash_fwd, paged_decode

    for package in (paged_decode, flash_fwd):
        folder = Path(package.__file__).parent
        for source in sorted(folder.glob("*.cu")):
            arch = flash_catalog.WGMMA_ARCH if source.stem.startswith("wgmma") else static.ARCH
            yield f"{folder.name}/{source.name} (no -D values)", static.CompileUnit((source,), {}, arch)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path, help="write 'hash label' a build to this file")
    ap.add_argument("--compare", type=Path, help="a file written by -o before: report builds whose SASS differs")
    ap.add_argument("--defaults", action="store_true", help="also each .cu compiled with no -D values")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    builds = shipped_units()
    extra = list(_default_units()) if args.defaults else []
    keys = {label: _key(unit) for label, unit in builds + extra}
    todo = {}
    for label, unit in builds + extra:
        todo.setdefault(keys[label], unit)
    with ProcessPoolExecutor(args.jobs) as pool:
        hashes = dict(zip(todo, pool.map(_sass_hash, todo.values())))
    result = {label: hashes[keys[label]] for label, _ in builds}
    lines = [f"{h} {label}" for label, h in result.items()]
    if args.output:
        args.output.write_text("\n".join(lines) + "\n")
    print(f"{len(builds)} builds, {len({keys[label] for label, _ in builds})} compiled, "
          f"{len(set(result.values()))} distinct SASS")
    for label, _ in extra:
        same = sorted(lab for lab, h in result.items() if h == hashes[keys[label]])
        print(f"{label}: " + (f"the SASS of {len(same)} shipped builds, e.g. {same[0]}" if same
                              else "equals no shipped build"))
    if args.compare:
        before = dict(line.split(" ", 1)[::-1] for line in args.compare.read_text().splitlines() if line)
        differ = sorted(lab for lab in result if lab in before and before[lab] != result[lab])
        missing = sorted(set(before) ^ set(result))
        for lab in differ:
            print(f"differs: {lab}")
        for lab in missing:
            print(f"in one file only: {lab}")
        print(f"against {args.compare}: {len(differ)} different, {len(missing)} in one file only")
        return 1 if differ or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
