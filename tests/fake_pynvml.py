"""A stand-in for ``pynvml`` (nvidia-ml-py) for tests without a GPU: put ``FakeNvml(...)``
into ``sys.modules["pynvml"]``. It answers the calls ``paprof.profiler.environment``
makes, with the clock event reasons and processes the test gives."""

from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class FakeNvml:
    NVMLError = NVMLError
    __version__ = "12.0.0-fake"

    def __init__(self, reasons: int = 0, processes=(), sm_clock: int = 1980,
                 fail_init: bool = False, own_pid: int | None = None):
        self.reasons = reasons
        self.processes = [SimpleNamespace(pid=p, usedGpuMemory=512 << 20) for p in processes]
        if own_pid is not None:
            self.processes.append(SimpleNamespace(pid=own_pid, usedGpuMemory=None))
        self.sm_clock = sm_clock
        self.fail_init = fail_init
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.fail_init:
            raise NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return ("gpu", uuid)

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return self.sm_clock if kind == 1 else 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 71

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return list(self.processes)
