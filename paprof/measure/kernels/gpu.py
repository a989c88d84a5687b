"""CuPy access for the kernels: found on first use, compiled modules cached per process.

Nothing here runs at import; a machine without CuPy or a GPU gets a one-line
``UserError`` from ``cupy()`` when a GPU path is taken.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from paprof.errors import ShapeError, UserError


@functools.lru_cache(maxsize=None)
def cupy():
    """The ``cupy`` module, or a clear error when it or a GPU is missing."""
    try:
        import cupy as cp  # noqa: PLC0415 (lazy by design)
    except ImportError:
        raise UserError(
            "CuPy is not installed: install the GPU extra (pip install 'paprof[gpu]') on a CUDA machine"
        ) from None
    except Exception as err:  # e.g. RuntimeError: the driver version is insufficient
        detail = (str(err).splitlines() or [type(err).__name__])[0]
        raise UserError(f"CuPy cannot start on this machine (the environment, not the kernel): "
                        f"{type(err).__name__}: {detail}") from None
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDA driver missing or broken
        raise UserError(f"no usable CUDA GPU: {err}") from None
    if count == 0:
        raise UserError("no CUDA GPU is visible to this process")
    return cp


@dataclass(frozen=True)
class Device:
    """The properties of the current GPU that launch decisions read."""

    name: str
    sm_count: int
    l2_bytes: int
    compute_capability: str
    smem_per_block_optin: int
    smem_per_sm: int
    regs_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int


@functools.lru_cache(maxsize=None)
def current_device() -> Device:
    cp = cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    if isinstance(name, bytes):
        name = name.decode()
    return Device(
        name=name,
        sm_count=int(props["multiProcessorCount"]),
        l2_bytes=int(props["l2CacheSize"]),
        compute_capability=f"{props['major']}.{props['minor']}",
        smem_per_block_optin=int(props.get("sharedMemPerBlockOptin", 48 * 1024)),
        smem_per_sm=int(props.get("sharedMemPerMultiprocessor", 228 * 1024)),
        regs_per_sm=int(props.get("regsPerMultiprocessor", 65536)),
        max_threads_per_sm=int(props.get("maxThreadsPerMultiProcessor", 2048)),
        max_blocks_per_sm=int(props.get("maxBlocksPerMultiProcessor", 32)),
    )


_MODULES: dict = {}


def arch_capability(arch: str) -> str:
    """The compute capability a target runs on: ``sm_90a`` -> ``9.0``."""
    digits = arch.removeprefix("sm_").rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}"


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a real folder (no link) of this user's that nobody else may
    write: the cubins in it are run on the GPU, so no one else may have put them there."""
    import stat

    try:
        st = os.lstat(folder)
    except OSError:
        return False
    mine = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
    return stat.S_ISDIR(st.st_mode) and mine and not st.st_mode & 0o022


def cubin_folder() -> Path:
    """Where NVRTC's cubins are kept: ``$PAPROF_CUBIN_CACHE``, else
    ``~/.cache/paprof/cubin``; without a writable home, ``paprof-cubin-<uid>`` in the
    temporary folder, made for this user alone and used only while it is theirs (another
    user could make it first, or plant a cubin in it); else a fresh private folder."""
    folder = Path(os.environ.get("PAPROF_CUBIN_CACHE", Path.home() / ".cache" / "paprof" / "cubin"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError:  # no writable home: the temporary folder
        pass
    uid = os.geteuid() if hasattr(os, "geteuid") else "user"
    folder = Path(tempfile.gettempdir()) / f"paprof-cubin-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        pass
    return folder if _private(folder) else Path(tempfile.mkdtemp(prefix="paprof-cubin-"))


def _compile_for_arch(code: str, options: list[str], arch: str, names: str):
    """NVRTC for one named target (CuPy's RawModule picks ``-arch`` itself, from the GPU,
    and cannot name ``sm_90a``): the cubin is written once to a cache file named by the
    code and options, then loaded by ``RawModule(path=...)``."""
    cp = cupy()
    from cupy_backends.cuda.libs import nvrtc  # noqa: PLC0415 (with CuPy, lazy)

    opts = tuple(options) + (f"-arch={arch}",)
    version = ".".join(map(str, nvrtc.getVersion()))  # a new NVRTC compiles afresh
    digest = hashlib.sha256("\0".join((code, version) + opts).encode()).hexdigest()[:32]
    path = cubin_folder() / f"{digest}.cubin"
    if not path.exists():
        prog = nvrtc.createProgram(code, "kernel.cu", (), ())
        try:
            nvrtc.compileProgram(prog, opts)
            cubin = nvrtc.getCUBIN(prog)
        except nvrtc.NVRTCError as err:
            raise UserError(f"compiling {names} for {arch} failed: {err}\n{nvrtc.getProgramLog(prog)}") from None
        finally:
            nvrtc.destroyProgram(prog)
        fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:  # a random name made with O_EXCL: nothing planted is followed
            fh.write(cubin)
        os.replace(partial, path)  # atomic: a concurrent process reads a whole file or none
    return cp.RawModule(path=str(path))


def compile_module(sources: list[Path], defines: dict[str, object] | None = None, arch: str | None = None,
                   flags: tuple[str, ...] = ()):
    """Compile ``.cu`` files (concatenated) with ``-D`` defines and the variant's compiler
    options (``flags``: ``CudaVariant.compiler_options``); cached per process.

    CuPy also caches the binary on disk, so a second process compiles nothing. ``arch``
    (``"sm_90a"``) compiles for that target alone; on a GPU of another compute capability
    that is a ``ShapeError`` (the variant is skipped, with the reason).
    """
    cp = cupy()
    if arch is not None and current_device().compute_capability != arch_capability(arch):
        raise ShapeError(f"compiled for {arch} only (compute capability {arch_capability(arch)}); "
                         f"this GPU, {current_device().name}, is {current_device().compute_capability}")
    code = "\n".join(Path(s).read_text() for s in sources)
    # CuPy's on-disk cache keys on the source text only: name the headers' contents too,
    # so that an edited .cuh recompiles
    include = Path(sources[0]).parent
    headers = hashlib.sha256(b"".join(h.read_bytes() for h in sorted(include.glob("*.cuh")))).hexdigest()
    code += f"\n// headers {headers}\n"
    options = ["-std=c++17", f"-I{include}"]
    options += [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    options += list(flags)
    if os.environ.get("PAPROF_LINEINFO") == "1" and "-lineinfo" not in options:
        options.append("-lineinfo")  # the ``source`` preset: lines for SourceCounters
    key = (code, tuple(options), arch)
    if key not in _MODULES and arch is not None:
        _MODULES[key] = _compile_for_arch(code, options, arch, ", ".join(Path(s).name for s in sources))
    if key not in _MODULES:
        try:
            _MODULES[key] = cp.RawModule(code=code, options=tuple(options))
            _MODULES[key].compile()
        except cp.cuda.compiler.CompileException as err:
            raise UserError(f"compiling {', '.join(Path(s).name for s in sources)} failed: {err}") from None
    return _MODULES[key]


def kernel_launch(kernel, name: str, grid, block, smem: int = 0):
    """What a launch of ``kernel`` is (a ``paprof.family.KernelLaunch``); raises the
    kernel's dynamic shared-memory limit when ``smem`` needs more than the default 48 KiB."""
    from paprof.family import KernelLaunch

    if smem + int(kernel.shared_size_bytes) > 48 * 1024:  # past the default needs an opt-in
        kernel.max_dynamic_shared_size_bytes = smem
    return KernelLaunch(
        name=name,
        grid=tuple(grid) + (1,) * (3 - len(grid)),
        block=tuple(block) + (1,) * (3 - len(block)),
        dynamic_smem=int(smem),
        registers=int(kernel.num_regs),
        static_smem=int(kernel.shared_size_bytes),
    )


def blocks_per_sm(kernel, threads: int, dynamic_smem: int, device: Device) -> int:
    """Resident blocks per SM by the register, shared-memory, warp and block limits."""
    warps = -(-threads // 32)
    regs = max(int(kernel.num_regs), 1)
    regs_per_warp = -(-(regs * 32) // 256) * 256
    by_regs = device.regs_per_sm // (regs_per_warp * warps)
    smem = int(kernel.shared_size_bytes) + dynamic_smem + 1024  # 1 KiB reserved per block
    by_smem = device.smem_per_sm // smem
    by_warps = device.max_threads_per_sm // (warps * 32)
    return max(0, min(by_regs, by_smem, by_warps, device.max_blocks_per_sm))
