"""The gate without a GPU: compile a family's CUDA variants with nvcc, read the cubin.

For each CUDA variant at given parameters, its *compile units* (the declarative form:
``source_paths()`` and ``defines(params)``; a ``build``-hook variant: its
``compile_units(params)`` hook) are compiled as ``paprof.measure.kernels.gpu`` gives them to CuPy
(sources concatenated, ``-std=c++17 -I<folder> -D...``) with
``nvcc -arch=sm_90 -cubin -Xptxas -v`` (a variant's own ``arch`` where it names one:
``sm_90a`` for wgmma). Per entry function (kernel):

- from ptxas: registers per thread, stack frame, spill stores and loads, static shared
  memory, constant bank 0;
- from ``cuobjdump -res-usage`` (when found): local memory per thread (the stack frame,
  where spills go, plus other local data; without cuobjdump: ptxas's stack frame);
- from ``cuobjdump -sass`` (needs ``nvdisasm`` beside it): the instruction mix, counts per
  class (the metric catalogue's ``INSTRUCTION_CLASSES``: LDG/STG and their 128-bit share,
  LDS/STS, LDL/STL, HMMA/HGMMA, FFMA, BAR, ...).

``static_entries`` turns them into the gate's ``Entry`` objects (one per kernel:
``v5``, or ``v6:paged_decode_v6_split`` when a variant has several), so a static baseline
is an ordinary baseline (``gate: "static"``) that ``compare_to_baseline`` judges.
Compiled cubins are cached (``cache_dir()``: ``$XDG_CACHE_HOME/paprof/cubins``), keyed by
the sha256 of the sources and the files they include, the defines, the target and nvcc's
version: a second ``baseline update --static`` or ``check --static`` of unchanged
sources compiles nothing.

The gate sees what the cubin holds and nothing a launch decides: dynamic shared memory,
the grid and the block size (and so the occupancy they give) are out of its reach;
``paprof check --profile`` gates those.

nvcc is looked up on PATH, ``$CUDA_HOME/bin``, ``/usr/local/cuda*/bin``; cuobjdump also in
the ``nvidia-cuda-cuobjdump`` wheel's folder. CuPy compiles with NVRTC, not nvcc: the same
ptxas back end, so registers and spills agree; the static gate compares a cubin with a
cubin made the same way, never with a profiled run.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from paprof import gate
from paprof.read.metrics import INSTRUCTION_CLASSES
from paprof.errors import UserError
from paprof.family import CudaVariant
from paprof import registry

REACH_NOTE = ("the static gate reads the cubin: launch-time settings (dynamic shared memory, "
              "grid, block size, and the occupancy they give) are out of its reach; "
              "paprof check --profile gates them")
"""Said by every static ``baseline update`` and ``check``."""

ARCH_RE = re.compile(r"\bsm_\d+[a-z]?$")
"""A GPU target as nvcc's ``-arch`` takes it (``sm_90``, ``sm_90a``)."""


def check_arch(arch: str) -> str:
    """``arch`` when it is a target nvcc's ``-arch`` takes, else a one-line error."""
    if not ARCH_RE.fullmatch(arch or ""):
        raise UserError(f"GPU target {arch!r}: give it as nvcc's -arch takes it (sm_90, sm_80, sm_90a)")
    return arch


@dataclass(frozen=True)
class CompileUnit:
    """One nvcc compilation: sources concatenated, with ``-D`` values."""

    sources: tuple[Path, ...]
    defines: dict = field(default_factory=dict)
    arch: str | None = None
    """The target: the variant's own (``CudaVariant.arch``), else the one the command was
    given (``--arch``, the baseline's, the family's ``arch``); None: not known yet (the
    sources are listed, nothing can be compiled)."""
    flags: tuple[str, ...] = ()
    """The variant's compiler options (``CudaVariant.compiler_options``), as the run's
    NVRTC gets them."""

    def options(self) -> list[str]:
        include = self.sources[0].parent
        return ["-std=c++17", f"-I{include}"] + [
            f"-D{k}={v}" for k, v in sorted(self.defines.items())] + list(self.flags)


def _tools(name: str, wheel: bool = False) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    places = []
    if os.environ.get("CUDA_HOME"):
        places.append(Path(os.environ["CUDA_HOME"]) / "bin" / name)
    places += [Path(p) for p in sorted(glob.glob(f"/usr/local/cuda*/bin/{name}"), reverse=True)]
    if wheel:
        try:
            import nvidia  # the nvidia-cuda-cuobjdump / -nvdisasm wheels' namespace
        except ImportError:
            pass
        else:
            for root in getattr(nvidia, "__path__", []):
                places += [Path(p) for p in sorted(glob.glob(f"{root}/cu*/bin/{name}"))]
    return next((str(p) for p in places if p.is_file() and os.access(p, os.X_OK)), None)


def find_nvcc() -> str:
    """nvcc's path, or a one-line ``UserError``."""
    nvcc = _tools("nvcc")
    if nvcc is None:
        raise UserError("nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin): the "
                        "static gate compiles with the CUDA toolkit's nvcc")
    return nvcc


def find_cuobjdump() -> str | None:
    """cuobjdump's path (PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin, the
    ``nvidia-cuda-cuobjdump`` wheel), or None: no instruction mix."""
    return _tools("cuobjdump", wheel=True)


def nvcc_version(nvcc: str, arch: str | None = None) -> str:
    """``nvcc 13.0.88 sm_90``: the release, and the target where one is given."""
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"release [\d.]+, V([\d.]+)", done.stdout)
    return f"nvcc {match[1] if match else 'unknown'}" + (f" {arch}" if arch else "")


NO_ARCH = ("no GPU target for {name}: say which with --arch (sm_90 for an H100 or H200, "
           "sm_80 for an A100), or give the family an arch")


def target_of(unit: CompileUnit, name: str = "this variant") -> str:
    """The unit's target, or a one-line error saying how to give one."""
    if not unit.arch:
        raise UserError(NO_ARCH.format(name=name))
    return unit.arch


def compile_units(variant, params, arch: str | None = None) -> list[CompileUnit]:
    """What ``variant`` compiles at ``params``, for the variant's own target or ``arch``;
    ``UserError`` for a variant the static gate cannot see into (not CUDA, or a ``build``
    hook without ``compile_units``)."""
    if not isinstance(variant, CudaVariant):
        raise UserError(f"{variant.name} is a {variant.kind} variant: the static gate "
                        "compiles CUDA variants only")
    variant.check(params)
    if variant.compile_units is not None:
        base = variant.folder or Path.cwd()
        flags = variant.compiler_options(params)
        return [CompileUnit(tuple(Path(s) if Path(s).is_absolute() else base / s
                                  for s in sources), dict(defines), variant.arch or arch, flags)
                for sources, defines in variant.compile_units(params)]
    if variant.build is not None:
        raise UserError(f"{variant.name} has a build hook and no compile_units hook: the "
                        "static gate cannot know what it compiles")
    defines = variant.defines(params) if callable(variant.defines) else variant.defines
    return [CompileUnit(tuple(variant.source_paths()), dict(defines or {}), variant.arch or arch,
                        variant.compiler_options(params))]


def compile_cubin(unit: CompileUnit, folder: Path, nvcc: str) -> tuple[str, Path]:
    """Compile ``unit`` into ``folder``: (ptxas's ``-v`` log, the cubin)."""
    code = folder / "unit.cu"
    code.write_text("\n".join(Path(s).read_text() for s in unit.sources))
    cubin = folder / "unit.cubin"
    cmd = [nvcc, f"-arch={target_of(unit)}", "-cubin", "-Xptxas", "-v", *unit.options(), "-o", str(cubin),
           str(code)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if "error" in line),
                     done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
        names = ", ".join(Path(s).name for s in unit.sources)
        raise UserError(f"nvcc could not compile {names}: {first.strip()}")
    return done.stderr + done.stdout, cubin


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


def parse_ptxas(log: str) -> dict[str, dict[str, float]]:
    """Per entry function: registers, stack frame, spills, static smem, cmem[0]."""
    out: dict[str, dict[str, float]] = {}
    current = None
    for line in log.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = entry[1]
            out[current] = {"registers_per_thread": 0.0, "stack_frame_bytes": 0.0,
                            "spill_stores_bytes": 0.0, "spill_loads_bytes": 0.0,
                            "shared_mem_static_bytes": 0.0, "const_mem_bytes": 0.0}
            continue
        if current is None:
            continue
        if "Function properties for" in line and current not in line:
            current = None  # a device function's properties: not the kernel's
            continue
        props = _PROPS.search(line)
        if props:
            out[current].update(stack_frame_bytes=float(props[1]),
                                spill_stores_bytes=float(props[2]),
                                spill_loads_bytes=float(props[3]))
        used = _USED.search(line)
        if used:
            out[current]["registers_per_thread"] = float(used[1])
            smem = re.search(r"(\d+) bytes smem", line)
            cmem = re.search(r"(\d+) bytes cmem\[0\]", line)
            out[current]["shared_mem_static_bytes"] = float(smem[1]) if smem else 0.0
            out[current]["const_mem_bytes"] = float(cmem[1]) if cmem else 0.0
            current = None
    return out


def parse_res_usage(text: str) -> dict[str, dict[str, float]]:
    """``cuobjdump -res-usage``: per function, ``local_mem_bytes`` and ``const_mem_bytes``
    (bank 0: the kernel's parameters and constants; ptxas of CUDA 13 no longer says).

    Local memory per thread is the stack frame (``STACK``: where ptxas puts spilled
    registers and the local arrays it cannot keep in registers) plus ``LOCAL`` (other
    local data): a kernel that spills has ``LOCAL:0`` and ``STACK:176``, and 176 bytes of
    local memory a thread."""
    out = {}
    name = None
    for line in text.splitlines():
        fn = re.match(r"\s*Function ([^:\s]+):", line)
        if fn:
            name = fn[1]
            continue
        local = re.search(r"\bLOCAL:(\d+)", line)
        if name and local:
            stack = re.search(r"\bSTACK:(\d+)", line)
            const = re.search(r"\bCONSTANT\[0\]:(\d+)", line)
            out[name] = {"local_mem_bytes": float(local[1]) + (float(stack[1]) if stack else 0.0)}
            if const:
                out[name]["const_mem_bytes"] = float(const[1])
            name = None
    return out


_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_BY_OPCODE = {op: tuple(c for c in INSTRUCTION_CLASSES if op in c.opcodes)
              for op in {o for c in INSTRUCTION_CLASSES for o in c.opcodes}}
"""Opcode head -> the instruction classes that count it (``LDG``: ``ldg`` and ``ldg_128``)."""


def parse_sass(text: str) -> dict[str, dict[str, float]]:
    """``cuobjdump -sass``: per function, counts per instruction class (the catalogue's
    ``INSTRUCTION_CLASSES``), as ``sass_<class>``."""
    out: dict[str, Counter] = {}
    name = None
    for line in text.splitlines():
        fn = re.match(r"\s*Function : (\S+)", line)
        if fn:
            name = fn[1]
            out[name] = Counter()
            continue
        ins = _INSTRUCTION.search(line) if name else None
        if not ins:
            continue
        opcode = ins[1]
        head = opcode.split(".")[0]
        if head == "NOP":
            continue
        counts = out[name]
        counts["total"] += 1
        for c in _BY_OPCODE.get(head, ()):
            if not c.wide or ".128" in opcode:
                counts[c.name] += 1
    return {k: {c.column: float(v[c.name]) for c in INSTRUCTION_CLASSES} for k, v in out.items()}


def _cuobjdump(cuobjdump: str, flag: str, cubin: Path) -> str:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(cuobjdump).parent), env.get("PATH", "")])
    nvdisasm = _tools("nvdisasm", wheel=True)
    if nvdisasm:
        env["PATH"] = os.pathsep.join([str(Path(nvdisasm).parent), env["PATH"]])
    done = subprocess.run([cuobjdump, flag, str(cubin)], capture_output=True, text=True,
                          env=env, check=False)
    return done.stdout if done.returncode == 0 else ""


CACHE_ENV = "PAPROF_CUBIN_CACHE"
"""A folder for the cubin cache, or ``off`` (also ``0``, ``no``, empty) for none."""

_CACHE_FORMAT = "paprof-cubin-cache 1"
"""Part of every key: a change to what a cache entry holds makes new keys."""

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def cache_dir() -> Path | None:
    """Where compiled cubins are kept: ``$PAPROF_CUBIN_CACHE``, else
    ``$XDG_CACHE_HOME/paprof/cubins``, else ``~/.cache/paprof/cubins``; None when
    ``$PAPROF_CUBIN_CACHE`` is ``off``."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() in ("", "0", "off", "no", "false") else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paprof" / "cubins"


def _includes(source: Path, folder: Path, seen: dict[Path, bytes]) -> None:
    """``source``'s text and, recursively, the files its ``#include "..."`` lines name
    (beside the including file, else in ``folder``, the ``-I`` one) into ``seen``.
    ``<...>`` headers are the toolkit's: the nvcc version stands for them."""
    source = source.resolve()
    if source in seen or not source.is_file():
        return
    text = source.read_bytes()
    seen[source] = text
    for name in _INCLUDE.findall(text.decode(errors="replace")):
        for base in (source.parent, folder):
            if (base / name).is_file():
                _includes(base / name, folder, seen)
                break


@functools.lru_cache(maxsize=None)
def _nvcc_identity(nvcc: str) -> str:
    """``nvcc --version`` in full (the release and the build): part of every key."""
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def cache_key(unit: CompileUnit, nvcc: str) -> str:
    """sha256 of what decides the cubin: the sources and every file they include (by
    content, in order), the nvcc options (``-D`` defines, ``-I``), the target and nvcc's
    version."""
    digest = hashlib.sha256(_CACHE_FORMAT.encode())
    folder = Path(unit.sources[0]).parent
    for source in unit.sources:
        seen: dict[Path, bytes] = {}
        _includes(Path(source), folder, seen)
        if Path(source).resolve() not in seen:  # unreadable: nvcc will say so
            digest.update(f"missing {source}".encode())
        for path, text in seen.items():
            digest.update(f"\0file {path.name} {len(text)}\0".encode())
            digest.update(text)
    digest.update("\0".join([target_of(unit), *unit.options(), _nvcc_identity(nvcc)]).encode())
    return digest.hexdigest()


def cached_cubin(unit: CompileUnit, nvcc: str, scratch: Path
                 ) -> tuple[str, Path, Path | None]:
    """``compile_cubin``'s ``(ptxas log, cubin)`` and the cache entry (a folder; None
    without a cache): from the cache when the same sources were compiled the same way
    before (``cache_key``), else compiled and stored. A cache that cannot be read or
    written is no cache (never an error)."""
    root = cache_dir()
    entry = root / cache_key(unit, nvcc) if root is not None else None
    if entry is not None:
        try:
            return (entry / "ptxas.log").read_text(), _checked(entry / "unit.cubin"), entry
        except OSError:
            shutil.rmtree(entry, ignore_errors=True)  # absent, or a broken entry
    log, cubin = compile_cubin(unit, scratch, nvcc)
    if entry is not None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
            shutil.copyfile(cubin, staging / "unit.cubin")
            (staging / "ptxas.log").write_text(log)
            try:
                os.replace(staging, entry)  # whole or not at all; a rival's copy wins
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError:
            return log, cubin, None
    return log, cubin, entry


def _tool_stamp(*tools: str | None) -> str:
    """A short name for the cuobjdump (and nvdisasm) in use: their paths, sizes and times."""
    digest = hashlib.sha256()
    for tool in tools:
        if tool:
            st = os.stat(tool)
            digest.update(f"{os.path.realpath(tool)} {st.st_size} {st.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _dump(cuobjdump: str, flag: str, cubin: Path, entry: Path | None) -> str:
    """``cuobjdump flag cubin``, kept in the cache entry beside the cubin (the SASS of a
    large cubin takes longer to print than the cubin takes to compile)."""
    if entry is None:
        return _cuobjdump(cuobjdump, flag, cubin)
    kept = entry / f"{flag.lstrip('-')}-{_tool_stamp(cuobjdump, _tools('nvdisasm', wheel=True))}.txt"
    try:
        return kept.read_text()
    except OSError:
        pass
    text = _cuobjdump(cuobjdump, flag, cubin)
    if text:
        try:
            partial = kept.with_name(f".{kept.name}.{os.getpid()}.{threading.get_ident()}")  # threads too
            partial.write_text(text)
            os.replace(partial, kept)
        except OSError:
            pass
    return text


def _checked(cubin: Path) -> Path:
    if not cubin.is_file() or cubin.stat().st_size == 0:
        raise FileNotFoundError(cubin)
    return cubin


def sass_text(unit: CompileUnit, nvcc: str, cuobjdump: str) -> str:
    """``cuobjdump -sass`` of ``unit``'s cubin (from the cache when compiled before; empty
    when cuobjdump printed nothing)."""
    with tempfile.TemporaryDirectory(prefix="paprof-static-") as scratch:
        _, cubin, entry = cached_cubin(unit, nvcc, Path(scratch))
        return _dump(cuobjdump, "-sass", cubin, entry)


def kernel_counts(unit: CompileUnit, nvcc: str, cuobjdump: str | None
                  ) -> dict[str, dict[str, float]]:
    """Per kernel of one compile unit: the static metrics (``gate.STATIC_METRICS``;
    the instruction mix only with cuobjdump). The cubin comes from the cache
    (``cached_cubin``) when these sources were compiled before."""
    with tempfile.TemporaryDirectory(prefix="paprof-static-") as scratch:
        log, cubin, entry = cached_cubin(unit, nvcc, Path(scratch))
        kernels = parse_ptxas(log)
        if cuobjdump:
            for table in (parse_res_usage(_dump(cuobjdump, "-res-usage", cubin, entry)),
                          parse_sass(_dump(cuobjdump, "-sass", cubin, entry))):
                for name, values in table.items():
                    if name in kernels:
                        kernels[name].update(values)
    for values in kernels.values():
        # without cuobjdump, ptxas's stack frame is the local memory a thread uses
        values.setdefault("local_mem_bytes", values["stack_frame_bytes"])
    return kernels


def static_entries(family, params, variants: Sequence = (), arch: str | None = None
                   ) -> tuple[list, list[str]]:
    """``(entries, notes)``: one ``gate.Entry`` per kernel of each CUDA variant of
    ``family`` (the named ``variants`` ids, default all) at ``params``, compiled for the
    variant's own target, else ``arch``, else the family's. A variant the static gate
    cannot compile is a note when it was not named, a ``UserError`` when it was."""
    arch = check_arch(arch) if arch else getattr(family, "arch", None)
    nvcc = find_nvcc()
    cuobjdump = find_cuobjdump()
    named = [v for v in variants if v != "all"]
    chosen = [family.variant(v.split("/")[-1]) for v in named] or list(family.variants)
    entries, notes = [], []
    if cuobjdump is None:
        notes.append("cuobjdump not found: no instruction mix or local memory "
                     "(pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    for variant in chosen:
        try:
            units = compile_units(variant, params, arch)
            for unit in units:
                target_of(unit, variant.name)
        except UserError as err:
            if named:
                raise
            notes.append(f"{variant.name} not compiled: {err}")
            continue
        compiler = nvcc_version(nvcc, units[0].arch)
        kernels: dict[str, dict] = {}
        for unit in units:
            kernels.update(kernel_counts(unit, nvcc, cuobjdump))
        wanted = variant.kernel_regex_for(params)
        regex = re.compile(wanted) if wanted else None
        kept = {k: v for k, v in kernels.items() if regex is None or regex.search(k)} or kernels
        for name, values in sorted(kept.items()):
            vid = variant.id if len(kept) == 1 else f"{variant.id}:{name}"
            metrics = {m: gate.Stat(float(v), 0.0, 1) for m, v in values.items()}
            entries.append(gate.Entry(family.name, vid, params.spec(), metrics,
                                         gate.Provenance(compiler=compiler)))
    if not entries:
        raise UserError(f"no CUDA variant of {family.name} could be compiled")
    return entries, notes


def make_static_baseline(family, params, variants: Sequence = (), arch: str | None = None) -> tuple:
    """``(Baseline with gate "static", notes)`` of ``static_entries`` at ``params``: one
    shape, or a list of them (``check --static`` then compiles and checks each); each
    entry's compiler names the target (``nvcc 13.0.88 sm_90``), which the check reuses."""
    entries, notes = [], []
    for p in params if isinstance(params, (list, tuple)) else [params]:
        got, said = static_entries(family, p, variants, arch)
        entries += got
        notes += [n for n in said if n not in notes]
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return gate.Baseline(entries=entries, created=stamp, gate="static"), notes


def current_for(baseline) -> tuple[list, list[str]]:
    """The static entries now for every (family, shape) of a static ``baseline``."""
    if baseline.gate != "static":
        raise UserError("this baseline was made from profiled runs: check it without "
                        "--static (or write a static one: 'paprof baseline update --static')")
    groups: dict[tuple[str, str, str | None], list[str]] = {}
    for e in baseline.entries:
        target = ARCH_RE.search((e.provenance.compiler or "") if e.provenance else "")
        key = (e.family, e.shape, target[0] if target else None)
        groups.setdefault(key, []).append(e.variant.split(":")[0])
    entries, notes = [], []
    for (name, shape, arch), vids in groups.items():
        family = registry.family(name)
        got, said = static_entries(family, family.parse(shape), list(dict.fromkeys(vids)), arch)
        entries += got
        notes += said
    return entries, list(dict.fromkeys(notes))
