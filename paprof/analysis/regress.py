"""The CI regression gate: the baseline file, the tolerances and the verdict.

A *baseline* holds, per kernel variant and problem shape, the median of a few metrics
(default: DRAM throughput %, duration, DRAM bytes), their spread and the provenance of
the runs they came from (GPU model, ncu version, clock control, sections). Checking
compares the latest runs against it, metric by metric:

- each metric has a direction (``GATE_RULES``: higher is better for throughput and
  bandwidth, lower for duration and DRAM bytes) and a default tolerance;
- a value is a **regression** when it is worse than the baseline by more than the larger
  of the tolerance and the measured spread (baseline spread + current spread, i.e. the
  two measured ranges no longer touch). Exactly at the allowed delta passes;
- better by more than the same allowance is reported as ``improved`` (it passes; the
  baseline is then stale and worth updating);
- a check that cannot fail is said so, not silently passed: for a kernel that barely
  uses DRAM (0.9 %) the default 3-point allowance puts the floor below zero (``>= -2.1 %``),
  which no measurement can cross. The tolerance is not scaled (a rescaled one would
  fail on noise); the result's allowance reads "cannot fail" and the verdict gets a note
  suggesting a relative tolerance or the duration gate instead;
- a baseline from another GPU model, ncu version, clock control or shape gives no
  verdict (``BaselineMismatch``, exit 2) unless mismatches are allowed.

Both sides are *measured* the same way (``measure``): one value per profiled launch of a
variant (the loader's ``variant_rows``, which sums split-KV kernels into one row per
launch), the latest report per (family, variant, shape), the median over its launches
and the half-range ``(max - min) / 2`` as spread (0 for a single launch).

The baseline file is JSON, ``{"kind": "paprof-baseline", "schema": 1, ...}``; see
``Baseline`` and ``docs/ci-gpu-runner.md``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

from paprof import __version__
from paprof.analysis import fmt
from paprof.analysis.metrics import BY_COLUMN
from paprof.errors import UserError

SCHEMA = 1
"""Version of the baseline file format this module writes and reads."""
KIND = "paprof-baseline"
"""The ``kind`` field that marks a JSON file as a paprof baseline."""

DEFAULT_METRICS = ("dram_throughput_pct", "duration_us", "dram_bytes")
"""Metrics a baseline records when none are named."""

_EDGE = 1e-12
"""Relative slack so that a value exactly at the allowed delta passes despite rounding."""


class BaselineMismatch(UserError):
    """The runs are not comparable with the baseline (GPU, ncu version, clocks, shape)."""


# ---------------------------------------------------------------------------------------
# Tolerances and the per-metric rules
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerance:
    """How far a metric may get worse before it counts as a regression.

    The allowance is the larger of ``absolute`` and ``relative * |baseline|``.
    """

    absolute: float = 0.0
    """In the metric's own unit (percentage points for a ``%`` metric)."""
    relative: float = 0.0
    """A fraction of the baseline value (0.05 = 5 %)."""

    def allowed(self, baseline: float) -> float:
        return max(self.absolute, self.relative * abs(baseline))

    def spec(self) -> str:
        """The ``--tolerance`` text of this tolerance (``3``, ``0.5%``), see ``parse_tolerance``."""
        if self.relative and not self.absolute:
            return f"{self.relative * 100:g}%"
        return f"{self.absolute:g}"

    def describe(self, unit: str) -> str:
        parts = []
        if self.absolute:
            parts.append(f"{fmt.sig(self.absolute, 4)} {'pts' if unit == '%' else unit}")
        if self.relative:
            parts.append(f"{fmt.sig(self.relative * 100, 4)} %")
        return " or ".join(parts) or "0"


@dataclass(frozen=True)
class GateRule:
    """What the gate knows about one metric column of the catalogue."""

    label: str
    """Words for people, e.g. ``DRAM throughput``."""
    higher_is_better: bool
    """Direction: True for throughput and bandwidth, False for time and bytes."""
    tolerance: Tolerance
    """Default tolerance (``Settings.tolerances`` overrides it)."""


GATE_RULES: dict[str, GateRule] = {
    # Percent of peak: an absolute allowance in percentage points. 3 pp is about 3.5 %
    # of a DRAM-bound kernel's ~85 %: well above launch-to-launch noise under ncu (which
    # flushes caches before each replay), well below a lost optimisation (v3 -> v2 ~25 pp).
    "dram_throughput_pct": GateRule("DRAM throughput", True, Tolerance(absolute=3.0)),
    # Bandwidth and time: relative. Time varies more than throughput % across processes
    # when clocks are not locked (--clock-control none), hence 5 %.
    "achieved_bandwidth_gbs": GateRule("achieved DRAM bandwidth", True, Tolerance(relative=0.03)),
    "duration_us": GateRule("duration", False, Tolerance(relative=0.05)),
    "elapsed_cycles": GateRule("elapsed cycles", False, Tolerance(relative=0.05)),
    # Deterministic counts: the same code on the same shape moves the same bytes.
    "dram_bytes": GateRule("DRAM bytes", False, Tolerance(relative=0.005)),
    # The family's work model over the duration: what a compute-bound family gates on.
    "work_tbs": GateRule("useful bandwidth (work model)", True, Tolerance(relative=0.05)),
    "work_tflops": GateRule("useful FLOP rate (work model)", True, Tolerance(relative=0.05)),
    "tensor_pipe_pct": GateRule("tensor-pipe utilisation", True, Tolerance(absolute=3.0)),
}
"""Direction and default tolerance per gateable metric, keyed by the catalogue's columns
(whose ``unit`` says what an absolute tolerance is in)."""


def unit(metric: str) -> str:
    """The catalogue's unit of ``metric`` (``%``, ``us``, ``byte``, ``GB/s``, ``cycle``)."""
    return BY_COLUMN[metric].unit


def rule(metric: str) -> GateRule:
    """The gate rule of ``metric``; a ``UserError`` naming the gateable ones otherwise."""
    try:
        return GATE_RULES[metric]
    except KeyError:
        raise UserError(
            f"cannot gate on {metric!r}: no direction declared for it; "
            f"gateable metrics: {', '.join(GATE_RULES)}"
        ) from None


def parse_tolerance(text: str) -> tuple[str, Tolerance]:
    """Parse ``--tolerance`` text into ``(metric, Tolerance)``.

    ``METRIC=VALUE`` sets one metric's tolerance, a bare ``VALUE`` every gated metric's
    (metric ``"*"``). ``VALUE`` is absolute in the metric's unit (percentage points for
    a ``%`` metric: ``dram_throughput_pct=2``) or, with a ``%`` suffix, relative to the
    baseline value (``duration_us=3%``).
    """
    metric, sep, value = text.partition("=")
    if not sep:
        metric, value = "*", text
    metric, value = metric.strip(), value.strip()
    if metric != "*":
        rule(metric)
    relative = value.endswith("%")
    try:
        number = float(value.rstrip("%").strip())
    except ValueError:
        raise UserError(
            f"tolerance {text!r} is not [METRIC=]NUMBER[%] (e.g. dram_throughput_pct=2, "
            "duration_us=5%)"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise UserError(f"tolerance {text!r} must be a non-negative number")
    tol = Tolerance(relative=number / 100) if relative else Tolerance(absolute=number)
    return metric, tol


@dataclass
class Settings:
    """How ``compare_to_baseline`` judges the current runs."""

    metrics: tuple[str, ...] | None = None
    """Metric columns to gate; None gates every metric the baseline holds."""
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    """Tolerance overrides by metric column; key ``"*"`` applies to every gated metric
    not named itself. Metrics not given here use ``GATE_RULES[metric].tolerance``."""
    allow_mismatch: bool = False
    """Compare anyway when GPU model, ncu version, clock control or shape differ
    (each difference becomes a note in the verdict) instead of refusing with exit 2."""

    def tolerance(self, metric: str) -> Tolerance:
        return self.tolerances.get(metric) or self.tolerances.get("*") or rule(metric).tolerance


# ---------------------------------------------------------------------------------------
# The baseline file
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """One metric of one (variant, shape): the median over launches and its spread."""

    value: float
    """Median over the launches."""
    spread: float
    """Half-range ``(max - min) / 2`` over the launches; 0 for one launch."""
    n: int
    """Number of launches measured."""

    @classmethod
    def of(cls, values: Iterable[float]) -> "Stat":
        vals = [float(v) for v in values]
        return cls(statistics.median(vals), (max(vals) - min(vals)) / 2, len(vals))


@dataclass(frozen=True)
class Provenance:
    """Where a measurement came from (the run store's sidecar, where there is one).

    None means unknown (a report without a sidecar); unknown fields are not compared.
    """

    gpu: str | None = None
    ncu_version: str | None = None
    clock_control: str | None = None
    sections: tuple[str, ...] | None = None
    preset: str | None = None
    driver: str | None = None
    git_commit: str | None = None
    report: str | None = None
    created: str | None = None


@dataclass(frozen=True)
class Entry:
    """One (family, variant, shape) with its metric stats: a baseline entry, or the
    current measurement it is compared with."""

    family: str
    variant: str
    shape: str
    metrics: dict[str, Stat]
    provenance: Provenance = Provenance()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.family, self.variant, self.shape)

    @property
    def name(self) -> str:
        """``family/variant`` (just ``variant`` when the family is unknown)."""
        return f"{self.family}/{self.variant}" if self.family else self.variant


@dataclass
class Baseline:
    """The versioned baseline file: ``{"kind": "paprof-baseline", "schema": 1, ...}``."""

    entries: list[Entry]
    created: str = ""
    paprof_version: str = __version__
    schema: int = SCHEMA

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "schema": self.schema,
            "created": self.created,
            "paprof_version": self.paprof_version,
            "spread": "half-range (max - min) / 2 over the launches of one report",
            "entries": [_entry_to_dict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "baseline") -> "Baseline":
        """Validate and parse; ``UserError`` for anything that is not a schema-1 baseline."""
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise UserError(f"{source} is not a paprof baseline (no \"kind\": \"{KIND}\")")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise UserError(
                f"{source} has baseline schema {schema!r}; this paprof reads schema {SCHEMA} "
                "(rebuild it with 'paprof baseline update --force')"
            )
        raw = data.get("entries")
        if not isinstance(raw, list) or not raw:
            raise UserError(f"{source} is corrupt: \"entries\" must be a non-empty list")
        entries, seen = [], set()
        for i, item in enumerate(raw):
            try:
                entry = _entry_from_dict(item)
            except (KeyError, TypeError, ValueError) as err:
                raise UserError(f"{source} is corrupt: entry {i}: {_why(err)}") from None
            if entry.key in seen:
                raise UserError(f"{source} is corrupt: {entry.name} at {entry.shape} twice")
            seen.add(entry.key)
            entries.append(entry)
        return cls(
            entries=entries,
            created=str(data.get("created", "")),
            paprof_version=str(data.get("paprof_version", "")),
            schema=SCHEMA,
        )


def _why(err: Exception) -> str:
    return f"missing field {err}" if isinstance(err, KeyError) else str(err)


def _entry_to_dict(e: Entry) -> dict:
    prov = {k: v for k, v in e.provenance.__dict__.items()}
    if prov["sections"] is not None:
        prov["sections"] = list(prov["sections"])
    return {
        "family": e.family,
        "variant": e.variant,
        "shape": e.shape,
        "metrics": {
            m: {"value": s.value, "spread": s.spread, "n": s.n} for m, s in e.metrics.items()
        },
        "provenance": prov,
    }


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


_NON_NEGATIVE_UNITS = ("%", "us", "byte", "GB/s", "cycle")
"""Units of quantities that cannot be negative (durations, bytes, rates, percentages)."""


def _possible(metric: str, value: float, what: str) -> float:
    """``value`` if a measurement of ``metric`` can have it; ``ValueError`` otherwise."""
    entry = BY_COLUMN.get(metric)
    unit = entry.unit if entry else None
    if value < 0 and (what == "spread" or unit in _NON_NEGATIVE_UNITS):
        raise ValueError(f"{metric}.{what} {value:g} is impossible: it cannot be negative")
    if unit == "%" and value > 100:
        raise ValueError(f"{metric}.{what} {value:g} is impossible: a percentage over 100")
    return value


def _entry_from_dict(d: object) -> Entry:
    if not isinstance(d, dict):
        raise TypeError("an entry must be an object")
    if not isinstance(d["variant"], str) or not d["variant"]:
        raise ValueError("'variant' must be a non-empty string")
    if not isinstance(d["shape"], str):  # empty for a report without a sidecar
        raise ValueError("'shape' must be a string")
    metrics = {}
    if not isinstance(d["metrics"], dict) or not d["metrics"]:
        raise ValueError("'metrics' must be a non-empty object")
    for m, s in d["metrics"].items():
        if not isinstance(s, dict):
            raise TypeError(f"metric {m!r} must be an object")
        n = s["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{m}.n must be a positive integer, got {n!r}")
        spread = _possible(m, _finite(s["spread"], f"{m}.spread"), "spread")
        metrics[m] = Stat(_possible(m, _finite(s["value"], f"{m}.value"), "value"), spread, n)
    prov = d.get("provenance") or {}
    if not isinstance(prov, dict):
        raise TypeError("'provenance' must be an object")
    known = Provenance.__dataclass_fields__
    kwargs = {k: v for k, v in prov.items() if k in known}
    if kwargs.get("sections") is not None:
        kwargs["sections"] = tuple(kwargs["sections"])
    family = str(d.get("family") or "")
    return Entry(family, d["variant"], d["shape"], metrics, Provenance(**kwargs))


def load_baseline(path: str | os.PathLike) -> Baseline:
    """Read a baseline file; ``UserError`` (exit 2) if missing, corrupt or another schema."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"baseline {path} does not exist (write one with 'paprof baseline update --out {path}')"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read baseline {path}: {err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"baseline {path} is corrupt: not JSON ({err})") from None
    return Baseline.from_dict(data, source=f"baseline {path}")


def save_baseline(baseline: Baseline, path: str | os.PathLike, force: bool = False,
                  inputs: Iterable = ()) -> Path:
    """Write ``baseline`` as JSON, atomically (``paprof.outputs``); refuse (``UserError``)
    to replace a file unless ``force``, and one of ``inputs`` (the reports read) always."""
    from paprof import outputs

    check_baseline_target(path, force, inputs)
    text = json.dumps(baseline.to_dict(), indent=2, allow_nan=False) + "\n"
    return outputs.write(path, text, parents=True)


def check_baseline_target(path: str | os.PathLike, force: bool = False,
                          inputs: Iterable = ()) -> None:
    """``UserError`` now when ``save_baseline(..., path, force)`` would refuse."""
    from paprof import outputs

    outputs.check_target(path, force=force, inputs=inputs, parents=True)


# ---------------------------------------------------------------------------------------
# Measuring a table of runs
# ---------------------------------------------------------------------------------------


def _text(value: object) -> str | None:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _sidecar(row) -> dict:
    side = row.get("sidecar") if hasattr(row, "get") else None
    return side if isinstance(side, dict) else {}


def _created(report: object, side: dict) -> float:
    """When a report was made: the sidecar's ``created``, else the file's mtime."""
    text = side.get("created")
    if text:
        try:
            stamp = datetime.fromisoformat(str(text))
        except ValueError:
            pass
        else:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
    try:
        return os.path.getmtime(str(report))
    except (OSError, TypeError):
        return 0.0


def _provenance(row) -> Provenance:
    side = _sidecar(row)
    sections = side.get("sections")
    return Provenance(
        gpu=_text(side.get("gpu")) or _text(row.get("gpu")),
        ncu_version=_text(side.get("ncu_version")) or _text(row.get("ncu_version")),
        clock_control=_text(side.get("clock_control")),
        sections=tuple(sections) if isinstance(sections, (list, tuple)) else None,
        preset=_text(side.get("preset")),
        driver=_text(side.get("driver")),
        git_commit=_text(side.get("git_commit")),
        report=_text(row.get("report_path")),
        created=_text(side.get("created")),
    )


def measure(table, metrics: Sequence[str] | None, missing_ok: bool = False) -> list[Entry]:
    """One ``Entry`` per (family, variant, shape) of ``table``.

    ``metrics`` None: each entry's family's own gate metrics (its sidecar's
    ``gate_metrics``, the family's hint), else ``DEFAULT_METRICS``.

    ``table`` has one row per profiled launch of a variant (``variant_rows``'s output):
    columns ``variant``, ``shape``, the metric columns and, where known, ``family``,
    ``gpu``, ``report_path`` and ``sidecar``. Only the latest report of each
    (family, variant, shape) counts (sidecar ``created``, else file mtime).

    A metric column that is absent or all-NaN for an entry is a ``UserError`` naming the
    section that would supply it, unless ``missing_ok`` (then the entry just lacks it).
    """
    for col in ("variant", "shape"):
        if col not in table.columns:
            raise UserError(f"the runs table has no {col!r} column; is this a paprof table?")
    if table.empty:
        raise UserError("no profiled kernels found in the runs")
    df = table.copy()
    df["family"] = df["family"].fillna("").astype(str) if "family" in df else ""
    if "report_path" not in df:
        df["report_path"] = None
    sections = getattr(table, "attrs", {}).get("missing", {}) or {}
    entries = []
    for (family, variant, shape), rows in df.groupby(
        ["family", "variant", "shape"], sort=False, dropna=False
    ):
        reports = rows.groupby("report_path", sort=False, dropna=False)
        latest = max(
            (group for _, group in reports),
            key=lambda g: _created(g.iloc[0]["report_path"], _sidecar(g.iloc[0])),
        )
        stats = {}
        hinted = (_sidecar(latest.iloc[0]) or {}).get("gate_metrics")
        chosen = metrics or [m for m in (hinted or DEFAULT_METRICS) if m in GATE_RULES]
        for metric in chosen:
            values = latest[metric].dropna() if metric in latest else []
            if len(values):
                stats[metric] = Stat.of(values)
            elif not missing_ok:
                name = f"{family}/{variant}" if family else str(variant)
                hint = f" (section {sections[metric]} supplies it)" if metric in sections else ""
                raise UserError(f"{name} at {shape}: the report has no {metric}{hint}")
        entries.append(
            Entry(str(family), str(variant), str(shape), stats, _provenance(latest.iloc[0]))
        )
    return entries


def make_baseline(
    source, metrics: Sequence[str] | None = None, variants: Sequence[str] | None = None
) -> Baseline:
    """A ``Baseline`` from a runs table (``variant_rows`` output) or report/runs paths.

    ``metrics`` None: each family's gate metrics (``measure``).

    ``variants`` keeps only those (``v3`` or ``paged_decode/v3``; ``all`` or None keeps
    every variant); a name matching nothing is a ``UserError``.
    """
    metrics = tuple(dict.fromkeys(metrics or ())) or None
    for metric in metrics or ():
        rule(metric)
    table = source if hasattr(source, "columns") else load_table(source, variants)
    entries = select_variants(measure(table, metrics), variants)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return Baseline(entries=entries, created=stamp)


def select_variants(entries: list[Entry], variants: Sequence[str] | None) -> list[Entry]:
    """Entries whose ``variant`` or ``family/variant`` is named; all for None or ``all``."""
    if not variants or "all" in variants:
        return entries
    chosen = [e for e in entries if e.variant in variants or e.name in variants]
    unknown = [v for v in variants if not any(v in (e.variant, e.name) for e in entries)]
    if unknown:
        have = ", ".join(sorted({e.name for e in entries}))
        raise UserError(f"no runs of {', '.join(unknown)}; the runs hold: {have}")
    return chosen


def load_table(paths, variants: Sequence[str] | None = None):
    """The per-launch variant table (``variant_rows``) of report files or run folders.

    With ``variants`` (``v3`` or ``paged_decode/v3``; ``all`` for every one) only those
    variants' reports are read, so that an unrelated broken report cannot block the gate.
    """
    from paprof.analysis.load import load_reports, variant_rows
    from paprof.profiler.store import find_runs

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if variants and "all" not in variants:
        runs = [run for p in paths for run in find_runs(p)]
        chosen = [r.report for r in runs if r.variant in variants or r.name in variants]
        if not chosen:
            held = ", ".join(sorted({r.name for r in runs})) or "no runs"
            where = ", ".join(map(str, paths))
            raise UserError(f"no runs of {', '.join(variants)} in {where}; it holds: {held}")
        paths = chosen
    return variant_rows(load_reports(paths))


def profile_current(baseline: Baseline, launches: int = 1, runs=None):
    """Profile the baseline's variants at its shapes now, with its preset and clock
    control, ``launches`` launches each; their per-launch table (as ``load_table``).

    The runs go to ``runs`` (replacing runs of the same variant, shape and GPU there) or
    to a temporary folder. A variant that fails verification raises
    ``VerificationError`` (exit 1); one that cannot take its shape, ``ShapeError``.
    Needs the GPU and ncu.
    """
    import tempfile

    from paprof import registry
    from paprof.profiler.argv import NcuSettings
    from paprof.profiler.profile import profile_variants

    groups: dict[tuple, list[Entry]] = {}
    for e in baseline.entries:
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
            settings = NcuSettings(preset=preset, clock_control=clocks, launches=launches)
            variants = [registry.get(e.variant, e.family) for e in entries]
            family = registry.family_of(variants[0])
            for outcome in profile_variants(
                variants, family.parse(shape), settings, runs_dir, replace=True, family=family
            ):
                if outcome.failed or outcome.skipped:
                    raise outcome.failed or outcome.skipped
                reports.append(outcome.run.report)
        return load_table(reports)


# ---------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One (variant, shape, metric) compared with the baseline."""

    family: str
    variant: str
    shape: str
    metric: str
    baseline: Stat
    now: Stat
    allowed: float
    """The largest change for the worse that still passes (>= 0, in the metric's unit)."""
    tolerance: Tolerance
    status: str
    """``pass``, ``regressed`` or ``improved`` (better by more than ``allowed``)."""
    shape_now: str | None = None
    """The shape actually compared when it differs from the baseline's (allowed mismatch)."""

    @property
    def rule(self) -> GateRule:
        return GATE_RULES[self.metric]

    @property
    def name(self) -> str:
        return f"{self.family}/{self.variant}" if self.family else self.variant

    @property
    def delta(self) -> float:
        """``now - baseline`` in the metric's unit."""
        return self.now.value - self.baseline.value

    @property
    def limit(self) -> float:
        """The worst value that still passes."""
        sign = -1 if self.rule.higher_is_better else 1
        return self.baseline.value + sign * self.allowed

    @property
    def regressed(self) -> bool:
        return self.status == "regressed"

    @property
    def cannot_fail(self) -> bool:
        """The worst value that passes is one no measurement can go beyond (a floor
        below zero for a quantity that cannot be negative)."""
        return self.rule.higher_is_better and self.unit in _NON_NEGATIVE_UNITS and self.limit < 0

    # -- text shared by the terminal table, JUnit and Markdown ---------------------------
    @property
    def unit(self) -> str:
        return unit(self.metric)

    def fmt(self, value: float) -> str:
        return fmt_value(value, self.unit)

    def fmt_stat(self, stat: Stat) -> str:
        """``84.9 %``, or ``84.9 % ± 0.3 pts`` over several launches."""
        if stat.n > 1:
            return f"{self.fmt(stat.value)} ± {fmt_delta(stat.spread, self.unit, sign=False)}"
        return self.fmt(stat.value)

    @property
    def delta_text(self) -> str:
        """``-27.5 pts``, or ``+168 us (+5 %)`` with the relative change."""
        text = fmt_delta(self.delta, self.unit)
        if self.baseline.value and self.unit != "%":
            text += f" ({fmt.signed_pct(self.delta / abs(self.baseline.value) * 100)})"
        return text

    @property
    def allowed_text(self) -> str:
        """``>= 81.9 % (-3 pts)``: the worst value that passes and the allowance."""
        op = ">=" if self.rule.higher_is_better else "<="
        sign = "-" if self.rule.higher_is_better else "+"
        allowance = fmt_delta(self.allowed, self.unit, sign=False)
        text = f"{op} {self.fmt(self.limit)} ({sign}{allowance})"
        return text + ": cannot fail" if self.cannot_fail else text

    @property
    def message(self) -> str:
        """One line naming variant, metric, baseline, now and the allowance."""
        shape = self.shape if self.shape_now is None else f"{self.shape} (now {self.shape_now})"
        return (
            f"{self.name} {self.metric} ({self.rule.label}) at {shape}: "
            f"baseline {self.fmt_stat(self.baseline)}, now {self.fmt_stat(self.now)}, "
            f"change {self.delta_text}, allowed {self.allowed_text}"
        )


@dataclass
class Verdict:
    """Every compared (variant, shape, metric), plus notes about what was not compared."""

    results: list[Result]
    notes: list[str] = field(default_factory=list)
    """Allowed mismatches, runs without a baseline entry, stale (improved) entries."""
    provenance: Provenance = Provenance()
    """The current runs' provenance (from the first entry), for report headers."""

    @property
    def regressions(self) -> list[Result]:
        return [r for r in self.results if r.regressed]

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def summary(self) -> str:
        checked = len({(r.family, r.variant, r.shape) for r in self.results})
        metrics = len({r.metric for r in self.results})
        if self.passed:
            improved = sum(r.status == "improved" for r in self.results)
            extra = f", {improved} improved" if improved else ""
            return f"PASS: {checked} variant/shape pairs, {metrics} metrics within tolerance{extra}"
        return (
            f"FAIL: {len(self.regressions)} regression(s) in "
            f"{len(self.results)} checks of {checked} variant/shape pairs"
        )


def judge(baseline: Stat, now: Stat, metric: str, tolerance: Tolerance) -> tuple[float, str]:
    """``(allowed, status)`` for one metric: see the module docstring for the rule."""
    allowed = max(tolerance.allowed(baseline.value), baseline.spread + now.spread)
    better = now.value - baseline.value
    if not rule(metric).higher_is_better:
        better = -better
    slack = _EDGE * max(1.0, abs(baseline.value))
    if -better > allowed + slack:
        return allowed, "regressed"
    if better > allowed + slack:
        return allowed, "improved"
    return allowed, "pass"


_COMPARED = ("gpu", "ncu_version", "clock_control")
_COMPARED_WORDS = {"gpu": "GPU", "ncu_version": "ncu version", "clock_control": "clock control"}


def compare_to_baseline(baseline: Baseline, current, settings: Settings | None = None) -> Verdict:
    """Compare the current runs with ``baseline``.

    ``current`` is a runs table (``variant_rows`` output, measured with ``measure``) or a
    list of ``Entry``. Each baseline entry needs a current (family, variant, shape): a
    missing one is a ``UserError``; one at another shape, GPU model, ncu version or clock
    control is a ``BaselineMismatch`` unless ``settings.allow_mismatch``. Runs that the
    baseline does not know are noted, not judged.
    """
    settings = settings or Settings()
    held = {m for e in baseline.entries for m in e.metrics}
    metrics = tuple(dict.fromkeys(settings.metrics)) if settings.metrics else tuple(
        m for m in GATE_RULES if m in held
    ) + tuple(sorted(held - set(GATE_RULES)))
    for metric in metrics:
        rule(metric)
        if metric not in held:
            raise UserError(
                f"the baseline holds no {metric}; rebuild it with "
                f"'paprof baseline update --metric {metric} --force'"
            )
    if not hasattr(current, "columns"):
        now_entries = list(current)
    else:
        now_entries = measure(current, metrics, missing_ok=True)
    pairs, mismatches, notes = _match(baseline, now_entries)
    if mismatches and not settings.allow_mismatch:
        raise BaselineMismatch(
            "runs not comparable with the baseline: " + "; ".join(mismatches)
            + " (pass --allow-mismatch to compare anyway)"
        )
    notes = [f"mismatch allowed: {m}" for m in mismatches] + notes

    results = []
    for base, now in pairs:
        for metric in metrics:
            if metric not in base.metrics:
                continue
            if metric not in now.metrics:
                raise UserError(
                    f"{now.name} at {now.shape}: the current report has no {metric}; "
                    f"profile with the baseline's preset ({base.provenance.preset or 'default'})"
                )
            tol = settings.tolerance(metric)
            allowed, status = judge(base.metrics[metric], now.metrics[metric], metric, tol)
            results.append(
                Result(
                    base.family, base.variant, base.shape, metric, base.metrics[metric],
                    now.metrics[metric], allowed, tol, status,
                    shape_now=None if now.shape == base.shape else now.shape,
                )
            )
    known = {b.key for b, _ in pairs} | {n.key for _, n in pairs}
    for e in now_entries:
        if e.key not in known:
            notes.append(f"{e.name} at {e.shape} has no baseline entry; not checked")
    for r in results:
        if r.cannot_fail:
            notes.append(
                f"{r.name} {r.metric} at {r.shape}: the allowance "
                f"({fmt_delta(r.allowed, r.unit, sign=False)}) is more than the baseline "
                f"({r.fmt(r.baseline.value)}), so this check cannot fail; give a relative "
                f"tolerance (--tolerance {r.metric}=50%) or rely on the duration_us check"
            )
    if any(r.status == "improved" for r in results):
        notes.append("some metrics improved beyond tolerance: consider 'paprof baseline update'")
    return Verdict(results, notes, pairs[0][1].provenance)


def _match(baseline: Baseline, now_entries: list[Entry]):
    """Pair each baseline entry with its current entry: ``(pairs, mismatches, notes)``.

    A baseline entry with no current run (or only at several other shapes) is a
    ``UserError``; one at a single other shape is paired and its shape is a mismatch.
    """
    by_key = {e.key: e for e in now_entries}
    pairs, missing, mismatches, notes = [], [], [], []
    for base in baseline.entries:
        now = by_key.get(base.key)
        if now is None:
            others = [
                e for e in now_entries if (e.family, e.variant) == (base.family, base.variant)
            ]
            if not others:
                missing.append(f"{base.name} at {base.shape}")
                continue
            shapes = ", ".join(e.shape for e in others)
            mismatches.append(
                f"{base.name}: baseline shape {base.shape}, runs at {shapes}"
            )
            if len(others) > 1:
                missing.append(f"{base.name} at {base.shape} (several other shapes: {shapes})")
                continue
            now = others[0]
        for fieldname in _COMPARED:
            a = getattr(base.provenance, fieldname)
            b = getattr(now.provenance, fieldname)
            if a is not None and b is not None and a != b:
                mismatches.append(
                    f"{base.name}: baseline {_COMPARED_WORDS[fieldname]} {a!r}, runs {b!r}"
                )
            elif a != b:
                notes.append(
                    f"{base.name}: {_COMPARED_WORDS[fieldname]} unknown for the "
                    f"{'baseline' if a is None else 'runs'}; not compared"
                )
        if base.provenance.sections and now.provenance.sections and set(
            base.provenance.sections
        ) != set(now.provenance.sections):
            notes.append(f"{base.name}: profiled with other ncu sections than the baseline")
        pairs.append((base, now))
    if missing:
        raise UserError(
            "no current run for " + "; ".join(missing)
            + " (profile it, or update the baseline)"
        )
    return pairs, list(dict.fromkeys(mismatches)), list(dict.fromkeys(notes))


# ---------------------------------------------------------------------------------------
# Number formatting shared by the outputs (units from the catalogue, text from fmt)
# ---------------------------------------------------------------------------------------

_FORMAT_BY_UNIT = {
    "%": fmt.pct,
    "us": fmt.duration_us,
    "byte": fmt.bytes_decimal,
    "GB/s": fmt.bandwidth_gbs,
    "cycle": fmt.big,
}


def fmt_value(value: float, unit: str) -> str:
    """``84.9 %``, ``3.35 ms``, ``2.15 GB`` (the catalogue's unit picks the formatter)."""
    return _FORMAT_BY_UNIT.get(unit, fmt.number)(value)


def fmt_delta(delta: float, unit: str, sign: bool = True) -> str:
    """A change in the metric's unit; percentage points (``-27.5 pts``) for ``%`` metrics."""
    if unit == "%":
        text = fmt.signed_pts(delta, decimals=2)
        return text if sign else text.lstrip("+-")
    text = fmt_value(abs(delta), unit)
    if not sign:
        return text
    return ("-" if delta < 0 else "+") + text
