"""Building a CPU emulation driver (tests/flash_emu, tests/paged_emu): g++ with C++20,
AddressSanitizer and UBSan (the first error aborts), one std::thread per CUDA thread."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

GXX = shutil.which("g++")


def build_driver(driver_cpp: Path, exe: Path, defines: dict, includes: list[Path]) -> Path:
    """Compile ``driver_cpp`` into ``exe`` with ``-DKEY=VALUE`` for each of ``defines``
    (a value of None gives a bare ``-DKEY``); the compiler's errors are the assertion's."""
    cmd = [GXX, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
           "-pthread", *[f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()],
           *[f"-I{p}" for p in includes], str(driver_cpp), "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return exe
