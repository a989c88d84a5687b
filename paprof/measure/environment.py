"""The GPU's state while a variant is timed, read through NVML (``nvidia-ml-py``).

A timing taken while the GPU slowed its clocks (thermal or power limits) or while another
process used the GPU is not a measurement of the code alone. ``Watch`` samples, through
NVML, the SM and memory clocks, the clock event ("throttle") reasons and the temperature
before the timed work, every ``INTERVAL_S`` during it (a thread) and after it, and the
compute processes on the GPU before it (and after it, when the timed work ran in a child
process that has ended by then). ``Watch.record`` is the sidecar's ``environment``
(docs/CONTRACTS.md); ``paprof.gate.environment`` reads it.

Without NVML (no ``nvidia-ml-py``, no driver, no GPU) the record says it was not
observed and why; nothing fails.
"""

from __future__ import annotations

import os
import threading
import time

KEY = "environment"
"""The sidecar key of the record."""

INTERVAL_S = 0.05
"""Seconds between two samples while the work runs."""

DISTURBING = {
    0x0000000000000004: "SW power cap",
    0x0000000000000008: "HW slowdown",
    0x0000000000000020: "SW thermal slowdown",
    0x0000000000000040: "HW thermal slowdown",
    0x0000000000000080: "HW power brake",
}
"""NVML clock event reasons that slow a kernel down (``nvmlClocksEventReason*``, the same
bits as the older ``nvmlClocksThrottleReason*``). Idle, application clocks, sync boost and
display clocks are not among them."""

_CLOCK_SM, _CLOCK_MEM = 1, 2  # NVML_CLOCK_SM, NVML_CLOCK_MEM


def _nvml():
    """The ``pynvml`` module (from ``nvidia-ml-py``), or the reason there is none."""
    try:
        import pynvml  # noqa: PLC0415 (optional, lazy)
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'paprof[nvml]')"
    return pynvml, None


def _device_index() -> int | str:
    """The GPU CUDA calls device 0: the first of ``CUDA_VISIBLE_DEVICES`` (an index or a
    UUID), else 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.isdigit():
        return int(first)
    return first if first.startswith(("GPU-", "MIG-")) else 0


def _reasons(nvml, handle) -> int:
    read = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
    return int(read(handle))


class Watch:
    """``with Watch() as w: <timed work>``; then ``w.record`` (``stop()`` ends it early).

    ``in_process``: the timed work runs in this process (``paprof bench``), so after it
    this process holds a CUDA context of its own: the processes are read before the work
    only. Otherwise (a child process, ended by the end of the block) before and after."""

    def __init__(self, in_process: bool = False, interval: float = INTERVAL_S):
        self.in_process = in_process
        self.interval = interval
        self.record: dict = {"observed": False, "why": "not started"}
        self._samples: list[dict] = []
        self._processes: dict[int, int | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = self._handle = None

    # -- sampling ------------------------------------------------------------------------
    def _sample(self) -> None:
        nvml, h = self._nvml, self._handle
        try:
            sample = {"sm": nvml.nvmlDeviceGetClockInfo(h, _CLOCK_SM),
                      "mem": nvml.nvmlDeviceGetClockInfo(h, _CLOCK_MEM),
                      "reasons": _reasons(nvml, h)}
            try:
                sample["temp"] = nvml.nvmlDeviceGetTemperature(h, 0)  # NVML_TEMPERATURE_GPU
            except nvml.NVMLError:
                pass
        except nvml.NVMLError:
            return
        self._samples.append(sample)

    def _read_processes(self) -> None:
        nvml, own = self._nvml, os.getpid()
        try:
            found = nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except nvml.NVMLError:
            return
        for p in found:
            pid = int(getattr(p, "pid", 0))
            if pid and pid != own:
                used = getattr(p, "usedGpuMemory", None)
                self._processes[pid] = int(used) if isinstance(used, int) else None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    # -- the block -------------------------------------------------------------------------
    def __enter__(self) -> "Watch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Watch":
        nvml, why = _nvml()
        if nvml is None:
            self.record = {"observed": False, "why": why}
            return self
        try:
            nvml.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.record = {"observed": False, "why": f"NVML could not start: {err}"}
            return self
        index = _device_index()
        try:
            self._handle = (nvml.nvmlDeviceGetHandleByUUID(index) if isinstance(index, str)
                            else nvml.nvmlDeviceGetHandleByIndex(index))
        except nvml.NVMLError as err:
            nvml.nvmlShutdown()
            self.record = {"observed": False, "why": f"NVML has no GPU {index}: {err}"}
            return self
        self._nvml = nvml
        self._read_processes()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="paprof-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the watch (again: nothing); ``record`` is then complete."""
        if self._nvml is None or self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        if not self.in_process:
            self._read_processes()
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass
        self.record = self._summary()

    def _summary(self) -> dict:
        samples = self._samples
        if not samples:
            return {"observed": False, "why": "NVML answered no clock query"}
        seen = 0
        for s in samples:
            seen |= s["reasons"]
        throttled = [name for bit, name in DISTURBING.items() if seen & bit]
        temps = [s["temp"] for s in samples if "temp" in s]
        others = [{"pid": pid, "used_memory_bytes": used}
                  for pid, used in sorted(self._processes.items())]
        version = getattr(self._nvml, "__version__", None)
        return {
            "observed": True,
            "source": "NVML" + (f" (nvidia-ml-py {version})" if version else ""),
            "samples": len(samples),
            "interval_s": self.interval,
            "sm_clock_mhz": {"min": min(s["sm"] for s in samples),
                             "max": max(s["sm"] for s in samples)},
            "memory_clock_mhz": {"min": min(s["mem"] for s in samples),
                                 "max": max(s["mem"] for s in samples)},
            "temperature_c_max": max(temps) if temps else None,
            "clock_event_reasons": f"0x{seen:x}",
            "throttled": throttled,
            "other_processes": others,
            "processes_read": "before" if self.in_process else "before and after",
            "disturbed": describe(throttled, others),
            "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }


def describe(throttled: list[str], others: list[dict]) -> str | None:
    """``throttled (SW power cap); 1 other process on the GPU (pid 4242)``, or None."""
    parts = []
    if throttled:
        parts.append(f"throttled ({', '.join(throttled)})")
    if others:
        pids = ", ".join(str(p["pid"]) for p in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        n = len(others)
        parts.append(f"{n} other process{'es' if n > 1 else ''} on the GPU (pid {pids}{more})")
    return "; ".join(parts) or None
