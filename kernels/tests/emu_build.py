"""Building a CPU emulation driver (kernels/tests/flash_emu, kernels/tests/paged_emu): g++ with C++20,
AddressSanitizer and UBSan (the first error aborts), one std::thread per CUDA thread.

A build is cached by what it compiles: the sha256 of the preprocessed source (``g++ -E -P``,
every included file's text, the -D values applied) and of the compile flags. The cache is a
folder of the machine's temporary directory (``PAPROF_EMU_CACHE`` names another), shared by
the session's tests, by pytest-xdist's workers (a lock a build: two workers wanting one
driver compile it once) and by later sessions; a build with another source or flag is
another file, so a stale binary is never run."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

GXX = shutil.which("g++")
FLAGS = ["-std=c++20", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-pthread"]


def cache_dir() -> Path:
    folder = Path(os.environ.get("PAPROF_EMU_CACHE") or Path(tempfile.gettempdir()) / f"paprof-emu-{os.getuid()}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _source_key(cmd: list[str]) -> str:
    """sha256 of the flags and the preprocessed source (no line markers: the paths of a
    copied source do not count); the preprocessor's errors are the assertion's."""
    done = subprocess.run([*cmd, "-E", "-P"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    digest = hashlib.sha256("\0".join(FLAGS).encode())
    digest.update(done.stdout)
    return digest.hexdigest()[:32]


def build_driver(driver_cpp: Path, exe: Path, defines: dict, includes: list[Path]) -> Path:
    """The driver ``driver_cpp`` compiled with ``-DKEY=VALUE`` for each of ``defines`` (a
    value of None gives a bare ``-DKEY``): the cached binary's path (``exe`` names the
    build in the compiler's error only); the compiler's errors are the assertion's."""
    cmd = [GXX, "-std=c++20", *[f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()],
           *[f"-I{p}" for p in includes], str(driver_cpp)]
    folder = cache_dir()
    cached = folder / _source_key(cmd)
    with open(folder / f"{cached.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.exists():
            scratch = folder / f"{cached.name}.{os.getpid()}.tmp"
            done = subprocess.run([GXX, *FLAGS, *cmd[2:], "-o", str(scratch)], capture_output=True, text=True)
            assert done.returncode == 0, f"{exe.name}: {done.stderr[-4000:]}"
            os.replace(scratch, cached)
    return cached
