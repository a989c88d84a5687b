"""Reading ncu's console output: profiling progress, replay passes, errors.

Pure text handling (no processes), so the runner and the tests share it. ncu prints
``==PROF== Profiling "kernel" - 3: 0%....50%....100% - 20 passes`` per profiled launch
(older versions drop the `` - 3``), ``==ERROR== ...`` and ``==WARNING== ...`` lines; the
profiled program's own output is interleaved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from paprof.errors import UserError, VerificationError

PROFILING_RE = re.compile(
    r'==PROF== Profiling "(?P<kernel>[^"]*)"(?:\s*-\s*(?P<launch>\d+))?:?\s*(?P<progress>[0-9%.]*)'
    r"(?:\s*-\s*(?P<passes>\d+)\s+pass(?:es)?)?"
)
PERCENT_RE = re.compile(r"(\d+)%")
# ncu finishes a progress line on a line of its own when a warning cut in:
# "...50%....100% - 20 passes"
CONTINUATION_RE = re.compile(r"^[.0-9%]*\s*-\s*(?P<passes>\d+)\s+pass(?:es)?\s*$")
APP_EXIT_RE = re.compile(r"The application returned an error code \((\d+)\)")

PERMISSION_HELP = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run it as root, or "
    "allow all users with 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in a file "
    "under /etc/modprobe.d and a reboot (containers also need --cap-add SYS_ADMIN); "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
PERMISSION_MARKERS = ("err_nvgpuctrperm", "permission to access nvidia gpu performance counters")
NO_DEVICE_MARKERS = (
    "no cuda-capable device",
    "no supported cuda devices",
    "cudaerrornodevice",
    "cuda_error_no_device",
    "failed to connect to the cuda driver",
    "no cuda device",
    "no usable cuda gpu",
    "no cuda gpu is visible",
    "nvidia driver on your system",
)


class NothingProfiled(UserError):
    """ncu ran to its end and profiled no kernel: the NVTX range or the kernel-name filter
    matched nothing (or, under ``--target-processes application-only``, the program's own
    process launched nothing there)."""


@dataclass
class ProfiledKernel:
    """One ``==PROF== Profiling`` line: a kernel launch ncu replayed."""

    kernel: str
    """The kernel's name as ncu prints it (long names end in ``...``)."""
    launch: int | None
    """ncu's running launch id, when printed."""
    percent: int = 0
    """Replay progress, 0 to 100."""
    passes: int | None = None
    """Replay passes, once the launch is done."""

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "launch": self.launch, "passes": self.passes}


def parse_profiling(line: str) -> ProfiledKernel | None:
    """The ``==PROF== Profiling`` line (complete or still growing) as a record, else None."""
    match = PROFILING_RE.search(line)
    if not match:
        return None
    percents = PERCENT_RE.findall(match["progress"] or "")
    passes = match["passes"]
    return ProfiledKernel(
        kernel=match["kernel"],
        launch=int(match["launch"]) if match["launch"] else None,
        percent=int(percents[-1]) if percents else 0,
        passes=int(passes) if passes else None,
    )


@dataclass
class NcuLog:
    """What one ncu run printed, line by line."""

    kernels: list[ProfiledKernel] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    program: list[str] = field(default_factory=list)
    """The profiled program's own lines (the launcher's one-line errors land here)."""

    def add_line(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if not line.strip():
            return
        profiled = parse_profiling(line)
        if profiled is not None:
            self.kernels.append(profiled)
            # a program line can follow "100%" without a newline
            tail = line[PROFILING_RE.search(line).end() :].strip()
            if tail:
                self.program.append(tail)
        elif self.kernels and self.kernels[-1].passes is None and CONTINUATION_RE.match(line.strip()):
            last = self.kernels[-1]
            last.passes = int(CONTINUATION_RE.match(line.strip())["passes"])
            last.percent = 100
        elif line.startswith("==ERROR=="):
            self.errors.append(line)
        elif line.startswith("==WARNING=="):
            self.warnings.append(line)
        elif not line.startswith("==PROF=="):
            self.program.append(line)

    @property
    def replay_passes(self) -> int | None:
        """The most replay passes any profiled kernel needed (None if none was parsed)."""
        passes = [k.passes for k in self.kernels if k.passes is not None]
        return max(passes) if passes else None

    @property
    def app_exit_code(self) -> int | None:
        for line in self.errors:
            match = APP_EXIT_RE.search(line)
            if match:
                return int(match[1])
        return None

    def text(self) -> str:
        return "\n".join(self.errors + self.warnings + self.program)


def _quote(lines: list[str], limit: int = 6) -> str:
    shown = lines[-limit:]
    return " | ".join(s.strip() for s in shown)


def diagnose(log: NcuLog, returncode: int, log_path, report_written: bool) -> Exception | None:
    """The error to raise for a finished ncu run, or None when it profiled something.

    Permission and no-GPU problems get a line saying what to do; a launcher that
    failed verification under ncu gives ``VerificationError``; anything else quotes
    ncu's ``==ERROR==`` lines (and the program's last lines) plus the log path.
    """
    where = f"(ncu log: {log_path})"
    everything = log.text().lower()
    if any(marker in everything for marker in PERMISSION_MARKERS):
        return UserError(f"{PERMISSION_HELP} {where}")
    if any(marker in everything for marker in NO_DEVICE_MARKERS):
        return UserError(
            "no usable CUDA GPU: ncu or the launcher found no device or driver; run on a "
            f"machine with an NVIDIA GPU (check nvidia-smi) {where}"
        )
    app_code = log.app_exit_code
    if app_code == 1:
        detail = _quote(log.program, 2) or "the launcher's check failed"
        return VerificationError(f"verification failed under ncu: {detail} {where}")
    if returncode != 0 or log.errors:
        quoted = _quote(log.errors) or f"ncu exited with status {returncode}"
        if app_code is not None and log.program:
            quoted += f" | program said: {_quote(log.program, 2)}"
        if "filter-mode" in everything:  # an ncu older than per-launch-config filtering
            quoted += (" | this ncu does not take --filter-mode: run --cmd again with "
                       "--profile-every-launch")
        return UserError(f"ncu failed: {quoted} {where}")
    if not log.kernels:
        return NothingProfiled(
            "ncu profiled no kernel: the NVTX range or kernel-name filter matched nothing "
            f"{where}"
        )
    if not report_written:
        return UserError(f"ncu finished but wrote no report {where}")
    return None
