"""``paprof bench``: CUDA-event timings of variants against the measured ceilings.

For each variant: verify on fresh inputs, then time ``launches`` steps (inputs rotated
when the bytes they read would fit in a few L2s), in ``rounds`` separate rounds so the
round-to-round spread shows the noise. The read ceiling is measured in the same process,
and for a family held to the GEMM ceiling (``Family.ceiling == "gemm"``, tensor-core
work) a cuBLAS GEMM's FLOP rate too. Throughput comes from the family's work model: its
bytes (TB/s, % of the read ceiling) and its FLOPs (TFLOP/s, % of the GEMM ceiling) over
the median time. A variant that turns the shape down when it is built or first run
(``ShapeError``) is skipped with its reason, like one whose ``accepts`` refuses.
"""

from __future__ import annotations

import gc
import statistics
import sys
from dataclasses import dataclass, field

from paprof.errors import ShapeError
from paprof.family import Family, Work, checked_work, throughput
from paprof.measure.kernels import gpu, harness


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
    words: dict = field(default_factory=dict)
    """The launcher's choices in the family's words (``Launcher.words``; ``{}`` without)."""

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
    ceiling: str = "read"
    """The family's ceiling (``Family.ceiling``)."""
    gemm_ceiling: dict | None = None
    """``harness.measure_gemm_ceiling``'s result when this work is held to it."""

    @property
    def gemm_ceiling_tflops(self) -> float | None:
        return self.gemm_ceiling["tflops"] if self.gemm_ceiling else None

    def row_dict(self, row: BenchRow) -> dict:
        med = row.median_us
        rates = throughput(self.work, med)
        tbs = rates["tbs"]
        return {
            "variant": row.variant,
            "kind": row.kind,
            "kernels": row.kernels,
            "details": row.details,
            "launch_words": row.words,
            "median_us": med,
            "round_medians_us": row.medians_us,
            "round_spread_pct": row.spread_pct,
            "tbs": tbs,
            "tflops": rates["tflops"],
            "pct_of_ceiling": 100.0 * tbs / self.ceiling_tbs if tbs else None,
            "pct_of_gemm_ceiling": (100.0 * rates["tflops"] / self.gemm_ceiling_tflops
                                    if rates["tflops"] and self.gemm_ceiling_tflops else None),
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
            "ceiling": self.ceiling,
            "gemm_ceiling_tflops": self.gemm_ceiling_tflops,
            "gemm_ceiling": self.gemm_ceiling,
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
    work = checked_work(family, params)
    gemm = None
    if family.holds_to_gemm(work):
        say("measuring the GEMM ceiling")
        gemm = harness.measure_gemm_ceiling()
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
                if rnd == 0:
                    check = harness.verify(prep)
            except ShapeError as err:  # turned down when built or first run
                row.skipped = str(err)
                continue
            if rnd == 0:
                row.rel_error, row.passed = check.rel_error, check.passed
                row.kernels = [k.name for k in prep.launcher.kernels]
                row.details = dict(prep.launcher.details)
                row.words = prep.launcher.words() or {}
                if not check.passed:
                    continue
            row.medians_us.append(statistics.median(harness.time_steps(prep, launches)))
            del prep
            gc.collect()
            cp.get_default_memory_pool().free_all_blocks()
            torch = sys.modules.get("torch")  # a callable's framework keeps a cache of its own
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
    return BenchResult(family.name, params, work, device.name, ceiling, launches, sets,
                       [rows[v.id] for v in variants], family.ceiling, gemm)
