"""Why a gated entry moved: the same warp-time decomposition as ``paprof compare``.

A regression (or an improvement beyond the allowance) says which mechanism moved the time
and the counters behind it: "memory waits (long scoreboard): 3.56 -> 8.07 cycles per
instruction +765 us (global load requests 4.72 M -> 25.2 M, ...)". Both sides are reduced
to the same compact *counters* (``snapshot``: per kernel, the columns the decomposition
reads, ``decompose.COLUMNS``), so a baseline file can carry its side and the cause works
in CI where only the baseline JSON is committed (baseline schema 3, ``Entry.counters``).
An older baseline has none: then its recorded report is read where it still exists, else
the cause says it is unavailable and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from paprof.analysis import cause_words as cw
from paprof.analysis import decompose as dc
from paprof.errors import UserError

COUNTERS_VERSION = 1
"""Version of the compact counter set (``snapshot``) a baseline stores."""

REBUILD = "rebuild it with 'paprof baseline update --force' to record them"


def snapshot(variant) -> dict:
    """The counters of one compared run (a ``VariantResult``) that the decomposition reads:
    ``{"version", "duration_us", "kernels": [{"kernel", "duration_us", "values"}]}``."""
    kernels = []
    for k in variant.kernels:
        values = {c: dc.finite(k.values.get(c)) for c in dc.COLUMNS}
        kernels.append({"kernel": k.kernel, "duration_us": dc.finite(k.duration_us),
                        "values": {c: v for c, v in values.items() if v is not None}})
    return {"version": COUNTERS_VERSION, "duration_us": dc.finite(variant.get("duration_us")),
            "kernels": kernels}


def check_counters(data: object) -> dict:
    """``data`` if it is a counter snapshot this module reads; ``ValueError`` otherwise."""
    if not isinstance(data, dict) or data.get("version") != COUNTERS_VERSION:
        raise ValueError(f"'counters' must be an object of version {COUNTERS_VERSION}")
    kernels = data.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        raise ValueError("'counters.kernels' must be a non-empty list")
    for k in kernels:
        if not isinstance(k, dict) or not isinstance(k.get("kernel"), str) \
                or not isinstance(k.get("values"), dict):
            raise ValueError("each of 'counters.kernels' needs a 'kernel' name and 'values'")
        for c, v in k["values"].items():
            if c not in dc.COLUMNS or isinstance(v, bool) or not isinstance(v, (int, float)) \
                    or not math.isfinite(v):
                raise ValueError(f"counters of {k['kernel']}: {c!r} is not a known finite counter")
    return data


@dataclass
class _Kernel:
    kernel: str
    duration_us: float | None
    values: dict


class _Side:
    """A snapshot as the decomposition reads a compared run: ``get`` and ``kernels``."""

    def __init__(self, counters: dict):
        self.values = {"duration_us": counters.get("duration_us")}
        self.kernels = [_Kernel(k["kernel"], k.get("duration_us"), dict(k["values"]))
                        for k in counters["kernels"]]

    def get(self, column: str):
        return self.values.get(column)


def _pick(cmp, variant: str, shape: str, where: str) -> dict:
    hits = [v for v in cmp.variants if v.variant == variant and (v.shape or "") == shape] \
        or ([cmp.variants[0]] if len(cmp.variants) == 1 else [])
    if not hits:
        raise UserError(f"{where} holds no {variant} at {shape}")
    return snapshot(hits[0])


def counters_of_report(report: str | Path, variant: str, shape: str) -> dict:
    """The snapshot of ``variant`` at ``shape`` in one report; ``UserError`` where the report
    is gone or does not hold it."""
    from paprof.analysis.compare import compare_reports

    path = Path(report)
    if not path.is_file():
        raise UserError(f"its report {path} is not here")
    return _pick(compare_reports([path], cross=True), variant, shape, str(path))


def counters_of_frame(kernels, entry) -> dict:
    """The snapshot of ``entry`` from the loader's per-kernel frame (``load_runs``): its
    report's rows, compared as ``paprof compare`` does; ``UserError`` where it has none."""
    from paprof.analysis.compare import compare

    rows = kernels
    for column, value in (("report_path", entry.provenance.report), ("variant", entry.variant),
                          ("shape", entry.shape)):
        if column in rows and value is not None:
            rows = rows[rows[column].astype(str) == str(value)]
    if rows.empty:
        raise UserError(f"the runs hold no kernels of {entry.name} at {entry.shape}")
    return _pick(compare(rows, cross=True), entry.variant, entry.shape, "the runs")


@dataclass
class Cause:
    """The cause of one entry's change, or why there is none."""

    text: str | None
    """The one paragraph (``cause_words.cause_text``); None when unavailable."""
    reason: str | None = None
    """Why no cause is given (no baseline counters, no counters for the identity)."""
    before_us: float | None = None
    after_us: float | None = None
    terms: list = field(default_factory=list)
    """The causes as data: mechanism, term, label, us, share, counters (both values)."""
    outcome: str = ""
    """What the entry's results say (``attach``): ``regressed`` or ``improved``."""
    noise: float = 0.0
    """The gated duration's measured spread (both sides), relative to the baseline's."""

    @property
    def available(self) -> bool:
        return self.text is not None

    @property
    def change(self) -> float | None:
        """The kernel time's relative change (``+0.31`` for 31 % slower)."""
        if self.before_us and self.after_us is not None:
            return self.after_us / self.before_us - 1.0
        return None

    def line(self) -> str:
        """One paragraph: the kernel time's change, then the cause (or why there is none)."""
        if self.text is None:
            return f"cause unavailable: {self.reason}"
        noise = f" ± {self.noise * 100:.1f} %" if self.noise else ""
        text = self.text if self.outcome != "improved" else self.text.split("; then ")[0]
        return (f"kernel time {self.change * 100:+.1f} %{noise} "
                f"({cw.us_text(self.before_us).lstrip('+')} -> "
                f"{cw.us_text(self.after_us).lstrip('+')}): {text}")

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "available": self.available, "text": self.text,
                "reason": self.reason, "change": self.change, "noise": self.noise,
                "before_us": self.before_us, "after_us": self.after_us, "terms": self.terms}


def _term(t, delta_us: float) -> dict:
    return {"mechanism": dc.group(t.key), "term": t.key, "label": t.label, "us": t.us,
            "words": cw.mechanism(t), "classes": [p.to_dict() for p in t.parts],
            "share": t.us / delta_us if delta_us else None,
            "counters": [{"label": e.label, "before": e.before, "after": e.after, "unit": e.unit,
                          "ratio": e.ratio} for e in cw.shown_evidence(t)]}


def explain(before: dict, after: dict, spread_us: float = 0.0) -> Cause:
    """The decomposition of ``before -> after`` (two snapshots) as a ``Cause``;
    ``spread_us``: the measured spread of the time, below which no term is a cause."""
    dec = dc.decompose(_Side(before), _Side(after), spread_us)
    if dec is None:
        return Cause(None, "a side has no duration")
    text = cw.cause_text(dec)
    if text is None:
        return Cause(None, "the counters of the warp-time identity are missing "
                     "(profile with WarpStateStats and SchedulerStats)",
                     dec.before_us, dec.after_us)
    if not dec.exact:
        text += " (not exact: some kernels lack the identity's counters)"
    return Cause(text, None, dec.before_us, dec.after_us,
                 [_term(t, dec.delta_us) for t in dec.causes()])


def _baseline_side(base) -> dict:
    if base.counters is not None:
        return base.counters
    report = base.provenance.report
    if not report:
        raise UserError(f"the baseline holds no counters and names no report; {REBUILD}")
    try:
        return counters_of_report(report, base.variant, base.shape)
    except (UserError, OSError, ValueError) as err:
        raise UserError(f"the baseline holds no counters (an older baseline file) and {err}; "
                        f"{REBUILD}") from None


def _current_side(now, kernels) -> dict:
    if now.counters is not None:
        return now.counters
    if kernels is not None:
        return counters_of_frame(kernels, now)
    return counters_of_report(now.provenance.report or "", now.variant, now.shape)


def entry_cause(base, now, spread_us: float = 0.0, kernels=None) -> Cause:
    """The cause of ``base -> now`` (two ``Entry``): the baseline's stored counters (or its
    report, where it is still here) against the current run's (from ``kernels``, the
    loader's frame of the current runs, else its report)."""
    try:
        before = _baseline_side(base)
    except UserError as err:
        return Cause(None, str(err))
    try:
        after = _current_side(now, kernels)
    except (UserError, OSError, ValueError) as err:
        return Cause(None, f"the current run's counters cannot be read: {err}")
    return explain(before, after, spread_us)


TIMES = ("duration_us", "duration_us_event")
"""The gated durations whose spread is the cause's noise (the first one gated)."""


def _time_spread(results: list) -> tuple[float, float]:
    """``(spread in us, relative)`` of an entry's gated duration; zeros without one."""
    for metric in TIMES:
        for r in results:
            if r.metric == metric and r.baseline.value:
                spread = r.baseline.spread + r.now.spread
                return spread, spread / abs(r.baseline.value)
    return 0.0, 0.0


def attach(verdict, kernels=None) -> None:
    """Give ``verdict`` the cause of each entry with a regression or an improvement beyond
    the allowance (``Verdict.causes``, keyed by ``(family, variant, shape)``). ``kernels``:
    the loader's frame of the current runs (``load_runs``), else each run's report is read."""
    moved: dict[tuple, str] = {}
    by_entry: dict[tuple, list] = {}
    for r in verdict.results:
        key = (r.family, r.variant, r.shape)
        by_entry.setdefault(key, []).append(r)
        if r.status in ("regressed", "improved"):
            moved[key] = "regressed" if r.regressed else moved.get(key, "improved")
    for base, now in verdict.pairs:
        if base.key in moved and base.key not in verdict.causes:
            spread_us, noise = _time_spread(by_entry[base.key])
            found = entry_cause(base, now, spread_us, kernels)
            found.outcome, found.noise = moved[base.key], noise
            verdict.causes[base.key] = found


def with_counters(entries: list, kernels) -> list:
    """``entries`` with their counters recorded from ``kernels`` (the loader's frame; left
    without where it cannot give them)."""
    import dataclasses

    out = []
    for e in entries:
        try:
            counters = counters_of_frame(kernels, e)
        except (UserError, OSError, ValueError):
            counters = None
        out.append(dataclasses.replace(e, counters=counters))
    return out
