"""The gate's GPU side: profile a baseline's variants again, now, at their shapes.

``paprof check --profile`` calls these; they join the profiler (which runs ncu) and the
model and the gate (which load and judge), so they live above both: ``paprof.model`` itself
never imports the GPU side of the profiler.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from paprof import registry
from paprof import gate
from paprof.errors import UserError
from paprof.measure.argv import NcuSettings
from paprof.measure.profile import profile_variants
from paprof.gate import calibration


def profile_current(baseline: gate.Baseline, launches: int = 1, runs=None,
                    time_launches: int | None = None, ceiling: bool = True):
    """Profile the baseline's variants at its shapes now, with its preset and clock
    control, ``launches`` launches each; their per-launch table (as ``load_table``).

    The verification run before ncu times ``time_launches`` launches with CUDA events
    (default: as ``paprof run``; the samples of ``duration_us_event``) and, with
    ``ceiling``, measures the read ceiling in the same call (the ``*_pct_of_ceiling``
    metrics are shares of it).

    The runs go to ``runs`` (replacing runs of the same variant, shape and GPU there) or
    to a temporary folder. A variant that fails verification raises
    ``VerificationError`` (exit 1); one that cannot take its shape, ``ShapeError``.
    Needs the GPU and ncu.
    """
    groups: dict[tuple, list[gate.Entry]] = {}
    for e in baseline.entries:
        if e.family == registry.COMMAND_FAMILY:
            raise UserError(
                f"cannot profile {e.name} again: it is an external command; run it with "
                "paprof run --cmd ... --force, then check without --profile")
        if not e.shape or not e.family:
            raise UserError(
                f"cannot profile {e.name}: the baseline does not say its family and shape "
                "(it was made from reports without a paprof sidecar)"
            )
        prov = e.provenance
        groups.setdefault((e.shape, prov.preset or "default", prov.clock_control or "none"),
                          []).append(e)
    with tempfile.TemporaryDirectory(prefix="paprof-check-") as scratch:
        runs_dir = Path(runs) if runs is not None else Path(scratch)
        reports = []
        for (shape, preset, clocks), entries in groups.items():
            settings = NcuSettings(preset=preset, clock_control=clocks, launches=launches,
                                   measure_ceiling=ceiling)
            if time_launches:
                settings = dataclasses.replace(settings, time_launches=time_launches)
            variants = [registry.get(e.variant, e.family) for e in entries]
            family = registry.family_of(variants[0])
            for outcome in profile_variants(
                variants, family.parse(shape), settings, runs_dir, replace=True, family=family
            ):
                if outcome.failed or outcome.skipped:
                    raise outcome.failed or outcome.skipped
                reports.append(outcome.run.report)
        return gate.load_table(reports)


def remeasure_by_profiling(launches: int = 1, time_launches: int | None = None,
                           ceiling: bool = True):
    """``remeasure(entry) -> Entry`` for ``compare_to_baseline``: profile that entry's
    variant again at its shape (a fresh process: fresh samples of every metric)."""

    def remeasure(entry: gate.Entry) -> gate.Entry:
        table = profile_current(gate.Baseline([entry]), launches=launches,
                                time_launches=time_launches, ceiling=ceiling)
        return gate.measure(table, list(entry.metrics), missing_ok=True)[0]

    return remeasure


def aa_repeats(family: str, variants, shape: str, repeats: int, metrics,
               time_launches: int | None = None) -> dict[tuple, list]:
    """A/A: profile each of ``variants`` (ids of ``family``) at ``shape`` ``repeats`` times,
    each time in a fresh process; ``{(gpu, family, variant, shape): [Entry per run]}`` for
    ``paprof.gate.calibration.from_repeats``. Needs the GPU and ncu."""
    fam = registry.family(family)
    spec = fam.parse(shape).spec()
    entries = [gate.Entry(family, v, spec, {}) for v in variants]
    out: dict[tuple, list] = {}
    for _ in range(repeats):
        table = profile_current(gate.Baseline(entries), time_launches=time_launches)
        for key, found in calibration.repeats_from_table(table, metrics).items():
            out.setdefault(key, []).extend(found)
    return out
