"""The story of one step: one function per kind of sentence, and ``tell``.

Every kind of sentence has its own function (``duration_sentence``,
``occupancy_sentence`` ...); ``STORY`` lists them in the order a step tells them; ``tell``
runs them over a step's deltas and makes the ``Step``.
"""

from __future__ import annotations

from typing import Callable

from paprof.explain import fmt
from paprof.model.comparison import (BOUND_UNITS, LIMITERS, THRESHOLDS, THROUGHPUT_UNITS, RuleChange,
                                     Step, Thresholds, VariantResult, binding_limits, bound_words)
from paprof.model.numbers import finite, plain
from paprof.model import program
from paprof.explain.causes import cause_sentence, code_path, limit_sentence, next_sentence
from paprof.model.analysis import measure_step
from paprof.model.movers import rule_changes
from paprof.model.gpus import Ceiling
from paprof.explain.cause_words import at_limit_text, cause_text, us_text
from paprof.model.decompose import group


# -- the sentences, one function per kind ---------------------------------------------
# Each takes (before, after, deltas, thresholds) and returns a sentence, a list of them,
# or None when it has nothing to say.

def duration_sentence(before, after, d, t) -> str | None:
    """"duration 4.95 ms -> 3.35 ms: 1.48x faster"."""
    delta = d["duration_us"]
    if delta.change is None:
        return None
    text = f"duration {fmt.duration_us(delta.before)} -> {fmt.duration_us(delta.after)}"
    if not delta.moved:
        return f"{text}: as fast (within {fmt.pct(t.duration_rel * 100)})"
    ratio = delta.before / delta.after
    if ratio >= 1:
        return f"{text}: {fmt.ratio(ratio)} faster"
    return f"{text}: {fmt.ratio(1 / ratio)} slower"


def kernels_sentence(before, after, d, t) -> str | None:
    """For a split variant after the step: "v4 runs 2 kernels, compared as their sum:
    paged_decode_v4_partial 3.92 ms (99.4 %) + paged_decode_v4_merge 22.6 us (0.6 %)"; for
    a program's step, by kernel (``listed_groups``): "compiled runs 191 launches of 13
    kernels, compared as their sum: nvjet_... x32 2.34 ms (22.2 %) + ... + 9 more kernels
    3.28 ms (31.1 %)"."""
    if not after.multi_kernel:
        return None

    def name_of(k):
        return k.kernel

    listed = []
    for label, group in program.listed_groups(after.kernels, name_of):
        us, share = program.summed(group)
        listed.append(f"{label} {fmt.duration_us(us)}" + (f" ({fmt.pct(share * 100)})" if share is not None else ""))
    return (f"{after.label} runs {program.listed_words(after.kernels, name_of)}, compared as their sum: "
            + " + ".join(listed))


def code_path_sentence(before, after, d, t) -> str | None:
    """The code path the variant after the step took, when its run records one (a
    variant that chooses a kernel at launch must say which it ran)."""
    return code_path(after)


def launch_sentence(before, after, d, t) -> str | None:
    """"grid 2,048 -> 512 CTAs, block 32 -> 128 threads, waves per SM 1.94 -> 0.97"."""
    parts = []
    if d["grid_size"].moved and d["grid_size"].change is not None:
        parts.append(f"grid {fmt.count(d['grid_size'].before)} -> {fmt.count(d['grid_size'].after)} CTAs")
    if d["block_size"].moved and d["block_size"].change is not None:
        parts.append(f"block {fmt.count(d['block_size'].before)} -> {fmt.count(d['block_size'].after)} threads")
    w = d["waves_per_sm"]
    if w.moved and w.change is not None and parts:
        parts.append(f"waves per SM {fmt.number(w.before)} -> {fmt.number(w.after)}")
    return ", ".join(parts) or None


def registers_sentence(before, after, d, t) -> str | None:
    """"registers 64 -> 39"."""
    r = d["registers_per_thread"]
    if not r.moved or r.change is None:
        return None
    return f"registers {fmt.count(r.before)} -> {fmt.count(r.after)} per thread"


def shared_memory_sentence(before, after, d, t) -> str | None:
    """"shared memory 0 B -> 16 KiB per block"."""
    s = d["shared_mem_per_block_bytes"]
    if not s.moved or s.change is None:
        return None
    before, after = fmt.bytes_binary(s.before), fmt.bytes_binary(s.after)
    if before == after:  # a few bytes (a flag in shared memory): nothing to weigh
        return None
    return f"shared memory {before} -> {after} per block"



def _limit_words(v: VariantResult) -> str | None:
    names, _ = binding_limits(v)
    return " and ".join(LIMITERS.get(n, (n, None))[0] for n in names) or None


def _limit_text(v: VariantResult) -> str | None:
    words = _limit_words(v)
    _, blocks = binding_limits(v)
    if words is None:
        return None
    return f"{words} ({fmt.count(blocks)} blocks per SM)" if blocks is not None else words


def occupancy_sentence(before, after, d, t) -> list[str]:
    """"theoretical occupancy 50 % -> 41.7 %, now limited by shared memory (5 blocks per SM)"."""
    out = []
    theo = d["theoretical_occupancy_pct"]
    names_before, names_after = binding_limits(before)[0], binding_limits(after)[0]
    changed = bool(names_before) and bool(names_after) and names_before != names_after
    limit_after = _limit_text(after)
    if theo.change is not None and theo.moved:
        text = f"theoretical occupancy {fmt.pct(theo.before)} -> {fmt.pct(theo.after)}"
        if changed and limit_after:
            text += f", now limited by {limit_after}"
        elif limit_after:
            text += f", limited by {limit_after}"
        out.append(text)
    elif changed and limit_after:
        out.append(f"theoretical occupancy {fmt.pct(theo.after)}, now limited by {limit_after} "
                   f"instead of {_limit_words(before)}")
    ach = d["achieved_occupancy_pct"]
    if ach.change is not None and ach.moved:
        out.append(f"achieved occupancy {fmt.pct(ach.before)} -> {fmt.pct(ach.after)}")
    return out


def _conclusion_unit(before: VariantResult, after: VariantResult, d: dict) -> str | None:
    """The throughput column whose sentence carries "the kernel is now X-bound", if any."""
    b, a = plain(before.bottleneck), plain(after.bottleneck)
    if a is None or a == b or a not in BOUND_UNITS:
        return None
    moved = [c for c in BOUND_UNITS[a] if d[c].moved and (d[c].change or 0) > 0]
    if not moved:
        return None
    return max(moved, key=lambda c: d[c].after)


def throughput_sentences(before, after, d, t) -> list[str]:
    """"DRAM throughput 57.4 % -> 84.9 %: the kernel is now dram-bound"."""
    conclude = _conclusion_unit(before, after, d)
    out = []
    for column, unit in THROUGHPUT_UNITS:
        delta = d[column]
        if delta.change is None or not delta.moved:
            continue
        text = f"{unit} throughput {fmt.pct(delta.before)} -> {fmt.pct(delta.after)}"
        if column == conclude:
            text += f": the kernel is now {bound_words(after.bottleneck)}"
        out.append(text)
    return out


def bottleneck_sentence(before, after, d, t) -> str | None:
    """"now latency-bound (was dram-bound): <evidence>" or "still dram-bound"; nothing when a
    throughput sentence already drew the conclusion."""
    b, a = plain(before.bottleneck), plain(after.bottleneck)
    if a is None:
        return None
    if a == b:
        return f"still {bound_words(a)}"
    if _conclusion_unit(before, after, d):
        return None
    text = f"now {bound_words(a)}, was {bound_words(b)}"
    if after.evidence:
        text += f"; {after.evidence[0]}"
    return text


def stall_sentence(before, after, d, t) -> str | None:
    """"top warp stall long scoreboard -> barrier (3.2 cycles per issued instruction)", or
    for the same reason "long scoreboard stalls 8.1 -> 3.2 cycles per issued instruction";
    with the issue rate when it moved."""
    rb, ra = plain(before.get("top_stall_reason")), plain(after.get("top_stall_reason"))
    cyc, issue = d["top_stall_cycles"], d["issue_active_pct"]
    parts = []
    if ra is not None and rb is not None and ra != rb:
        parts.append(f"top warp stall {rb.replace('_', ' ')} -> {ra.replace('_', ' ')} "
                     f"({fmt.number(cyc.after, 2)} cycles per issued instruction)")
    elif ra is not None and ra == rb and cyc.change is not None and cyc.moved:
        parts.append(f"{ra.replace('_', ' ')} stalls {fmt.number(cyc.before, 2)} -> "
                     f"{fmt.number(cyc.after, 2)} cycles per issued instruction")
    if issue.change is not None and issue.moved:
        parts.append(f"schedulers issue in {fmt.pct(issue.before)} -> {fmt.pct(issue.after)} of active cycles")
    return ", ".join(parts) or None


def dram_traffic_sentence(before, after, d, t) -> str | None:
    """"DRAM bytes 4.29 GB -> 2.15 GB", or when neither bytes nor active cycles moved while
    the duration did: "DRAM bytes (2.15 GB) and DRAM active cycles (39.1 M) unchanged: the same
    traffic in less time"."""
    by, cy = d["dram_bytes"], d["dram_active_cycles"]
    parts = []
    if by.change is not None and by.moved:
        parts.append(f"DRAM bytes {fmt.bytes_decimal(by.before)} -> {fmt.bytes_decimal(by.after)}")
    if cy.change is not None and cy.moved:
        parts.append(f"DRAM active cycles {fmt.big(cy.before)} -> {fmt.big(cy.after)}")
    if parts:
        return ", ".join(parts)
    dur = d["duration_us"]
    if by.change is None or cy.change is None or not dur.moved:
        return None
    when = "less" if dur.change < 0 else "more"
    return (f"DRAM bytes ({fmt.bytes_decimal(by.after)}) and DRAM active cycles ({fmt.big(cy.after)}) "
            f"unchanged: the same traffic in {when} time")


def _of_ceiling(gbs: float, ceiling: Ceiling | None) -> str | None:
    if ceiling is None or gbs is None:
        return None
    return fmt.pct(gbs / ceiling.gbs * 100)


def bandwidth_sentence(before, after, d, t) -> str | None:
    """"achieved bandwidth 2.62 TB/s -> 3.87 TB/s, 57.8 % -> 85.4 % of the measured 4.53 TB/s ceiling"."""
    bw = d["achieved_bandwidth_gbs"]
    if bw.change is None or not bw.moved:
        return None
    text = f"achieved bandwidth {fmt.bandwidth_gbs(bw.before)} -> {fmt.bandwidth_gbs(bw.after)}"
    cb, ca = before.ceiling, after.ceiling
    if ca is None:
        return text
    kind = "measured" if ca.measured else "datasheet"
    if cb is not None and cb.tbs == ca.tbs:
        text += (f", {_of_ceiling(bw.before, cb)} -> {_of_ceiling(bw.after, ca)} of the {kind} "
                 f"{fmt.sig(ca.tbs)} TB/s ceiling")
    else:
        text += f", {_of_ceiling(bw.after, ca)} of the {kind} {fmt.sig(ca.tbs)} TB/s ceiling"
    return text


def work_sentence(before, after, d, t) -> str | None:
    """The family's work model over the duration: "useful bandwidth (the work model's
    537 MB) 2.3 -> 4.2 TB/s, 51 % -> 92.7 % of the measured 4.53 TB/s ceiling; useful FLOP
    rate 1.4 -> 2.6 TFLOP/s". Said when both variants have a work model (schema-2 runs)."""
    tbs = d["work_tbs"]
    if tbs.before is None or tbs.after is None:
        return None
    amount = finite(after.get("work_bytes"))
    text = (f"useful bandwidth (the work model's {fmt.bytes_decimal(amount)}) "
            f"{fmt.bandwidth_gbs(tbs.before * 1e3)} -> {fmt.bandwidth_gbs(tbs.after * 1e3)}")
    cb, ca = before.ceiling, after.ceiling
    if ca is not None and cb is not None and cb.tbs == ca.tbs:
        kind = "measured" if ca.measured else "datasheet"
        text += (f", {_of_ceiling(tbs.before * 1e3, cb)} -> {_of_ceiling(tbs.after * 1e3, ca)} "
                 f"of the {kind} {fmt.sig(ca.tbs)} TB/s ceiling")
    fl = d["work_tflops"]
    if fl.before is not None and fl.after is not None:
        text += f"; useful FLOP rate {fmt.flop_rate(fl.before)} -> {fmt.flop_rate(fl.after)}"
    return text


def rule_change_text(c: RuleChange) -> str:
    """One rule change in words: appeared, gone, or its estimated speedup moved."""
    where = f" (in {c.kernel})" if c.kernel else ""
    if c.kind == "appeared":
        est = f" (estimated speedup {fmt.pct(c.after_pct)})" if c.after_pct is not None else ""
        return f"ncu rule appeared: {c.title}{where}{est}"
    if c.kind == "disappeared":
        est = f" (had estimated {fmt.pct(c.before_pct)})" if c.before_pct is not None else ""
        return f"ncu rule gone: {c.title}{where}{est}"
    return (f"ncu rule {c.title}{where}: estimated speedup "
            f"{fmt.pct(c.before_pct)} -> {fmt.pct(c.after_pct)}")


def rule_sentences(before, after, d, t) -> list[str]:
    """One line per ncu rule that appeared, disappeared or whose estimate moved."""
    return [rule_change_text(c) for c in rule_changes(before, after, t)]


STORY: tuple[Callable, ...] = (
    cause_sentence,
    limit_sentence,
    next_sentence,
    duration_sentence,
    code_path_sentence,
    kernels_sentence,
    launch_sentence,
    registers_sentence,
    shared_memory_sentence,
    occupancy_sentence,
    throughput_sentences,
    stall_sentence,
    dram_traffic_sentence,
    bandwidth_sentence,
    work_sentence,
)
"""The sentence functions, in the order a step tells them: the cause, what limits the
variant now and what would move it next first (``causes``), then the details. Rule changes
are listed apart (``Step.rules_*``); ``rule_sentences`` gives them as text for callers that
want them inline. ``bottleneck_sentence`` is not told any more (the limit sentence says
what the label means) but stays for callers."""



def _tells_path(cause: str | None, after: VariantResult) -> bool:
    short = code_path(after, reason=False)
    return bool(cause and short and short in cause)


def tell(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS,
         step: Step | None = None) -> Step:
    """The step before -> after told: its headline, cause, limit, next move and sentences,
    written into ``step`` (the model's numbers of it, ``paprof.model.analysis
    .measure_step``; measured here when None), which is returned."""
    if step is None:
        step = measure_step(before, after, t)
    d = step.deltas
    sentences: list[str] = []
    told: dict = {}
    for fn in STORY:
        said = fn(before, after, d, t)
        told[fn] = said
        if fn is code_path_sentence and said and _tells_path(told.get(cause_sentence), after):
            continue  # the cause already names the code path (after its counters)
        if isinstance(said, str):
            sentences.append(said)
        elif said:
            sentences.extend(said)
    s = step.speedup
    if s is None:
        headline = f"{after.label} vs {before.label}: no duration to compare"
    elif not d["duration_us"].moved:
        headline = f"{after.label} is as fast as {before.label} ({fmt.ratio(s)})"
    elif s >= 1:
        headline = f"{after.label} is {fmt.ratio(s)} faster than {before.label}"
    else:
        headline = f"{after.label} is {fmt.ratio(1 / s)} slower than {before.label}"
    if step.differs:
        headline = f"cross comparison ({step.differs}): {headline}"

    dec = step.decomposition
    said = cause_text(dec) if dec is not None and dec.causes() else None
    if said and told.get(cause_sentence) and all(group(t.key) in ("unit_work", "unit_busy")
                                                  for t in dec.causes()):
        said = None  # no warp-state counters: the moved counters' sentence says more than a unit's work
    if said:
        said = _where_unprofiled(said, dec.causes()[0].key, before, after)
    path = code_path(after, reason=False)
    if said and path:
        said = f"{said} (launch: {path})"  # the cause first, then the launch choice the family recorded
    # A step within the noise has no cause: its sentence says what stayed the same (the
    # code path, the work), as before
    if said and said != told.get(cause_sentence):
        sentences.insert(0, said)  # the cause first; the traffic sentence stays as a detail
        said_path = told.get(code_path_sentence)
        if path and said_path in sentences and said_path != told.get(cause_sentence):
            sentences.remove(said_path)  # the cause opens with the code path: once
        if dec.limit is not None:  # DRAM at its limit in both: the same difference again
            sentences.insert(1, f"{at_limit_text(dec.limit)} (the same {us_text(dec.delta_us)} "
                                "as bytes over the bandwidth reached)")
    step.cause = said or told.get(cause_sentence)
    step.traffic = told.get(cause_sentence)
    step.limit = told.get(limit_sentence)
    step.next_move = told.get(next_sentence)
    step.headline = headline
    step.bottleneck_before = plain(before.bottleneck)
    step.bottleneck_after = plain(after.bottleneck)
    step.sentences = sentences
    return step


def _where_unprofiled(said: str, key: str, before, after) -> str:
    """A cause (its first term's ``key``) of kernels gone (new) said with the other
    program's unprofiled kernels: a kernel gone may have been fused into one the
    top-kernel route timed and skipped."""
    if key not in ("kernel-", "kernel+"):
        return said
    other = after if key == "kernel-" else before
    skipped = program.unprofiled(other)
    if skipped is None:
        return said
    n, share = skipped
    return (f"{said} ({other.label} has {n} kernel{'s' if n != 1 else ''} timed but not "
            f"profiled, {100 * share:.1f} % of its time, which may now do that work: "
            "--all profiles every kernel)")
