"""The cause of a step in an engineer's words: the mechanism first, with the counter that
carries it, then the size of its term of the time decomposition (``decompose``).

A cause line reads::

    uncoalesced stores: sectors per global store request 32 -> 4 (memory waits -301 us,
    52 % of -576 us); partly offset by more instructions +20 us; then ...

* **The mechanism** is named from the counters of the term's own subsystem that moved the
  term's way (``Evidence.along``): for the instruction count, the instruction classes that
  moved (InstructionStats' per-opcode counts: "tensor-core MMA instead of FP32 math"); for
  memory waits, the side and the space (loads or stores, global, local, atomics, which
  level served them); for the MIO queue, its real users (shared memory, or special
  functions and conversions on the XU pipe); for kernels that appear or vanish, what their
  bytes and instructions were. Where a report lacks the counter that would name it (no
  InstructionStats before ncu recorded the per-opcode counts), the line says what is missing.
* **The size** is the term's microseconds and its share of the difference; a term larger
  than the whole difference gives no share: the terms that went the other way follow as
  "partly offset by".
* Terms are never offered evidence that moved the other way (a pipe getting busier is
  no evidence of fewer instructions).
"""

from __future__ import annotations

import math
import re

from paprof.explain import fmt
from paprof.model.decompose import (
    AtLimit,
    Decomposition,
    Evidence,
    GROUP_WORDS,
    MISSING_SECTIONS,
    Part,
    Term,
    group,
)

#: A counter moved "far" past this ``Evidence.change`` (a ratio of 3, 27.5 points).
FAR = 1.1
#: An offsetting mechanism is named when it is at least this share of the difference.
OFFSET_SHARE = 0.1
#: Compute classes: one of these replacing another is said as "X instead of Y".
_COMPUTE = ("fp32", "fp16", "tensor", "gmma", "fp64", "xu", "conversion")


def _num(x: float, unit: str = "") -> str:
    if unit.startswith("%"):
        return fmt.pct(x) + unit[1:]
    if unit == "B":
        return fmt.bytes_decimal(x)
    if unit == "Hz":
        return f"{x / 1e6:.0f} MHz"
    if unit == "us":
        return fmt.duration_us(x)
    text = fmt.big(x) if abs(x) >= 10000 else fmt.number(x)
    return text + (f" {unit}" if unit else "")


def us_text(us: float) -> str:
    a = abs(us)
    if a >= 1000:
        return f"{us / 1000:+.3g} ms"
    return f"{us:+.3g} us"


def evidence_text(ev: Evidence) -> str:
    b = "none" if ev.before is None else _num(ev.before, ev.unit)
    a = "none" if ev.after is None else _num(ev.after, ev.unit)
    return f"{ev.label} {b} -> {a}"


def at_limit_text(lim: AtLimit) -> str:
    """``DRAM at its limit (88 % -> 91 % of peak): 2.1x fewer bytes -110 us; a higher
    bandwidth -8 us``."""
    ratio = lim.bytes_after / lim.bytes_before
    moved = (f"{1 / ratio:.3g}x fewer bytes" if ratio < 1 else f"{ratio:.3g}x the bytes")
    reach = "a higher bandwidth" if lim.bandwidth_us < 0 else "a lower bandwidth"
    return (f"{lim.unit} at its limit ({lim.pct_before:.0f} % -> {lim.pct_after:.0f} % of peak): "
            f"{moved} {us_text(lim.bytes_us)}; {reach} {us_text(lim.bandwidth_us)}")


def shown_evidence(t: Term, limit: int = 3) -> list[Evidence]:
    """The counters shown for a term: those of its own subsystem that moved the term's
    way (``Evidence.along``), those that moved far first, each group in the order the
    term's counters are listed (``decompose.EVIDENCE``: the mechanism's own counters
    first), at most ``limit``."""
    stores_apart = group(t.key) == "memory" and not _store_side(t)
    along = [(i, e) for i, e in enumerate(t.evidence) if e.along(t.us)
             and not (stores_apart and e.label in _STORE_LABELS)]
    return [e for _i, e in sorted(along, key=lambda ie: (ie[1].change < FAR, ie[0]))][:limit]


# -- the mechanism of each term --------------------------------------------------------------
def _count(x: float) -> str:
    return _num(x) if x else "0"


def _part_text(p: Part) -> str:
    return f"{p.words} {_count(p.before)} -> {_count(p.after)}"


def _along(t: Term, label: str) -> Evidence | None:
    for e in t.evidence:
        if e.label == label and e.along(t.us):
            return e
    return None


def _instructions(t: Term) -> str:
    fewer = t.us < 0
    along = [p for p in t.parts if p.us * t.us > 0]  # the classes that moved the term's way
    named = along[:1] + [p for p in along[1:3] if abs(p.us) >= 0.3 * abs(along[0].us)]
    # a compute class that grew the other way took the work of one that shrank: the
    # math moved to another unit ("tensor-core MMA instead of FP32 math")
    for old in (p for p in along[:3] if p.key in _COMPUTE):
        for p in t.parts:
            grown = p.after > 2 * p.before if fewer else p.before > 2 * p.after
            size = p.after if fewer else p.before
            # (from nothing, any count: a tensor-core instruction does hundreds of FMAs)
            if (p.key in _COMPUTE and p.key != old.key and p.us * t.us <= 0 and grown
                    and (size >= 1e-3 * max(old.before, old.after) or not (p.before if fewer else p.after))):
                new, gone = (p, old) if fewer else (old, p)
                said = f"{new.words} instead of {gone.words}: {_part_text(gone)}, {_part_text(new)}"
                rest = [x for x in named if x is not old]
                return said + (f"; {'fewer' if fewer else 'more'} " + ", ".join(_part_text(x) for x in rest)
                               if rest else "")
    tpi = _along(t, "threads per instruction")
    if tpi is not None and tpi.change >= math.log(1.3):
        return (f"{'converged' if fewer else 'divergent'} warps: {evidence_text(tpi)} "
                f"({'fewer' if fewer else 'more'} instructions for the same work)")
    wide = _along(t, "bytes per global load instruction")
    asked = next((e for e in t.evidence if e.label == "bytes the global loads requested"), None)
    same_bytes = asked is not None and asked.before and asked.after and abs(math.log(asked.after / asked.before)) < math.log(1.5)
    if wide is not None and wide.change >= math.log(1.5) and same_bytes:
        loads = _along(t, "global load instructions")
        return (f"{'wider' if fewer else 'narrower'} loads: {evidence_text(wide)}"
                + (f", {evidence_text(loads)}" if loads is not None else ""))
    if not t.parts:
        ratio = f"{t.after / t.before:.3g}x " if t.before and t.after else ""
        return (f"instructions issued {ratio}(no instruction class: the reports lack "
                "InstructionStats' per-opcode counts)")
    if not along:
        return f"instructions issued {t.after / t.before:.3g}x" if t.before and t.after else "instructions issued"
    if along[0].key in ("local_load", "local_store"):
        local = [p for p in along if p.key in ("local_load", "local_store")]
        return (f"{'fewer' if fewer else 'more'} local-memory accesses (spills or run-time "
                "indexed arrays): " + ", ".join(_part_text(p) for p in local))
    return f"{'fewer' if fewer else 'more'} instructions: " + ", ".join(_part_text(p) for p in named)


#: Stall reasons a store can cause (a store is not waited for on the long scoreboard: its
#: warp waits only for room in the LG queue, for a fence, or for its stores to drain).
_STORE_STALLS = ("stall:lg_throttle", "stall:drain", "stall:membar")


#: The counters of the store side of memory waits.
_STORE_LABELS = ("sectors per global store request", "L2 sectors written")


def _store_side(t: Term) -> bool:
    """Whether a memory-wait term's stalls are ones a store can cause (lg throttle,
    drain, membar, as a fifth of it or more)."""
    return any(m.key in _STORE_STALLS for m in (t.members or [t]) if abs(m.us) >= 0.2 * abs(t.us))


def _memory(t: Term) -> str | None:
    faster = t.us < 0
    store_side = _store_side(t)
    loads = _along(t, "sectors per global load request")
    stores = _along(t, "sectors per global store request") if store_side else None
    if loads is not None and stores is not None:
        return (f"{'coalesced' if faster else 'uncoalesced'} loads and stores: "
                f"{evidence_text(loads)}, {evidence_text(stores)}")
    for label, words in (
            ("local-memory loads and stores (LDL, STL)", "local memory (spills or run-time indexed arrays)"),
            ("local-memory (spill) instructions", "local memory (register spills)"),
            ("global atomic requests", "fewer atomics" if faster else "contended atomics"),
            *((("sectors per global store request", "coalesced stores" if faster else "uncoalesced stores"),)
              if store_side else ()),
            ("sectors per global load request", "coalesced loads" if faster else "uncoalesced loads"),
    ):
        e = _along(t, label)
        if e is not None:
            more = [x for x in shown_evidence(t, 3) if x is not e][:1]
            return f"{words}: " + ", ".join(evidence_text(x) for x in [e, *more])
    l2, dram = _along(t, "L2 hit rate"), _along(t, "DRAM bytes")
    if l2 is not None and dram is not None:
        return (f"{'L2 hits instead of DRAM' if faster else 'DRAM instead of L2 hits'}: "
                f"{evidence_text(l2)}, {evidence_text(dram)}")
    l1 = _along(t, "L1 hit rate")
    if l1 is not None:
        return f"{'L1 hits' if faster else 'L1 misses'}: {evidence_text(l1)}"
    same = _same_loads(t)
    if same is not None and any(m.key == "stall:long_scoreboard" for m in (t.members or [t])):
        # the same loads and bytes, waited on less: the waits overlapped (Little's law)
        return (f"{'more' if faster else 'fewer'} loads in flight: the same {evidence_text(same)}, "
                f"long-scoreboard waits {_cycles(t, 'long_scoreboard')}")
    # the traffic that moved most, with the next
    traffic = {"DRAM bytes": "less DRAM traffic", "L2 -> SM bytes": "less L2 -> SM traffic",
               **({"L2 sectors written": "less store traffic"} if store_side else {}),
               "global load requests": "fewer round trips to memory"}
    moved = sorted((e for e in t.evidence if e.label in traffic and e.along(t.us)),
                   key=lambda e: -e.change)
    if moved:
        lead = moved[0]
        words = traffic[lead.label]
        if not faster:
            words = words.replace("less ", "more ", 1).replace("fewer ", "more ", 1)
        return (f"{words}: "
                + ", ".join(evidence_text(e) for e in moved[:2]))
    return None


def _same_loads(t: Term) -> Evidence | None:
    """The global load requests, when they and every traffic counter of the term stayed
    within 15 % (nothing moved but the waits); None otherwise."""
    requests = next((e for e in t.evidence if e.label == "global load requests"), None)
    if requests is None or requests.before is None or requests.moved:
        return None
    if any(e.moved for e in t.evidence if e.label in ("DRAM bytes", "L2 -> SM bytes",
                                                      "sectors per global load request")):
        return None
    return requests


def _cycles(t: Term, reason: str) -> str:
    m = next((m for m in (t.members or [t]) if m.key == f"stall:{reason}"), None)
    if m is None or m.before is None or m.after is None:
        return us_text(t.us)
    return f"{m.before:.3g} -> {m.after:.3g} cycles per instruction"


def _shared(t: Term) -> str | None:
    faster = t.us < 0
    for label in ("shared-memory wavefronts per load", "shared-memory bank conflicts"):
        e = _along(t, label)
        if e is not None:
            return f"{'fewer' if faster else 'more'} shared-memory bank conflicts: {evidence_text(e)}"
    xu = _along(t, "special-function and conversion instructions (MUFU, I2F, F2I)")
    shared = _along(t, "shared-memory instructions")
    if xu is not None and (shared is None or xu.change >= shared.change):
        return (f"{'fewer' if faster else 'more'} special functions and conversions queued "
                f"for the XU pipe (MIO): {evidence_text(xu)}")
    if shared is not None:
        return f"{'fewer' if faster else 'more'} shared-memory accesses: {evidence_text(shared)}"
    constant = _along(t, "constant loads (LDC)")
    if constant is not None:  # indexed constant loads go through the MIO queue too
        return (f"{'fewer' if faster else 'more'} constant-cache loads queued for MIO: "
                f"{evidence_text(constant)}")
    return None


def _kernels(t: Term) -> str:
    if t.members:  # gone and new together: kernels fused or split
        gone = next((m for m in t.members if m.key == "kernel-"), None)
        new = next((m for m in t.members if m.key == "kernel+"), None)
        if gone is not None and new is not None:
            fused = len(new.kernels) < len(gone.kernels)
            head = (f"{len(gone.kernels)} kernels {'fused into' if fused else 'split into'} "
                    f"{len(new.kernels)} ({_names(gone)} -> {_names(new)}"
                    f"{_transposes(gone, 'before')}{_transposes(new, 'after')})")
            moved = [f"{words} {_num(gone.work[k], unit)} -> {_num(new.work[k], unit)}"
                     for k, words, unit in (("dram_bytes", "DRAM bytes", "B"),
                                            ("instructions", "warp instructions", ""))
                     if k in gone.work and k in new.work]
            if fused and moved and "dram_bytes" in gone.work and "dram_bytes" in new.work \
                    and new.work["dram_bytes"] < gone.work["dram_bytes"]:
                head += ": the intermediates' round trip through DRAM is gone"
            return head + (f" ({', '.join(moved)})" if moved else "")
    gone = t.key == "kernel-"
    what = [f"{_num(t.work[k], unit)}{words}" for k, words, unit in
            (("dram_bytes", " of DRAM traffic", "B"), ("instructions", " warp instructions", ""))
            if k in t.work]
    doing = (f": {' and '.join(what)} {'no longer' if gone else 'now'} done" if what else "")
    n, side = len(t.kernels), 'gone' if gone else 'new'
    if t.work.get("layout_transposes") == n:
        return (f"{n} layout transpose{'s' if n != 1 else ''} {side} ({_names(t)}: "
                f"{TRANSPOSE_SHAPE}){doing}")
    return f"{n} kernel{'s' if n != 1 else ''} {side} ({_names(t)}{_transposes(t)}){doing}"


TRANSPOSE_SHAPE = "each element through a shared-memory tile, bytes written = bytes read"
"""Why a kernel is called a layout transpose (``paprof.model.kernel_kinds``): said with it,
so that a reader can check the claim against the kernel's counters."""


def _transposes(t: Term, side: str = "") -> str:
    """``; 2 of them layout transposes (...)`` where some of a term's kernels are;
    ``side`` (``before``/``after``) names the side of a fusion or split."""
    k, n = int(t.work.get("layout_transposes") or 0), len(t.kernels)
    if not k:
        return ""
    of = f"of those {side}" if side else "of them"
    if k == n:
        what = "a layout transpose" if n == 1 else "all layout transposes"
        what = f"{what} {side}".rstrip() if side else what
    else:
        what = f"{k} {of} {'a layout transpose' if k == 1 else 'layout transposes'}"
    return f"; {what} ({TRANSPOSE_SHAPE})"


def _names(t: Term) -> str:
    return ", ".join(t.kernels[:3]) + (f" and {len(t.kernels) - 3} more" if len(t.kernels) > 3 else "")


def _pipes(t: Term) -> str | None:
    faster = t.us < 0
    members = t.members or [t]
    lead = members[0].key.split(":", 1)[-1]
    if lead == "math_pipe_throttle":
        busy = [e for e in shown_evidence(t, 2) if e.unit.startswith("%")]
        if busy:
            return (f"{'a math pipe no longer at its limit' if faster else 'a math pipe at its limit'}: "
                    + ", ".join(evidence_text(e) for e in busy))
    if lead == "wait" and t.before is not None and t.after is not None:
        return (f"{'more' if faster else 'less'} independent work between dependent instructions "
                f"(fixed-latency waits): {t.before:.3g} -> {t.after:.3g} cycles per instruction")
    return None


def mechanism(t: Term) -> str:
    """The mechanism a term acts through, with its counters: the words a cause line opens
    with."""
    g = group(t.key)
    said = None
    if g == "instructions":
        return _instructions(t)
    if g == "kernels":
        return _kernels(t)
    if g in ("unit_work", "unit_busy"):
        return _unit(t)
    if g == "memory":
        said = _memory(t)
    elif g == "shared":
        said = _shared(t)
    elif g == "pipes":
        said = _pipes(t)
    elif g == "barrier":
        e = _along(t, "barrier instructions (BAR)") or _along(t, "barriers per block")
        if e is not None:
            said = f"{'fewer' if t.us < 0 else 'more'} barriers: {evidence_text(e)}"
    elif g == "warps" and t.before and t.after:
        ev = shown_evidence(t, 1)
        said = (f"{'more' if t.us < 0 else 'fewer'} warps in flight: per scheduler "
                f"{t.before:.3g} -> {t.after:.3g}" + (f" ({evidence_text(ev[0])})" if ev else ""))
    elif g == "idle":
        wave, launches = _along(t, "SM time a partial last wave leaves idle"), _along(t, "launches")
        waves, grid = _along(t, "waves per SM"), next((e for e in t.evidence if e.label == "grid size"), None)
        small = waves is not None and min(waves.before, waves.after) < 1.0
        if launches is not None:
            said = f"{'fewer' if t.us < 0 else 'more'} kernel launches: {evidence_text(launches)}"
        elif small:
            said = (f"{'a grid that fills' if t.us < 0 else 'a grid too small for'} the GPU: "
                    f"{evidence_text(waves)}" + (f", {evidence_text(grid)}" if grid is not None and grid.moved else ""))
        elif wave is not None:
            said = f"{'no' if t.us < 0 else 'a'} partial last wave: {evidence_text(wave)}"
        elif t.before and t.after:
            said = (f"schedulers idle {max(0.0, 1 - 1 / t.before):.0%} -> "
                    f"{max(0.0, 1 - 1 / t.after):.0%} of the time")
    if said is None:
        ev = shown_evidence(t, 2)
        said = _label(t) + (f": {', '.join(evidence_text(e) for e in ev)}" if ev else "")
    return said


def _unit(t: Term) -> str:
    """A pair without stall or instruction counters, by its busiest unit (``decompose``'s
    fallback): its work or its throughput, and what the reports lack to say more."""
    (ev,) = t.evidence[:1] or (None,)
    unit = t.label.rsplit(" ", 1)[0]
    if t.key == "unit:work":
        ratio = t.after / t.before if t.before else None
        how = f" ({1 / ratio:.3g}x less)" if ratio and ratio < 1 else (f" ({ratio:.3g}x more)" if ratio else "")
        said = f"{'less' if t.us < 0 else 'more'} {unit} work: {evidence_text(ev)}{how}"
    else:
        said = f"{unit} {'busier' if t.us < 0 else 'less busy'}: {evidence_text(ev)}"
    return said


def _label(t: Term) -> str:
    """The term's own name: the mechanism group's words and, for stall terms, the
    reasons that carry it."""
    if t.members and t.before is not None and t.after is not None:
        big = [m for m in t.members if abs(m.us) >= 0.1 * abs(t.us)][:3] or t.members[:1]
        names = ", ".join(m.key.split(":", 1)[-1].replace("_", " ") for m in big)
        return f"{t.label} ({names})"
    if t.key == "instructions":
        return "instructions issued"
    return t.label


def size_text(t: Term) -> str:
    """The term's name and size: "memory waits (long scoreboard) -301 us"."""
    if t.key.startswith("stall:") and not t.members and t.before is not None and t.after is not None:
        return f"{_label(t)} {t.before:.3g} -> {t.after:.3g} cycles per instruction {us_text(t.us)}"
    name = ("instructions issued" if t.key == "instructions" else
            GROUP_WORDS.get(group(t.key), _label(t)) if t.key.startswith("kernel") else _label(t))
    return f"{name} {us_text(t.us)}"


def term_text(t: Term, limit: int = 3) -> str:
    """One term as words: its mechanism with its counters, then its size in parentheses:
    "coalesced loads: sectors per global load request 32 -> 4 (memory waits -301 us)"."""
    said = mechanism(t)
    return size_text(t) if said == _label(t) else f"{said} ({size_text(t)})"


def _short(t: Term) -> str:
    """An offsetting term in a few words: "more instructions +20 us"."""
    words = {"instructions": "instructions", "memory": "memory waits",
             "shared": "shared-memory and MIO waits", "barrier": "barrier waits",
             "pipes": "dependency and pipe waits", "warps": "warps in flight",
             "idle": "idle schedulers", "clock": "the SM clock", "kernels": "kernels new or gone",
             "issue": "issue"}.get(group(t.key), t.label)
    if group(t.key) == "instructions":
        lead = next((p for p in t.parts if p.us * t.us > 0), None)
        what = f" ({_part_text(lead)})" if lead is not None else ""
        return f"{'more' if t.us > 0 else 'fewer'} instructions{what} {us_text(t.us)}"
    if group(t.key) in ("memory", "shared", "barrier", "pipes"):
        return f"{'longer' if t.us > 0 else 'shorter'} {words} {us_text(t.us)}"
    if group(t.key) == "unit_busy":
        return f"{'lower' if t.us > 0 else 'higher'} {t.label} {us_text(t.us)}"
    return f"{words} {us_text(t.us)}"


def _one_counter(text: str) -> str:
    """A mechanism's words cut after its first counter: "fewer instructions: FP32 math
    (FFMA, FADD, FMUL) 302 M -> 144 M" (commas inside parentheses do not count)."""
    head = text.find(": ")
    if head < 0:
        return text
    depth = 0
    for i in range(head + 2, len(text) - 1):
        c = text[i]
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and text[i:i + 2] in (", ", "; "):
            return text[:i]
    return text


def first_cause(dec: Decomposition, brief: bool = False) -> str | None:
    """The first cause with its size and share, and what offsets it: one clause.
    ``brief``: its first counter alone and the largest offset only (the verdict table)."""
    causes = dec.causes()
    if not causes:
        return None
    first, delta = causes[0], dec.delta_us
    share = first.us / delta if delta else 0.0
    size = size_text(first)
    said = mechanism(first)
    if brief:  # one counter, the classes without their opcode lists
        said = re.sub(r" \((?:[A-Z][A-Z0-9]+(?:, )?)+\)", "", _one_counter(said))
    if said == _label(first):
        said, size = size, ""
    text = (f"{said} ({size + ', ' if size else ''}{share:.0%} of the {us_text(delta)})" if share <= 1.0
            else f"{said} ({size + '; ' if size else ''}net {us_text(delta)})")
    offsets = [t for t in dec.offsets() if abs(t.us) >= OFFSET_SHARE * abs(delta)]
    if offsets:
        text += "; partly offset by " + " and ".join(_short(t) for t in offsets[:1 if brief else 2])
    return text


def cause_text(dec: Decomposition) -> str | None:
    """The cause first: the largest term's mechanism with its counters and size, what
    offsets it, then the next ones that matter; None where the difference is within the
    noise or nothing explains it."""
    causes = dec.causes()
    if not causes:
        if abs(dec.delta_us) <= dec.noise_us:
            return (f"within the noise ({us_text(dec.delta_us)} against a noise of "
                    f"{abs(dec.noise_us):.3g} us): no cause is named")
        return None
    text = first_cause(dec)
    more = [term_text(t, limit=2) for t in causes[1:3] if abs(t.us) >= 0.1 * abs(dec.delta_us)]
    if more:
        text += "; then " + "; ".join(more)
    if any(group(t.key) in ("unit_work", "unit_busy") for t in dec.terms):
        text += (f" ({MISSING_SECTIONS}: what the unit did more or less of is not measured; "
                 "ncu --set full, or paprof's default preset, records it)")
    return text
