"""Fakes for the sweep tests: a point runner that writes synthetic bench records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from paprof.profiler import store
from paprof.sweep import results
from paprof.sweep.run import VariantOutcome

GPU = "NVIDIA H200"


def record(family: str, variant: str, params, median_us: float, gpu: str = GPU, **extra) -> dict:
    """A bench record as ``bench_point`` writes it, with made-up numbers."""
    work = {"bytes": 2 * params.batch * params.context * 8 * 128 * 2, "flops": 0, "flop_kind": "fp32"}
    tbs = work["bytes"] / median_us / 1e6
    data = {
        "kind": results.BENCH_KIND, "schema": results.BENCH_SCHEMA, "family": family,
        "variant": variant, "shape": params.spec(), "shape_slug": params.slug(),
        "params": params.to_dict(), "work": work, "gpu": gpu, "gpu_slug": store.slug(gpu),
        "driver": "580.159.04", "read_ceiling_tbs": 4.5, "launches": 100, "rounds": 2,
        "median_us": median_us, "tbs": tbs, "tflops": None, "pct_of_ceiling": 100 * tbs / 4.5,
        "passed": True, "rel_error": 1e-4, "git_commit": "abc1234", "paprof_version": "0.1.0",
        "created": "2026-12-01T10:00:00+00:00",
    }
    data.update(extra)
    return data


def write_record(runs: Path, data: dict) -> Path:
    path = results.bench_path(runs, data["gpu_slug"], data["family"], data["variant"], data["shape_slug"])
    store.write_json_atomic(path, data)
    return path


def v5_v6_times(variant: str, params) -> float:
    """v6 is 3x faster than v5 below batch 16, the same from batch 16 on (both ~ bytes)."""
    base = params.batch * params.context / 1000.0
    if variant == "v6" and params.batch < 16:
        return base / 3
    return base * (1.005 if variant == "v6" else 1.0)


@dataclass
class FakeRunner:
    """A ``PointRunner``: records each call, writes a record per variant; ``interrupt_at``
    (1-based call number) raises KeyboardInterrupt there; ``fail`` names variants that
    fail verification."""

    times: Callable = v5_v6_times
    interrupt_at: int | None = None
    fail: tuple = ()
    gpu: str = GPU
    calls: list = field(default_factory=list)

    def __call__(self, family, variants, params, runs, settings, say):
        self.calls.append((params.slug(), [v.id for v in variants]))
        say("timing")
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        out = []
        for v in variants:
            if v.id in self.fail:
                out.append(VariantOutcome(v.id, "failed", "relative error 3e-01 is over the tolerance"))
                continue
            path = write_record(Path(runs), record(family.name, v.id, params, self.times(v.id, params),
                                                   gpu=self.gpu))
            out.append(VariantOutcome(v.id, "done", result=path, summary="ok"))
        return out
