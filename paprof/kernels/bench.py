"""``paprof bench``: CUDA-event timings of variants against the measured read ceiling.

For each variant: verify on fresh inputs, then time ``launches`` decode steps (inputs
rotated when the K/V bytes would fit in a few L2s), in ``rounds`` separate rounds so the
round-to-round spread shows the noise. The read ceiling is measured in the same process.
"""

from __future__ import annotations

import gc
import statistics
from dataclasses import dataclass, field

from paprof.errors import ShapeError
from paprof.kernels import gpu, harness
from paprof.kernels.problem import Shape


@dataclass
class BenchRow:
    """One variant's timing."""

    variant: str
    kernels: list[str] = field(default_factory=list)
    num_splits: int = 1
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

    shape: Shape
    gpu: str
    ceiling_tbs: float
    launches: int
    input_sets: int
    rows: list[BenchRow]

    def row_dict(self, row: BenchRow) -> dict:
        med = row.median_us
        tbs = self.shape.kv_bytes / med / 1e6 if med else None
        return {
            "variant": row.variant,
            "kernels": row.kernels,
            "num_splits": row.num_splits,
            "median_us": med,
            "round_medians_us": row.medians_us,
            "round_spread_pct": row.spread_pct,
            "tbs": tbs,
            "pct_of_ceiling": 100.0 * tbs / self.ceiling_tbs if tbs else None,
            "rel_error": row.rel_error,
            "passed": row.passed,
            "skipped": row.skipped,
        }

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "shape": self.shape.spec(),
            "shape_slug": self.shape.slug(),
            "kv_bytes": self.shape.kv_bytes,
            "read_ceiling_tbs": self.ceiling_tbs,
            "launches": self.launches,
            "input_sets": self.input_sets,
            "rows": [self.row_dict(r) for r in self.rows],
        }


def run_bench(variants, shape: Shape, launches: int = 100, rounds: int = 2, seed=None,
              progress=None) -> BenchResult:
    """Verify and time ``variants`` on ``shape``; ``progress(text)`` is told each step."""
    cp = gpu.cupy()
    device = gpu.current_device()
    say = progress or (lambda text: None)
    say("measuring the read ceiling")
    ceiling = harness.measure_read_ceiling()["tbs"]
    sets = harness.input_sets_for(shape, device.l2_bytes)
    rows: dict[str, BenchRow] = {}
    for v in variants:
        row = rows.setdefault(v.id, BenchRow(v.id))
        try:
            v.check(shape)
        except ShapeError as err:
            row.skipped = str(err)
    for rnd in range(rounds):
        for v in variants:
            row = rows[v.id]
            if row.skipped or row.passed is False:
                continue
            say(f"round {rnd + 1}/{rounds}: {v.id}")
            prep = harness.prepare(v, shape, seed=seed, input_sets=sets)
            if rnd == 0:
                check = harness.verify(prep)
                row.rel_error, row.passed = check.rel_error, check.passed
                row.kernels = [k.name for k in prep.launcher.kernels]
                row.num_splits = prep.launcher.num_splits
                if not check.passed:
                    continue
            row.medians_us.append(statistics.median(harness.time_steps(prep, launches)))
            del prep
            gc.collect()
            cp.get_default_memory_pool().free_all_blocks()
    return BenchResult(shape, device.name, ceiling, launches, sets, [rows[v.id] for v in variants])
