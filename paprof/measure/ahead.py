"""What ``paprof run`` of several variants pays once, ahead of the ncu sessions.

- ``check_all``: one launcher process (``paprof.measure.kernels.batch``) checks and times every
  variant of the shape: Python, the CUDA context, the random inputs and the float64
  reference are paid once, not once a variant (``Checked``);
- ``HashesAhead``: the nvcc builds behind each variant's SASS hash (``paprof.measure.sass_hash``)
  start at once, in a thread pool, for the family's target, while the GPU checks, times and
  profiles; a run on a GPU of another target hashes again for it;
- ``NcuClock``: the phases of one ncu session read off its ``==PROF==`` lines as they
  arrive: its start (up to the first profiled kernel), the replay passes, its end.

Each records its phases (``paprof.phases``) for the run record.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from paprof import phases as ph
from paprof.errors import ShapeError, UserError, VerificationError
from paprof.family import Variant
from paprof.measure import sass_hash

BATCH_MODULE = "paprof.measure.kernels.batch"


def batch_argv(settings, variants: Sequence[Variant], params, result: Path | str) -> list[str]:
    """``python -m paprof.measure.kernels.batch ...``: check and time ``variants`` (one family, one
    shape) in one process, as ``argv.verify_argv`` does one."""
    argv = [settings.python, "-m", BATCH_MODULE,
            "--variants", ",".join(v.id for v in variants),
            "--family", variants[0].family,
            "--shape", params.spec(),
            "--result", str(result),
            "--time", str(settings.time_launches)]  # fmt: skip
    if settings.seed is not None:
        argv += ["--seed", str(settings.seed)]
    if settings.measure_ceiling:
        argv.append("--ceiling")
    if settings.measure_gemm_ceiling:
        argv.append("--gemm-ceiling")
    return argv


@dataclass
class Checked:
    """The batch's outcome: each variant's result (as the launcher alone writes it) and the
    phases every variant shared."""

    results: dict[str, dict]
    shared: list[ph.Phase] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    """What the batch measured once for all (the ceilings), merged into each result."""
    environment: dict = field(default_factory=dict)
    """What the GPU did while the batch checked and timed (``environment.Watch``)."""

    def result(self, variant: Variant) -> tuple[dict, list[ph.Phase]]:
        """``variant``'s result and phases (the shared ones first); raises what
        ``profile.verify`` raises for it alone."""
        data = self.results.get(variant.id)
        if data is None:
            raise UserError(f"the batch launcher wrote no result for {variant.name}")
        if data.get("skipped"):
            raise ShapeError(str(data["skipped"]))
        if data.get("error"):
            raise UserError(f"the launcher for {variant.name} failed: {data['error']}")
        check = data.get("check") or {}
        if check.get("passed") is False:
            raise VerificationError(
                f"{variant.name} failed verification: rel_error={check.get('rel_error')} "
                f"max_abs_error={check.get('max_abs_error')} (tolerance {check.get('tolerance')})")
        own = list(ph.parse(data.get("phases"), "the batch result"))
        return {**self.extra, **data}, self.shared + own


def check_all(variants: Sequence[Variant], params, settings, env: dict,
              run_launcher: Callable) -> Checked:
    """Check and time ``variants`` in one launcher process (``run_launcher(argv, env)``,
    the profiler's GPU step). An environment failure of the whole batch is a
    ``UserError``; a variant's own failure waits in its result (``Checked.result``)."""
    with tempfile.TemporaryDirectory(prefix="paprof-verify-") as scratch:
        result = Path(scratch) / "batch.json"
        t0 = time.perf_counter()
        outcome = run_launcher(batch_argv(settings, variants, params, result), env)
        wall = time.perf_counter() - t0
        said = [s.strip() for s in outcome.output.splitlines() if s.strip()]
        if outcome.returncode != 0:
            raise UserError(f"the launcher for {', '.join(v.name for v in variants)} failed "
                            f"(exit {outcome.returncode}): {said[-1] if said else 'no message'}")
        try:
            data = json.loads(result.read_text())
        except (OSError, ValueError) as err:
            raise UserError(f"the batch launcher wrote no readable result ({result}): {err}") from None
    results = data.get("variants") if isinstance(data, dict) else None
    if not isinstance(results, dict):
        raise UserError("the batch launcher's result names no variants")
    shared_phases = list(ph.parse(data.get("phases"), "the batch result"))
    inner = sum(p.seconds for p in shared_phases) + sum(
        p.seconds for r in results.values() if isinstance(r, dict)
        for p in ph.parse(r.get("phases"), "the batch result"))
    count = len(variants)
    shared = [ph.Phase(ph.START, max(0.0, wall - inner), shared=count)]
    shared += [ph.Phase(p.name, p.seconds, shared=count) for p in shared_phases]
    extra = {k: data[k] for k in ("read_ceiling_tbs", "read_ceiling", "gemm_ceiling_tflops",
                                  "gemm_ceiling") if k in data}
    return Checked(results, shared, extra)


def launcher_phases(result: dict, wall: float) -> list[ph.Phase]:
    """One variant's launcher run alone (``profile.verify``): its own phases, after its
    start (the wall time the phases do not account for)."""
    own = list(ph.parse(result.get("phases"), "the launcher's result"))
    return [ph.Phase(ph.START, max(0.0, wall - sum(p.seconds for p in own)))] + own


def hash_workers() -> int:
    """Threads for the nvcc builds: the cores but two (the launcher's and ncu's)."""
    return max(1, (os.cpu_count() or 2) - 2)


class HashesAhead:
    """Each CUDA variant's SASS hash (``sass_hash.hash_sass``), compiled ahead in a pool.

    ``get(variant, arch)`` waits for it and returns ``(hashed, phases)``: the build's time
    (overlapped: it ran beside the GPU's work) and the wait, if any, on the critical path;
    a GPU of another target than the one guessed is hashed again, there and then."""

    def __init__(self, variants: Sequence[Variant], params, arch: str | None,
                 workers: int | None = None):

        self._hash = sass_hash.hash_sass
        self.params, self.arch = params, arch
        self.pool = ThreadPoolExecutor(max_workers=workers or hash_workers(),
                                       thread_name_prefix="paprof-nvcc")
        self.futures: dict[str, Future] = {
            v.id: self.pool.submit(self._timed, v, arch) for v in variants}

    def _timed(self, variant, arch):
        t0 = time.perf_counter()
        hashed = self._hash(variant, self.params, arch)
        return hashed, time.perf_counter() - t0

    def get(self, variant: Variant, arch: str | None) -> tuple[dict, list[ph.Phase]]:
        future = self.futures.get(variant.id)
        if future is None or (arch and self.arch and arch != self.arch):
            if future is not None:
                future.cancel()
            hashed, took = self._timed(variant, arch or self.arch)
            return hashed, [ph.Phase(ph.HASH, took)]
        t0 = time.perf_counter()
        hashed, took = future.result()
        waited = time.perf_counter() - t0
        return hashed, [ph.Phase(ph.HASH, took, overlapped=True)] + (
            [ph.Phase(ph.HASH + " wait", waited)] if waited >= 0.01 else [])

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class NcuClock:
    """Wraps the ncu progress callback: when the first kernel's replay began, when the
    last one's passes were printed; ``phases(kernels)`` once ncu has exited."""

    def __init__(self, inner: Callable | None = None,
                 names: tuple[str, str, str] = (ph.NCU_START, ph.REPLAY, ph.NCU_END)):
        self.inner = inner
        self.names = names
        """The three phases' names: the start, the launches, the end."""
        self.start = time.perf_counter()
        self.first: float | None = None
        self.last: float | None = None

    def __call__(self, kernel) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        if kernel.passes is not None:
            self.last = now
        if self.inner is not None:
            self.inner(kernel)

    def phases(self, kernels: Sequence) -> list[ph.Phase]:
        end = time.perf_counter()
        first = self.first if self.first is not None else end
        last = self.last if self.last is not None and self.last >= first else end
        passes = [k.passes for k in kernels if getattr(k, "passes", None) is not None]
        start, replay, finish = self.names
        return [ph.Phase(start, first - self.start),
                ph.Phase(replay, last - first, passes=sum(passes) if passes else None,
                         kernels=len(kernels)),
                ph.Phase(finish, end - last)]
