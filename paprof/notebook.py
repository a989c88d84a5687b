"""``paprof.compare`` for a notebook: the comparison as an object that shows itself.

``paprof.compare(["v2", "v3"], runs="examples/h200")`` resolves, loads and compares the
variants as ``paprof compare`` does and returns a ``Report``: in Jupyter it displays the
HTML report (charts inline, in an iframe so that its styles stay out of the notebook);
its properties are DataFrames of what the report says (``variants``, ``steps``,
``table``, ``traffic``, ``rules``, ``ledger``, ``roofline``, ``roofs``, ``hotspots``), and
``comparison`` / ``context`` hold the objects the report was made from.
``paprof.compare("v2", "v3", runs=...)`` (the variants as separate arguments) is the same.

``paprof.load("examples/h200")`` is the tidy table itself, as ``paprof table`` reads it.
The whole API: docs/api.md.
"""

from __future__ import annotations

import html as _html
from functools import cached_property

from paprof.api import DEFAULT_RUNS


class Report:
    """One comparison, for a notebook. Made by ``paprof.compare``."""

    def __init__(self, comparison, context, reports):
        self.comparison = comparison
        self.context = context
        self.reports = list(reports)
        """The ``.ncu-rep`` files compared, in order."""

    @cached_property
    def html(self) -> str:
        """The HTML report, as ``paprof compare --out`` writes it."""
        from paprof.api import render_html

        return render_html(self.context)

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{_html.escape(self.html, quote=True)}" '
                'style="width: 100%; height: 900px; border: 1px solid #ddd;"></iframe>')

    def __repr__(self) -> str:
        from paprof.safetext import shown

        return f"<paprof.Report {shown(' -> '.join(self.context.labels))}>"

    @property
    def variants(self):
        """One row per variant: label, variant, family, shape, GPU, duration, bottleneck,
        launches, report."""
        import pandas as pd

        return pd.DataFrame([{
            "label": v.label, "variant": v.variant, "family": v.family, "shape": v.shape, "gpu": v.gpu,
            "duration_us": v.get("duration_us"), "bottleneck": v.bottleneck, "launches": v.launches,
            "report": v.report_path} for v in self.comparison.variants])

    @property
    def steps(self):
        """One row per step: before, after, speedup, headline, the story's first sentence,
        and its three leading parts: the cause, what limits the variant now, what would
        move it next (None where the counters say nothing)."""
        import pandas as pd

        columns = ["before", "after", "speedup", "headline", "first_sentence", "cause", "limit",
                   "next_move"]
        return pd.DataFrame([{
            "before": s.before, "after": s.after, "speedup": s.speedup, "headline": s.headline,
            "first_sentence": s.sentences[0] if s.sentences else None, "cause": s.cause,
            "limit": s.limit, "next_move": s.next_move} for s in self.comparison.steps],
            columns=columns)

    @property
    def table(self):
        """The side-by-side table: one row per metric (section, key, label), one column of
        raw values per variant (medians over several launches)."""
        return self._sections(self.context.table)

    @property
    def traffic(self):
        """The traffic per memory level, as ``table`` (empty without the traffic sections)."""
        return self._sections(self.context.traffic)

    def _sections(self, sections):
        import pandas as pd

        labels = self.context.labels
        rows = []
        for section in sections:
            for row in section.rows:
                rows.append({"section": section.title, "key": row.key, "metric": row.label,
                             **{lab: c.value for lab, c in zip(labels, row.cells)}})
        return pd.DataFrame(rows, columns=["section", "key", "metric", *labels])

    @property
    def rules(self):
        """ncu's rules per variant: id, title, type, estimated speedup %, kernel, message."""
        import pandas as pd

        return pd.DataFrame([{
            "variant": v.label, "id": r.id, "title": r.title, "type": r.type,
            "speedup_pct": r.speedup_pct, "kernel": r.kernel, "message": r.message}
            for v in self.comparison.variants for r in v.rules.values()],
            columns=["variant", "id", "title", "type", "speedup_pct", "kernel", "message"])

    @property
    def explanation(self) -> dict:
        """The comparison as data: the ``paprof.explanation/1`` document that
        ``paprof compare --json`` writes (``docs/explanations.md``)."""
        from paprof.api import explanation

        return explanation(self.comparison)

    @property
    def ledger(self):
        """The time ledger: one row per step and term (``paprof.model.ledger``), in us."""
        import pandas as pd

        rows = [{"before": led.before, "after": led.after, "term": key, "us": us}
                for led in self.comparison.ledgers or () if led is not None
                for key, _, us in led.rows()]
        return pd.DataFrame(rows, columns=["before", "after", "term", "us"])


    @property
    def roofline(self):
        """The roofline: one row per variant and level (``dram``, ``l2``, ``l1``, ``work``):
        FLOPs, bytes, FLOP/byte, FLOP/s, the roof that bounds it, the rate that roof allows
        and the share of it achieved (%); ``roofs`` for the roofs themselves."""
        import pandas as pd

        rl = self.context.roofline.raw if self.context.roofline else None
        columns = ["variant", "level", "flops", "bytes", "intensity", "flop_rate", "bound_by",
                   "attainable", "of_attainable_pct"]
        return pd.DataFrame([{
            "variant": v.label, "level": p.level, "flops": p.flops, "bytes": p.bytes,
            "intensity": p.intensity, "flop_rate": p.flop_rate,
            "bound_by": p.bound.roof if p.bound else None,
            "attainable": p.bound.attainable if p.bound else None, "of_attainable_pct": p.of_attainable}
            for v in (rl.variants if rl else []) for p in v.points], columns=columns)

    @property
    def roofs(self):
        """The roofline's roofs: key, name, kind (memory: bytes/s; compute: FLOP/s), rate,
        source (measured, datasheet or ncu peak) and where the figure comes from."""
        import pandas as pd

        rl = self.context.roofline.raw if self.context.roofline else None
        return pd.DataFrame([{"key": r.key, "name": r.name, "kind": r.kind, "rate": r.rate,
                              "source": r.source, "note": r.note}
                             for r in (rl.roofs.values() if rl else [])],
                            columns=["key", "name", "kind", "rate", "source", "note"])

    @property
    def hotspots(self):
        """The source hot spots (runs profiled with ``--preset source``): one row per
        variant and source line, hottest first: where, text, time (us), share of the
        variant's time, warp samples, the top stall reason, instructions executed."""
        import pandas as pd

        hs = self.comparison.hotspots
        columns = ["variant", "where", "text", "time_us", "share", "samples", "top_stall",
                   "executed"]
        return pd.DataFrame([{
            "variant": v.label, "where": x.where, "text": x.text, "time_us": x.time_us,
            "share": x.share, "samples": x.samples,
            "top_stall": x.top_stall[0] if x.top_stall else None, "executed": x.executed}
            for v in (hs.variants if hs else []) for x in v.lines if x.samples], columns=columns)


def _specs(given: tuple) -> list[str]:
    """The variants of ``compare(*given)``: one list (or tuple) of them, or each its own
    argument; each a run-store id or a report path."""
    from os import PathLike

    from paprof.errors import UserError

    if len(given) == 1 and isinstance(given[0], (list, tuple)):
        specs = list(given[0])
    elif any(isinstance(g, (list, tuple)) for g in given):
        raise TypeError("paprof.compare takes the variants as one list, compare(['v2', 'v3'], "
                        "runs=...), or as separate arguments, compare('v2', 'v3', runs=...), "
                        "not both (runs= and shape= by keyword)")
    else:
        specs = list(given)
    for spec in specs:
        if not isinstance(spec, (str, PathLike)):
            raise TypeError(f"paprof.compare: a variant is a run-store id or an .ncu-rep path "
                            f"(str or path), not {type(spec).__name__}: {spec!r}")
    if len(specs) < 2:
        raise UserError(f"compare needs at least 2 variants, got {len(specs)}: e.g. "
                        "paprof.compare(['v2', 'v3'], runs='examples/h200')")
    return [str(s) for s in specs]


def compare(*specs, runs=DEFAULT_RUNS, shape: str | None = None, baseline: str | None = None) -> Report:
    """Compare variants (run-store ids such as ``"v3"`` or ``"paged_decode/v3"``, or
    ``.ncu-rep`` paths; at least 2) from the run store ``runs``, at ``shape`` when given,
    as ``paprof compare`` does; a ``Report`` for a notebook.

    The variants go as one list, ``compare(["v2", "v3"], runs="examples/h200")``, or as
    separate arguments, ``compare("v2", "v3", runs="examples/h200")``; ``runs``, ``shape``
    and ``baseline`` by keyword. ``baseline="v2"`` compares every variant with v2, as
    ``paprof compare --baseline v2`` does (v2 need not be in the list), instead of telling
    the ordered list as a chain. Fewer than 2 variants: ``paprof.errors.UserError``;
    anything else than strings and paths: ``TypeError``."""
    from paprof.api import build_context, explanation, finished_comparison, resolve_variants

    wanted = _specs(specs)
    if baseline is not None:
        from os import PathLike

        if not isinstance(baseline, (str, PathLike)):
            raise TypeError(f"paprof.compare: baseline is a run-store id or an .ncu-rep path, "
                            f"not {type(baseline).__name__}: {baseline!r}")
        base = str(baseline)
        wanted = [base] + [s for s in wanted if s != base]
    resolved = resolve_variants(wanted, runs, shape)
    cmp = finished_comparison(resolved, baseline=baseline is not None)
    return Report(cmp, build_context(cmp, explained=explanation(cmp)),
                  [run.report for run in resolved])


def load(*paths, per_variant: bool = False, step_range: str | None = None):
    """The tidy table of the reports in ``paths`` (``.ncu-rep`` files or folders searched
    recursively, such as a run store), as ``paprof table`` reads them: a pandas DataFrame,
    one row per profiled kernel launch (columns: docs/architecture.md, "The tidy table").
    ``per_variant``: each step's launches summed into one row per (variant, shape, report,
    step), as ``paprof table --per-variant``; ``step_range``: the NVTX range that delimits
    steps in reports whose record names none (docs/explanations.md)."""
    from paprof.api import load_reports, variant_rows

    if len(paths) == 1 and isinstance(paths[0], (list, tuple)):
        paths = tuple(paths[0])
    if not paths:
        from paprof.errors import UserError

        raise UserError("paprof.load needs at least one report or folder: "
                        "e.g. paprof.load('examples/h200')")
    df = load_reports([str(p) for p in paths], step_range=step_range)
    return variant_rows(df) if per_variant else df
