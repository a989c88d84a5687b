"""The report's roofline and source hot-spot sections, as the templates show them.

``roofline_view(roofline)`` and ``hotspots_view(hotspots)`` turn the analysis objects
(``paprof.model.roofline.Roofline``, ``paprof.model.source.Hotspots``) into rows of
text for the HTML and Markdown templates (``_roofline.*.j2``, ``_hotspots.*.j2``); each
keeps the object it was made from as ``raw``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.model import roofline as R
from paprof.explain.roofline_reading import ABOVE, FAR_UNDER
from paprof.model.source import TOP


@dataclass
class RoofRow:
    name: str
    value: str
    source: str
    note: str
    ridges: list[str]
    """For a memory roof: its ridge point with each compute roof, as text; else empty."""


@dataclass
class RooflineRow:
    variant: str
    level: str
    flops: str
    bytes: str
    intensity: str
    achieved: str
    bound: str
    attainable: str
    of_attainable: str
    binding: bool
    """This level's roof is the lowest for the variant: it binds."""


@dataclass
class RooflineView:
    roofs: list[RoofRow]
    compute_names: list[str]
    """Headings of the ridge columns (one per compute roof)."""
    rows: list[RooflineRow]
    verdicts: list[str]
    """One sentence per variant: which roof binds, at what intensity, how close."""
    notes: list[str]
    raw: R.Roofline = field(repr=False)


def _rate(roof: R.Roof) -> str:
    """A roof's rate: ``4.53 TB/s`` or ``726 TFLOP/s``."""
    if roof.kind == "memory":
        return fmt.bandwidth_gbs(roof.rate / 1e9)
    return fmt.flop_rate(roof.rate / 1e12)


def _roof_words(roofs: dict, key: str | None) -> str:
    roof = roofs.get(key) if key else None
    return f"{roof.name} ({_rate(roof)}, {roof.source})" if roof else fmt.MISSING


def roofline_view(rl: R.Roofline | None, verdicts_by_label: dict | None = None,
                  readings: dict | None = None) -> RooflineView | None:
    """The roofline as rows and one sentence a variant; ``verdicts_by_label`` (each
    variant's one bottleneck verdict) keeps the sentence from contradicting it;
    ``readings``: where each variant stands against its roof, as the explain stage read
    it (``Told.readings``)."""
    if rl is None:
        return None
    compute = [r for r in rl.roofs.values() if r.kind == "compute"]
    roofs = []
    for r in rl.roofs.values():
        ridges = ([f"{fmt.sig(R.ridge(r.rate, c.rate))} FLOP/B" for c in compute]
                  if r.kind == "memory" else ["" for _ in compute])
        roofs.append(RoofRow(r.name, _rate(r), r.source, r.note, ridges))
    rows, verdicts = [], []
    for v in rl.variants:
        binding = v.binding
        for p in v.points:
            rows.append(RooflineRow(
                variant=v.label, level=R.LEVEL_NAMES.get(p.level, p.level),
                flops=fmt.big(p.flops), bytes=fmt.bytes_decimal(p.bytes),
                intensity=fmt.sig(p.intensity) if p.intensity else fmt.MISSING,
                achieved=fmt.flop_rate(p.flop_rate / 1e12) if p.flop_rate else fmt.MISSING,
                bound=_roof_words(rl.roofs, p.bound.roof if p.bound else None),
                attainable=fmt.flop_rate(p.bound.attainable / 1e12) if p.bound else fmt.MISSING,
                of_attainable=fmt.pct(p.of_attainable) if p.of_attainable is not None else fmt.MISSING,
                binding=p is binding))
        verdicts.append(_verdict(v.label, (readings or {}).get(v.label),
                                 (verdicts_by_label or {}).get(v.label)))
    return RooflineView(roofs, [c.name for c in compute], rows, [x for x in verdicts if x],
                        list(rl.notes), rl)


def _verdict(name: str, got, label: str | None = None) -> str:
    """The sentence of the variant ``name``'s reading ``got`` (``roofline_reading.Reading``)."""
    if got is None:
        return ""
    p, roof = got.point, got.roof
    where = R.LEVEL_NAMES.get(p.level, p.level)
    side = "below" if roof.kind == "memory" else "at or above"
    rate = fmt.flop_rate(p.flop_rate / 1e12)
    allows = fmt.flop_rate(p.bound.attainable / 1e12)
    pos = (f"{fmt.sig(p.intensity)} FLOP/byte of {where} traffic, {side} the ridge point of "
           f"{fmt.sig(p.bound.ridge)}")
    share = p.of_attainable
    named = f" ({label})" if label else ""
    if got.standing == ABOVE:
        # a measured roof is one library kernel's rate, not the chip's peak: faster is said
        return (f"{name}{named}: in the {roof.name} roof's region ({pos}) and faster than that "
                f"roof: {rate} against the {allows} it allows ({roof.source}), so the roof is "
                "not this kernel's limit.")
    if got.standing == FAR_UNDER:
        return (f"{name}{named}: in the {roof.name} roof's region ({pos}) but far under it, "
                f"{rate}, {fmt.pct(share)} of the {allows} it allows: no roof limits it"
                + (f"; the verdict is {label}." if label else "."))
    return (f"{name}{named}: bound by the {roof.name} roof ({pos}): "
            f"{rate}, {fmt.pct(share)} of the {allows} that roof allows.")


# -- source hot spots ------------------------------------------------------------------
@dataclass
class HotLineView:
    rank: int
    where: str
    text: str
    time: str
    share: str
    samples: str
    stall: str
    sass: str
    """The line's hottest SASS instructions (up to two)."""


@dataclass
class HotVariantView:
    label: str
    kind: str
    """``lines`` (the report has line information) or ``instructions`` (SASS only)."""
    lines: list[HotLineView]
    summary: str
    note: str


@dataclass
class HotChangeView:
    kind: str
    text: str
    before_where: str
    after_where: str
    before: str
    after: str
    change: str


@dataclass
class HotStepView:
    title: str
    changes: list[HotChangeView]
    how: str


@dataclass
class HotspotsView:
    variants: list[HotVariantView]
    steps: list[HotStepView]
    without: list[str]
    raw: object = field(repr=False, default=None)


def _stall_text(line) -> str:
    top = line.top_stall
    if top is None:
        return "issuing" if line.samples else fmt.MISSING
    reason, share = top
    return f"{reason.replace('_', ' ')} ({fmt.pct(share * 100, 0)})"


def _us(us: float) -> str:
    return fmt.duration_us(us)


def hotspots_view(hs, top: int | None = None) -> HotspotsView | None:
    if hs is None:
        return None

    top = top or TOP
    variants = []
    for v in hs.variants:
        lines = [HotLineView(
            rank=i, where=x.where, text=(x.text or "").strip() or fmt.MISSING,
            time=_us(x.time_us), share=fmt.pct(x.share * 100), samples=fmt.count(x.samples),
            stall=_stall_text(x), sass="; ".join(ins.sass for ins in x.instructions[:2]))
            for i, x in enumerate(v.top(top), start=1)]
        kernels = len(v.kernels)
        summary = (f"{fmt.count(v.samples)} warp samples over {fmt.duration_us(v.duration_us)}"
                   + (f" ({kernels} kernels)" if kernels > 1 else ""))
        variants.append(HotVariantView(v.label, "lines" if v.has_lines else "instructions",
                                       lines, summary, v.source_note))
    steps = []
    for s in hs.steps:
        changes = [HotChangeView(
            kind=c.kind, text=(c.text or "").strip() or fmt.MISSING,
            before_where=c.before.where if c.before else "-", after_where=c.after.where if c.after else "-",
            before=_us(c.before_us), after=_us(c.after_us), change=fmt.signed_duration_us(c.change_us))
            for c in s.changes]
        how = ("lines matched by their source text" if s.matched_by_text
               else "lines matched by file and line")
        steps.append(HotStepView(f"{s.before} -> {s.after}", changes, how))
    return HotspotsView(variants, steps, list(hs.without), hs)
