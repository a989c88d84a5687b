"""The code a run times, as hashes: each kernel's SASS and the launch settings.

Before a CUDA variant is timed, its compile units are compiled as the static gate compiles
them (``paprof.measure.static``: nvcc, the cubin cache) and ``cuobjdump -sass`` is hashed per
function (sha256 of the function's SASS text: instructions, their encodings and
addresses). With the launch settings the launcher reports (per kernel: grid, block,
dynamic and static shared memory, registers) they make the run's ``code`` record
(docs/CONTRACTS.md) and its ``fingerprint``, one sha256 over both. Two runs of the same
fingerprint ran the same machine code the same way: a timing change between them is
noise (``paprof.gate.same_code``).

Where the hash cannot be taken the record says why (``{"taken": false, "why": ...}``): a
``--cmd`` program or a Python callable (Triton, PyTorch: its framework compiles the
kernels, paprof does not), a ``build`` hook without ``compile_units``, no nvcc or no
cuobjdump. Nothing fails for want of a hash.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

from paprof.errors import UserError
from paprof.family import CudaVariant

KEY = "code"
"""The sidecar key of the record."""

_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$")


def split_functions(sass: str) -> dict[str, str]:
    """``cuobjdump -sass`` text per function: ``{name: its lines}`` (stripped)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in sass.splitlines():
        match = _FUNCTION.match(line)
        if match:
            name = match[1]
            out[name] = []
        elif name is not None and line.strip():
            out[name].append(line.strip())
    return {k: "\n".join(v) for k, v in out.items()}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def launch_settings(launches) -> list[dict]:
    """The launcher's ``launches`` (``KernelLaunch.to_dict()``) as the record keeps them."""
    keep = ("name", "grid", "block", "dynamic_smem", "static_smem", "registers")
    out = []
    for k in launches or []:
        if isinstance(k, dict):
            out.append({f: (list(k[f]) if isinstance(k.get(f), (list, tuple)) else k.get(f))
                        for f in keep})
    return out


def fingerprint(sass: dict[str, str], launches: list[dict]) -> str:
    """One sha256 over the per-function SASS hashes and the launch settings."""
    return digest(json.dumps({"sass": sass, "launches": launches}, sort_keys=True))


def not_taken(why: str) -> dict:
    return {"taken": False, "why": why}


def hash_sass(variant, params, arch: str | None = None) -> dict:
    """``{"taken": True, "how": ..., "sass": {function: sha256}}`` for a CUDA variant at
    ``params``, compiled for its own target or ``arch`` (the GPU the run is on), else
    ``not_taken(why)``. Never raises for want of tools."""
    from paprof.measure import static  # noqa: PLC0415 (compiles: only when a run is made)

    if not isinstance(variant, CudaVariant):
        return not_taken(f"a {variant.kind} variant: its framework compiles its kernels, "
                         "paprof does not see their SASS")
    try:
        units = static.compile_units(variant, params, arch)
        for unit in units:
            static.target_of(unit, variant.name)
        nvcc = static.find_nvcc()
    except UserError as err:
        return not_taken(str(err))
    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        return not_taken("cuobjdump not found (pip install nvidia-cuda-cuobjdump "
                         "nvidia-cuda-nvdisasm)")
    sass: dict[str, str] = {}
    try:
        for unit in units:
            text = static.sass_text(unit, nvcc, cuobjdump)
            functions = split_functions(text)
            if not functions:
                return not_taken("cuobjdump -sass printed no function (is nvdisasm there?)")
            sass.update({name: digest(body) for name, body in functions.items()})
    except (UserError, OSError, subprocess.SubprocessError) as err:
        return not_taken(f"could not compile for the hash: {err}")
    return {"taken": True, "how": f"{static.nvcc_version(nvcc, units[0].arch)}, cuobjdump -sass",
            "sass": sass}


def record(hashed: dict, launches) -> dict:
    """The sidecar's ``code``: ``hash_sass``'s result with the launch settings and the
    fingerprint (a record without hashes stays as it is)."""
    if not hashed.get("taken"):
        return hashed
    settings = launch_settings(launches)
    if not settings:
        return not_taken("the launcher reported no launch settings")
    return {**hashed, "launches": settings, "fingerprint": fingerprint(hashed["sass"], settings)}
