"""``paprof bench``: CUDA-event timings of variants against the measured read ceiling.

For each variant: verify on fresh inputs, then time ``launches`` steps (inputs rotated
when the bytes they read would fit in a few L2s), in ``rounds`` separate rounds so the
round-to-round spread shows the noise. The read ceiling is measured in the same process.
Throughput comes from the family's work model: its bytes (TB/s, % of the read ceiling)
and its FLOPs (TFLOP/s) over the median time.
"""

from __future__ import annotations

import gc
import statistics
from dataclasses import dataclass, field

from paprof.errors import ShapeError
from paprof.family import Family, Work, throughput
from paprof.kernels import gpu, harness


@dataclass
class BenchRow:
    """One variant's timing."""

    variant: str
    kind: str = ""
    kernels: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    medians_us: list[float] = field(default_factory=list)
    rel_error: float | None = None
    passed: bool | None = None
    skipped: str | None = None

    @property
    def median_us(self) -> float | None:
        return statistics.median(self.medians_us) if self.medians_us else None

    @property
    def spread_pct(self) -> float | None:
        if len(self.medians_us) < 2:
            return None
        return 100.0 * (max(self.medians_us) - min(self.medians_us)) / statistics.median(self.medians_us)


@dataclass
class BenchResult:
    """All rows of one bench run, with the ceiling measured in it."""

    family: str
    params: object
    work: Work
    gpu: str
    ceiling_tbs: float
    launches: int
    input_sets: int
    rows: list[BenchRow]

    def row_dict(self, row: BenchRow) -> dict:
        med = row.median_us
        rates = throughput(self.work, med)
        tbs = rates["tbs"]
        return {
            "variant": row.variant,
            "kind": row.kind,
            "kernels": row.kernels,
            "details": row.details,
            "median_us": med,
            "round_medians_us": row.medians_us,
            "round_spread_pct": row.spread_pct,
            "tbs": tbs,
            "tflops": rates["tflops"],
            "pct_of_ceiling": 100.0 * tbs / self.ceiling_tbs if tbs else None,
            "rel_error": row.rel_error,
            "passed": row.passed,
            "skipped": row.skipped,
        }

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "family": self.family,
            "shape": self.params.spec(),
            "shape_slug": self.params.slug(),
            "params": self.params.to_dict(),
            "work": self.work.to_dict(),
            "read_ceiling_tbs": self.ceiling_tbs,
            "launches": self.launches,
            "input_sets": self.input_sets,
            "rows": [self.row_dict(r) for r in self.rows],
        }


def run_bench(family: Family, variants, params, launches: int = 100, rounds: int = 2, seed=None,
              progress=None) -> BenchResult:
    """Verify and time ``variants`` of ``family`` at ``params``; ``progress(text)`` is told
    each step."""
    cp = gpu.cupy()
    device = gpu.current_device()
    say = progress or (lambda text: None)
    say("measuring the read ceiling")
    ceiling = harness.measure_read_ceiling()["tbs"]
    work = family.work(params)
    sets = harness.input_sets_for(work.bytes, device.l2_bytes)
    rows: dict[str, BenchRow] = {}
    for v in variants:
        row = rows.setdefault(v.id, BenchRow(v.id, v.kind))
        try:
            v.check(params)
        except ShapeError as err:
            row.skipped = str(err)
    for rnd in range(rounds):
        for v in variants:
            row = rows[v.id]
            if row.skipped or row.passed is False:
                continue
            say(f"round {rnd + 1}/{rounds}: {v.id}")
            try:
                prep = harness.prepare(family, v, params, seed=seed, input_sets=sets)
            except ShapeError as err:  # found only when built (a library's plan refused it)
                row.skipped = str(err)
                continue
            if rnd == 0:
                check = harness.verify(prep)
                row.rel_error, row.passed = check.rel_error, check.passed
                row.kernels = [k.name for k in prep.launcher.kernels]
                row.details = dict(prep.launcher.details)
                if not check.passed:
                    continue
            row.medians_us.append(statistics.median(harness.time_steps(prep, launches)))
            del prep
            gc.collect()
            cp.get_default_memory_pool().free_all_blocks()
    return BenchResult(family.name, params, work, device.name, ceiling, launches, sets,
                       [rows[v.id] for v in variants])
