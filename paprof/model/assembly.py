"""Assembling a comparison: the loader's rows -> ``VariantResult`` objects.

``assemble(df, summed, order)`` picks one launch per run, puts the variants in the order
the user named them and makes their labels unique; ``paprof.explain.compare`` tells
every step of them and checks the provenance.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from paprof.model.bottleneck import tie
from paprof.model.comparison import (EXTRA_COLUMNS, KEPT_COLUMNS, METRIC_COLUMNS, STALL_COLUMNS,
                                     KernelPart, RuleHit, VariantResult)
from paprof.model.numbers import finite, plain
from paprof.model.gpus import ceiling_for
from paprof.read.record import RunRecord, as_record
from paprof.read.resolve import spec_items
from paprof.errors import UserError


def _norm_path(p) -> str:
    return os.path.realpath(str(p)) if p is not None else ""


def _rules_of(rows: list[dict]) -> dict[str, RuleHit]:
    """Each rule of a variant's kernel rows, its estimate weighted by each kernel's share
    of the summed duration (one row: its own estimate)."""
    fired: dict[str, list[tuple[dict, dict]]] = {}
    for row in rows:
        best: dict[str, dict] = {}  # a rule can fire several times in one kernel: its highest
        for r in row.get("rules") or ():
            rid = str(r.get("id") or r.get("title") or "")
            sp = finite(r.get("speedup_pct"))
            if rid and (rid not in best or (sp if sp is not None else -1) > (finite(best[rid].get("speedup_pct")) or -1)):
                best[rid] = r
        for rid, r in best.items():
            fired.setdefault(rid, []).append((row, r))
    durations = [finite(row.get("duration_us")) for row in rows]
    total = sum(d for d in durations if d) if all(durations) else None
    hits: dict[str, RuleHit] = {}
    for rid, found in fired.items():
        parts = []
        for row, r in found:
            dur = finite(row.get("duration_us"))
            share = dur / total if (len(rows) > 1 and total and dur) else (1.0 if len(rows) == 1 else None)
            parts.append((str(row.get("kernel") or ""), finite(r.get("speedup_pct")), share, r))
        known = [(sp * share, k) for k, sp, share, _ in parts if sp is not None and share is not None]
        if len(rows) == 1 or not known or any(share is None for _, _, share, _ in parts):
            # one kernel, or shares unknown: the highest estimate, as ncu gives it
            kernel, sp, _, r = max(parts, key=lambda p: p[1] if p[1] is not None else -1)
            speedup = sp
        else:
            speedup = sum(w for w, _ in known)
            kernel = max(known)[1]
            r = next(p[3] for p in parts if p[0] == kernel)
        per_kernel = [(k, sp, share) for k, sp, share, _ in parts] if len(rows) > 1 else []
        hits[rid] = RuleHit(rid, str(r.get("title") or rid), str(r.get("type") or ""),
                            str(r.get("message") or ""), speedup, kernel, per_kernel)
    return hits


def ceiling_shares(values: dict, ceiling) -> dict:
    """The variant's bandwidths against the ceiling it is held to, computed once here for
    every reader: ``bandwidth_of_ceiling_pct`` (achieved DRAM bandwidth), ``work_gbs`` and
    ``work_of_ceiling_pct`` (the work model's useful bandwidth)."""
    bw, work = finite(values.get("achieved_bandwidth_gbs")), finite(values.get("work_tbs"))
    gbs = ceiling.gbs if ceiling else None
    return {
        "bandwidth_of_ceiling_pct": bw / gbs * 100 if bw is not None and gbs else None,
        "work_gbs": work * 1e3 if work is not None else None,
        "work_of_ceiling_pct": work * 1e3 / gbs * 100 if work is not None and gbs else None,
    }


def _variant_result(summed: dict, kernels: list[dict]) -> VariantResult:
    values = {c: plain(summed.get(c)) for c in KEPT_COLUMNS}
    sidecar = as_record(summed.get("sidecar"))
    values["duration_us_event"] = finite((sidecar or {}).get("duration_us_event"))
    gpu = plain(summed.get("gpu"))
    ceiling = ceiling_for(gpu, sidecar)
    values.update(ceiling_shares(values, ceiling))
    total = finite(values["duration_us"])
    parts = []
    for k in kernels:
        dur = finite(k.get("duration_us"))
        parts.append(KernelPart(
            kernel=str(k.get("kernel")),
            duration_us=dur,
            share=(dur / total) if (dur is not None and total) else None,
            grid_size=finite(k.get("grid_size")),
            block_size=finite(k.get("block_size")),
            bottleneck=plain(k.get("bottleneck")),
            values={c: plain(k.get(c)) for c in KEPT_COLUMNS},
        ))
    bottleneck = plain(summed.get("bottleneck"))
    evidence = plain(summed.get("bottleneck_evidence"))
    if bottleneck is None and kernels:
        longest = max(kernels, key=lambda k: finite(k.get("duration_us")) or 0)
        bottleneck = plain(longest.get("bottleneck"))
        evidence = plain(longest.get("bottleneck_evidence"))
    rules = _rules_of(kernels) if any("rules" in k for k in kernels) else _rules_of([summed])
    gpu = plain(summed.get("gpu"))
    variant = str(plain(summed.get("variant")) or "?")
    idea = (sidecar or {}).get("idea")  # a foreign report has no sidecar, so no idea line
    return VariantResult(
        label=variant,
        variant=variant,
        family=plain(summed.get("family")),
        shape=plain(summed.get("shape")),
        gpu=gpu,
        report_path=plain(summed.get("report_path")),
        values=values,
        kernels=parts,
        bottleneck=bottleneck,
        evidence=list(evidence or []),
        rules=rules,
        sidecar=sidecar,
        idea=idea,
        ceiling=ceiling,
        tie=tie(summed) if bottleneck == plain(summed.get("bottleneck")) else None,
        provenance=(sidecar or RunRecord.foreign(label=variant)).labelled(
            variant, gpu=gpu, shape=plain(summed.get("shape")),
            report_path=plain(summed.get("report_path"))),
        spread=dict(summed.get("_spread") or {}),
        launches=int(summed.get("_launches") or 1),
    )


def _unique_labels(variants: list[VariantResult]) -> None:
    """Make labels unique: add the shape, then the GPU, then a counter where ids repeat."""
    for extra in ("shape", "gpu", None):
        seen: dict[str, int] = {}
        for v in variants:
            seen[v.label] = seen.get(v.label, 0) + 1
        clashes = {label for label, n in seen.items() if n > 1}
        if not clashes:
            return
        counter: dict[str, int] = {}
        for v in variants:
            if v.label not in clashes:
                continue
            if extra is None:
                counter[v.label] = counter.get(v.label, 0) + 1
                v.label = f"{v.label} #{counter[v.label]}"
            elif getattr(v, extra):
                v.label = f"{v.label} [{getattr(v, extra)}]"


def _records(frame) -> list[dict]:
    return [dict(r) for r in frame.to_dict(orient="records")]


SPREAD_COLUMNS = (*METRIC_COLUMNS, *EXTRA_COLUMNS, *STALL_COLUMNS)
"""The columns a run of several launches shows as median +/- half-range."""


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def launch_spread(members: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """Over several launches of one run: each numeric column's median and half-range
    ((max - min) / 2). A column some launch lacks, or that is not a number, is left out."""
    medians, spreads = {}, {}
    for c in SPREAD_COLUMNS:
        raw = [m.get(c) for m in members]
        if any(isinstance(plain(x), (str, bool)) for x in raw):
            continue
        xs = [finite(x) for x in raw]
        if not xs or any(x is None for x in xs):
            continue
        medians[c] = _median(xs)
        spreads[c] = (max(xs) - min(xs)) / 2
    return medians, spreads


def _one_launch_each(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """Keep one row per (variant, shape, report): over several steps (:mod:`paprof.
    model.steps`), the one of median duration, its numeric columns replaced by their
    medians over the steps and their half-ranges kept under ``_spread`` (``_launches``:
    how many steps there were).

    The comparison shows each number as median +/- half-range and says so. The kernels,
    the rules and the words (bottleneck, limiter) are the median-duration step's.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = tuple(plain(row.get(c)) for c in ("variant", "shape", "report_path"))
        groups.setdefault(key, []).append(row)
    kept, notes = [], []
    for key, members in groups.items():
        if len(members) == 1:
            kept.append(members[0])
            continue
        ranked = sorted(members, key=lambda r: finite(r.get("duration_us")) or 0.0)
        choice = dict(ranked[(len(ranked) - 1) // 2])
        medians, spreads = launch_spread(members)
        choice.update(medians)
        choice["_spread"], choice["_launches"] = spreads, len(members)
        kept.append(choice)
        notes.append(f"{key[0]}: {len(members)} profiled steps in "
                     f"{Path(str(key[2])).name if key[2] else 'the report'}; numbers are the median "
                     f"over the steps ± half their range; kernels, rules and the verdict are "
                     f"step {plain(choice.get('step'))}'s, the one of median duration.")
    return kept, notes


def differences(variants: list[VariantResult]) -> list[str]:
    """What makes the runs not comparable, one phrase each: their parameters differ
    ("shapes: v6 at b1_..., flashinfer at b64_..."), or their GPUs do. A run that does
    not say (a foreign report has no parameters) differs in nothing it does not say."""
    out = []
    for what, key in (("parameters", "shape"), ("GPUs", "gpu")):
        held = [(v.label, getattr(v, key)) for v in variants if getattr(v, key)]
        if len({value for _label, value in held}) > 1:
            out.append(f"{what} differ: " + ", ".join(f"{label} at {value}" for label, value in held))
    return out


def pair_differences(a: VariantResult, b: VariantResult) -> str:
    """What differs between two compared runs, shortest first: "dtype fp32 -> bf16",
    "GPU NVIDIA A100 -> NVIDIA H100"; "" when nothing does."""
    out = []
    if a.shape and b.shape and a.shape != b.shape:
        sa, sb = spec_items(a.shape), spec_items(b.shape)
        keys = [k for k in dict.fromkeys([*sa, *sb]) if sa.get(k) != sb.get(k)]
        out += [f"{k} {sa.get(k, '-')} -> {sb.get(k, '-')}" for k in keys] or [f"{a.shape} -> {b.shape}"]
    if a.gpu and b.gpu and a.gpu != b.gpu:
        out.append(f"GPU {a.gpu} -> {b.gpu}")
    return ", ".join(out)


def assemble(df, summed=None, order: Iterable | None = None,
             cross: bool = False) -> tuple[list[VariantResult], list[str], list[str]]:
    """The variants in the loader's frame ``df``, in order, with their labels made unique;
    how they differ (parameters, GPU: refused unless ``cross``) and the notes on the runs
    of several launches.

    ``summed`` is ``variant_rows(df)`` (computed here when None). ``order`` lists report
    paths in the order the user named them; a report holding several variants contributes
    them in the frame's order. Without ``order`` the frame's order is kept.
    """
    if summed is None:
        from paprof.model.load import variant_rows

        summed = variant_rows(df)
    kernel_rows = _records(df)
    summed_rows, launch_notes = _one_launch_each(_records(summed))
    if order is not None:
        rank = {}
        for i, p in enumerate(order):
            rank.setdefault(_norm_path(p), i)
        summed_rows = sorted(
            enumerate(summed_rows),
            key=lambda ir: (rank.get(_norm_path(ir[1].get("report_path")), len(rank)), ir[0]),
        )
        summed_rows = [r for _, r in summed_rows]

    def same(k: dict, s: dict) -> bool:
        return all(plain(k.get(c)) == plain(s.get(c)) for c in ("variant", "shape", "report_path", "step"))

    variants = [_variant_result(s, [k for k in kernel_rows if same(k, s)] or [s]) for s in summed_rows]
    apart = differences(variants)
    if apart and not cross:
        raise UserError("the runs are not comparable (" + "; ".join(apart) + "): choose one "
                        "shape with --shape, or pass --cross to compare them anyway")
    _unique_labels(variants)
    for v in variants:
        v.provenance = replace(v.provenance, label=v.label)
    return variants, apart, launch_notes


def family_notes(variants: list[VariantResult]) -> list[str]:
    """The families' own sentences for the story (``Family.notes``, kept in the sidecars),
    once each: "softmax: the read ceiling is a read-only kernel's ..."."""
    seen: dict[str, None] = {}
    for v in variants:
        side = v.sidecar or {}
        for note in side.get("family_notes") or ():
            if isinstance(note, str) and note.strip():
                seen.setdefault(f"{side.get('family') or v.family}: {note.strip()}")
    return list(seen)

