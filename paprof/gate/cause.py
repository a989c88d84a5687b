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

from paprof.explain import cause_words as cw
from paprof.model import decompose as dc
from paprof.errors import UserError
from paprof.model.comparison import KEPT_COLUMNS
from paprof.model.numbers import plain

COUNTERS_VERSION = 1
"""Version of the compact counter set (``snapshot``) a baseline stores."""

REBUILD = "rebuild it with 'paprof baseline update --force' to record them"


def columns() -> tuple[str, ...]:
    """The counters a snapshot keeps: the columns the decomposition reads
    (``decompose.COLUMNS``) that a compared kernel keeps (``compare``'s
    ``KEPT_COLUMNS``), in the former's order. A column added to both flows into the
    baseline's counters; one the comparison does not keep is not there either."""
    kept = set(KEPT_COLUMNS)
    return tuple(c for c in dc.COLUMNS if c in kept)


def snapshot(variant) -> dict:
    """The counters of one compared run (a ``VariantResult``) that the decomposition reads:
    ``{"version", "duration_us", "kernels": [{"kernel", "duration_us", "values"}]}``."""
    kernels = []
    for k in variant.kernels:
        values = {c: dc.finite(k.values.get(c)) for c in columns()}
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
    known = set(dc.COLUMNS)  # a set: 10,000 entries of 60 counters each are checked on load
    for k in kernels:
        if not isinstance(k, dict) or not isinstance(k.get("kernel"), str) \
                or not isinstance(k.get("values"), dict):
            raise ValueError("each of 'counters.kernels' needs a 'kernel' name and 'values'")
        for c, v in k["values"].items():
            if c not in known or type(v) not in (int, float) or not math.isfinite(v):
                if c in known and not isinstance(v, bool) and isinstance(v, (int, float)) \
                        and math.isfinite(v):
                    continue  # a subclass of int or float (not bool): a number too
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
    from paprof.explain.compare import compare_reports

    path = Path(report)
    if not path.is_file():
        raise UserError(f"its report {path} is not here")
    return _pick(compare_reports([path], cross=True), variant, shape, str(path))


def counters_of_frame(kernels, entries: list, table=None) -> list:
    """The snapshot of each of ``entries`` from the loader's per-kernel frame
    (``load_runs``), in one pass over the frame: each a dict, or the ``UserError`` that
    says why there is none (the frame holds no kernels of it).

    The same snapshot as ``paprof compare`` of the entry's report gives (``snapshot`` of
    ``compare(rows, cross=True)``), without a comparison per entry: over several steps of
    one run (:mod:`paprof.model.steps`), the kernels of the step of median duration and
    the median of the steps' durations (``assembly._one_launch_each``). ``table``: the
    frame's ``variant_rows`` where the caller has it (made here otherwise)."""
    return _FrameCounters(kernels, table).snapshots(entries)


class _FrameCounters:
    """The loader's frame grouped once: its steps (``variant_rows``' groups, in the same
    order), its runs (variant, shape, report) and each run's step of median duration."""

    STEP = ["variant", "shape", "report_path", "step"]

    def __init__(self, kernels, table=None):
        import numpy as np
        import pandas as pd

        self.kernels = kernels
        self.reports = "report_path" in kernels
        n = len(kernels)
        keys = pd.DataFrame({c: (kernels[c].to_numpy() if c in kernels else
                                 np.full(n, 0 if c == "step" else "", dtype=object))
                             for c in self.STEP})
        step_of = keys.groupby(self.STEP, sort=False, dropna=False).ngroup().to_numpy()
        steps = int(step_of.max()) + 1 if n else 0
        # the rows of each step, in the frame's order
        self.rows = np.argsort(step_of, kind="stable")
        self.bounds = np.concatenate(([0], np.cumsum(np.bincount(step_of, minlength=steps))))
        first = self.rows[self.bounds[:-1]]
        if not _aligned(table, keys.iloc[first]):
            from paprof.model.load import variant_rows

            table = variant_rows(kernels)
        runs = keys.iloc[first][self.STEP[:3]].reset_index(drop=True)
        run_of = runs.groupby(self.STEP[:3], sort=False, dropna=False).ngroup().to_numpy()
        self.run_keys = runs.iloc[np.unique(run_of, return_index=True)[1]].reset_index(drop=True)
        self.step, self.duration = _median_steps(
            run_of, table["duration_us"].to_numpy(dtype="float64") if steps else np.empty(0))
        self.index: dict | None = None

    def _runs_of(self, entry) -> list[int]:
        """The runs (in order) whose rows ``counters_of_frame`` keeps for ``entry``: its
        report's, variant's and shape's, each compared as text (a key that is None or a
        column the frame lacks is not compared)."""
        if self.index is None:
            text = {c: self.run_keys[c].astype(str).tolist() for c in self.STEP[:3]}
            self.index = {}
            for run, key in enumerate(zip(text["report_path"], text["variant"], text["shape"])):
                self.index.setdefault(key, []).append(run)
                self.index.setdefault((None, *key[1:]), []).append(run)
            # what the comparison labels each run (``_pick`` matches the entry on them)
            self.labels = [(str(plain(v) or "?"), plain(s) or "") for v, s in
                           zip(self.run_keys["variant"].tolist(), self.run_keys["shape"].tolist())]
        report = entry.provenance.report if self.reports else None
        key = (None if report is None else str(report), str(entry.variant), str(entry.shape))
        return self.index.get(key, [])

    def snapshots(self, entries: list) -> list:
        chosen, out = [], []
        for e in entries:
            runs = self._runs_of(e)
            hits = [r for r in runs if self.labels[r] == (e.variant, e.shape)]
            if not runs:
                out.append(UserError(f"the runs hold no kernels of {e.name} at {e.shape}"))
            elif not hits and len(runs) > 1:
                out.append(UserError(f"the runs holds no {e.variant} at {e.shape}"))
            else:
                out.append(None)
                chosen.append((len(out) - 1, (hits or runs)[0]))
        for (i, _run), snap in zip(chosen, self._snapshots([r for _, r in chosen])):
            out[i] = snap
        return out

    def _snapshots(self, runs: list[int]) -> list[dict]:
        """The snapshots of ``runs``: each value read from arrays of the rows they need."""
        import numpy as np

        frame = self.kernels
        rows = [self.rows[self.bounds[s]: self.bounds[s + 1]] for s in self.step[runs].tolist()]
        every = np.concatenate(rows) if rows else np.empty(0, dtype=int)
        names = [c for c in columns() if c in frame]
        values = [_finite_values(frame[c].to_numpy()[every]) for c in names]
        values = list(zip(*values)) if values else [()] * len(every)
        kernel = frame["kernel"].to_numpy()[every].tolist()
        duration = _finite_values(frame["duration_us"].to_numpy()[every]) \
            if "duration_us" in frame else [None] * len(every)
        out, at = [], 0
        for run, members in zip(runs, rows):
            kernels = []
            for i in range(at, at + len(members)):
                kernels.append({"kernel": str(kernel[i]), "duration_us": duration[i],
                                "values": {c: v for c, v in zip(names, values[i])
                                           if v is not None}})
            at += len(members)
            out.append({"version": COUNTERS_VERSION,
                        "duration_us": dc.finite(self.duration[run]), "kernels": kernels})
        return out


def _aligned(table, steps) -> bool:
    """Whether ``table`` is ``variant_rows`` of the frame whose steps' first rows are
    ``steps``: a row per step, in order."""
    if table is None or len(table) != len(steps):
        return False
    for c in steps.columns:
        if c not in table or not (table[c].astype(str).to_numpy()
                                  == steps[c].astype(str).to_numpy()).all():
            return False
    return True


def _finite_values(array) -> list:
    """Each cell of ``array`` as ``snapshot`` reads a compared kernel's: a finite float,
    else None."""
    if array.dtype.kind == "f":
        return [v if math.isfinite(v) else None for v in array.tolist()]

    return [dc.finite(plain(v)) for v in array.tolist()]


def _median_steps(run_of, duration):
    """Per run (``run_of``: each step's run, numbered in order of first appearance;
    ``duration``: each step's summed duration): the step a comparison shows (the one of
    median duration, a missing one ranked as 0, as ``assembly._one_launch_each`` ranks
    them) and the run's duration (the median over its steps when every one is known, else
    that step's own)."""
    import numpy as np

    runs = int(run_of.max()) + 1 if len(run_of) else 0
    known = np.isfinite(duration)
    rank = np.where(known, duration, 0.0)
    order = np.argsort(rank, kind="stable")
    order = order[np.argsort(run_of[order], kind="stable")]
    counts = np.bincount(run_of, minlength=runs)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int)
    step = order[starts + (counts - 1) // 2]
    ranked = rank[order]
    low, high = ranked[starts + (counts - 1) // 2], ranked[starts + counts // 2]
    median = np.where(counts % 2 == 1, high, (low + high) / 2)
    every = np.bincount(run_of, weights=(~known).astype(float), minlength=runs) == 0
    return step, np.where((counts > 1) & every, median, duration[step])


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


def _current_sides(entries: list, kernels, table=None) -> list:
    """Each current entry's counters as ``entry_cause`` takes them: its own, else from
    ``kernels`` (the loader's frame, all entries in one pass), else None (its report is
    read)."""
    out = [e.counters for e in entries]
    wanted = [i for i, c in enumerate(out) if c is None]
    if kernels is not None and wanted:
        for i, found in zip(wanted, counters_of_frame(kernels, [entries[i] for i in wanted],
                                                      table)):
            out[i] = found
    return out


def entry_cause(base, now, spread_us: float = 0.0, current=None) -> Cause:
    """The cause of ``base -> now`` (two ``Entry``): the baseline's stored counters (or its
    report, where it is still here) against the current run's: ``current`` (a snapshot,
    or the ``UserError`` that says why there is none: ``counters_of_frame``), else
    ``now``'s own, else read from its report."""
    try:
        before = _baseline_side(base)
    except UserError as err:
        return Cause(None, str(err))
    try:
        if isinstance(current, Exception):
            raise current
        after = current if current is not None else now.counters if now.counters is not None \
            else counters_of_report(now.provenance.report or "", now.variant, now.shape)
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


def attach(verdict, kernels=None, table=None) -> None:
    """Give ``verdict`` the cause of each entry with a regression or an improvement beyond
    the allowance (``Verdict.causes``, keyed by ``(family, variant, shape)``). ``kernels``:
    the loader's frame of the current runs (``load_runs``; ``table``: its
    ``variant_rows``, where the caller has it), else each run's report is read."""
    moved: dict[tuple, str] = {}
    by_entry: dict[tuple, list] = {}
    for r in verdict.results:
        key = (r.family, r.variant, r.shape)
        by_entry.setdefault(key, []).append(r)
        if r.status in ("regressed", "improved"):
            moved[key] = "regressed" if r.regressed else moved.get(key, "improved")
    pairs, seen = [], set()
    for base, now in verdict.pairs:
        if base.key in moved and base.key not in verdict.causes and base.key not in seen:
            seen.add(base.key)
            pairs.append((base, now))
    currents = _current_sides([now for _, now in pairs], kernels, table)
    for (base, now), current in zip(pairs, currents):
        spread_us, noise = _time_spread(by_entry[base.key])
        found = entry_cause(base, now, spread_us, current)
        found.outcome, found.noise = moved[base.key], noise
        verdict.causes[base.key] = found


def with_counters(entries: list, kernels, table=None) -> list:
    """``entries`` with their counters recorded from ``kernels`` (the loader's frame, in
    one pass; ``table``: its ``variant_rows`` where the caller has it); left without where
    it cannot give them."""
    import dataclasses

    found = counters_of_frame(kernels, entries, table)
    return [dataclasses.replace(e, counters=None if isinstance(c, Exception) else c)
            for e, c in zip(entries, found)]
