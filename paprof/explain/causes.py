"""The cause of a step, in words, from the counters: a step's story opens with it.

Three sentences lead every step (v2 -> v3):

1. ``cause_sentence``: the mechanism, named from the counters with its numbers: "L2->SM
   traffic falls 4x, 8.59 GB -> 2.15 GB (4 -> 1 bytes per DRAM byte), for the same DRAM
   bytes (2.15 GB)";
2. ``limit_sentence``: what limits the variant after the step now, from its bottleneck
   label and the counters behind it;
3. ``next_sentence``: what would move it next, from ncu's own rule estimates for it.

The rules read counters only (instructions, traffic per memory level, barrier stalls,
DRAM % of peak, bandwidth per resident warp, grid size against the resident-CTA slots,
the launch details a run records); never a variant's id or its family, so a custom
family's variants get the same sentences from their own counters. A count a report lacks
(a run of the ``basic`` preset has no traffic tables) takes no part.

How the mechanism is chosen, in order:

- **As fast** (the duration did not move): the code path the run records, if any, and
  whether the work (instructions, DRAM bytes) stayed the same.
- **Filling the GPU**: the grid left resident-CTA slots empty before (under one wave) and
  grew by at least :data:`DRIVER_FACTOR` in a faster step.
- **Reaching DRAM's ceiling**: DRAM throughput crossed the dram-bound mark (70 % of peak)
  and the variant is DRAM-bound now. The evidence is the DRAM bandwidth per resident warp:
  at a given memory latency it is proportional to the bytes each warp keeps in flight
  (Little's law).
- **Drivers** (:data:`DRIVERS`): warp instructions, SM<-L1 global-load bytes, L2->SM bytes,
  DRAM bytes. A driver counts when it moved by at least :data:`DRIVER_FACTOR` in the
  direction of the time change (down in a faster step, up in a slower one); its weight
  is ``|ln(after / before)|`` times how busy the hardware carrying it was (the larger of
  the two variants' % of peak: issue slots, L1/TEX, L2, DRAM), so that a 4x change at an
  idle level weighs less than a 2x change at a busy one. The heaviest leads; a second
  follows when it weighs at least half as much. The same traffic seen at two levels
  (SM<-L1 and L2->SM falling by about the same factor: the re-reads were L1 misses) is
  said once, at the outer level.
- Shared-memory wavefronts and barrier stalls that vanish in a faster step (or appear in
  a slower one) are named after the drivers when they were a real part of the work (the
  shared-memory instructions at least :data:`SHARED_SHARE` of all instructions; barrier
  stalls at least :data:`BARRIER_SHARE` of the stall cycles).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from paprof.explain import fmt
from paprof.family import chose
from paprof.model.bottleneck import DEFAULT_THRESHOLDS as LABEL_THRESHOLDS
from paprof.model.bottleneck import LABEL_RULES
from paprof.model.comparison import (LIMITERS, STALL_COLUMNS, VariantResult, binding_limits,
                                     bound_words)
from paprof.model.numbers import finite, plain

DRIVER_FACTOR = 1.25
"""A count must change by this factor (either way) to take part in a step's mechanism."""
SECOND_DRIVER = 0.5
"""A second driver is named when it weighs at least this fraction of the first."""
SAME_LEVEL = 1.25
"""SM<-L1 and L2->SM traffic whose factors differ by less than this are the same traffic."""
SHARED_SHARE = 0.01
"""Shared-memory instructions must be at least this share of all instructions to be named."""
BARRIER_SHARE = 0.01
"""Barrier stalls must be at least this share of the stall cycles to be named."""
RE_READ_HIT_PCT = 50.0
"""An L1 hit rate from which SM<-L1 traffic is mostly re-reads of bytes L1 already holds."""
IDLE_DRAM_PCT = 10.0
"""DRAM under this % of peak while another level is busy is "idle" in a sentence."""
BUSY_PCT = 50.0
"""A level at or above this % of peak is "busy" in a sentence."""
AT_CEILING_PCT = 90.0
"""Achieved bandwidth at or above this % of the ceiling leaves only fewer bytes to gain."""


# -- the numbers one variant offers -----------------------------------------------------
def _col(column: str) -> Callable[[VariantResult], float | None]:
    return lambda v: finite(v.get(column))


def _issue_busy(v: VariantResult) -> float | None:
    """How busy instruction issue was: issue slots % of peak (SM throughput without it)."""
    value = finite(v.get("issue_slots_busy_pct"))
    return value if value is not None else finite(v.get("sm_throughput_pct"))


def _shared_wavefronts(v: VariantResult) -> float | None:
    ld, st = finite(v.get("shared_load_wavefronts")), finite(v.get("shared_store_wavefronts"))
    return None if ld is None or st is None else ld + st


def _shared_instructions(v: VariantResult) -> float | None:
    ld, st = finite(v.get("shared_load_instructions")), finite(v.get("shared_store_instructions"))
    return None if ld is None or st is None else ld + st


def stall_total(v: VariantResult) -> float | None:
    """Warp cycles per issued instruction over every stall reason but ``selected``."""
    values = [finite(v.get(c)) for c in STALL_COLUMNS if c != "stall_selected"]
    values = [x for x in values if x is not None]
    return sum(values) if values else None


def barrier_share(v: VariantResult) -> float | None:
    """Barrier stalls as a fraction of all stall cycles (None when not recorded)."""
    barrier, total = finite(v.get("stall_barrier")), stall_total(v)
    if barrier is None or not total:
        return None
    return barrier / total


def resident_slots(v: VariantResult) -> float | None:
    """CTAs the GPU holds at once: the grid over its waves (SMs x blocks per SM)."""
    grid, waves = finite(v.get("grid_size")), finite(v.get("waves_per_sm"))
    if grid is None or not waves:
        return None
    return grid / waves


def bandwidth_per_warp(v: VariantResult) -> float | None:
    """DRAM GB/s per resident warp (achieved bandwidth over warps per SM x SMs)."""
    bw, warps, sms = (finite(v.get(c)) for c in ("achieved_bandwidth_gbs", "warps_active_per_sm", "sm_count"))
    if bw is None or not warps or not sms:
        return None
    return bw / (warps * sms)


def per_dram_byte(v: VariantResult, amount: float | None) -> float | None:
    dram = finite(v.get("dram_bytes"))
    if amount is None or not dram:
        return None
    return amount / dram


@dataclass(frozen=True)
class Driver:
    """A count of work or traffic that can carry a step's time."""

    key: str
    words: str
    """How a sentence names it: "L2->SM traffic"."""
    amount: Callable[[VariantResult], float | None]
    busy: Callable[[VariantResult], float | None]
    """% of peak of the hardware that carries it."""
    busy_words: str
    """That hardware in a sentence: "L2"."""
    text: Callable[[float], str]
    per_byte_unit: str | None = None
    """The unit of the amount per DRAM byte ("bytes", "instructions"), None to leave it out."""
    plural: bool = False
    """The words are a plural ("warp instructions fall")."""


DRIVERS: tuple[Driver, ...] = (
    Driver("instructions", "warp instructions", _col("instructions_executed"), _issue_busy,
           "the SM's issue slots", fmt.big, "instructions", plural=True),
    Driver("l1_load", "SM<-L1 global-load traffic", _col("l1_global_load_bytes"),
           _col("l1_throughput_pct"), "L1", fmt.bytes_decimal, "bytes"),
    Driver("l2_to_sm", "L2->SM traffic", _col("l2_to_l1_bytes"), _col("l2_throughput_pct"),
           "L2", fmt.bytes_decimal, "bytes"),
    Driver("dram", "DRAM traffic", _col("dram_bytes"), _col("dram_throughput_pct"), "DRAM",
           fmt.bytes_decimal),
)
"""The work and traffic counts a step's mechanism is looked for in, from the SM outwards."""


@dataclass
class Move:
    """One driver across one step."""

    driver: Driver
    before: float
    after: float
    weight: float
    inner: "Move | None" = None
    """The same traffic seen at an inner level (SM<-L1 under L2->SM), said with it."""

    @property
    def factor(self) -> float:
        return max(self.before, self.after) / min(self.before, self.after)

    @property
    def falls(self) -> bool:
        return self.after < self.before


def moves(before: VariantResult, after: VariantResult, faster: bool) -> list[Move]:
    """The drivers that moved by :data:`DRIVER_FACTOR` in the direction of the time change,
    heaviest first (both counts must be recorded and above zero)."""
    out = []
    for driver in DRIVERS:
        b, a = driver.amount(before), driver.amount(after)
        if not b or not a or b <= 0 or a <= 0:
            continue
        if (a < b) != faster or max(a, b) / min(a, b) < DRIVER_FACTOR:
            continue
        busy = [x for x in (driver.busy(before), driver.busy(after)) if x is not None]
        weight = abs(math.log(a / b)) * (max(busy) / 100 if busy else 0.0)
        out.append(Move(driver, b, a, weight))
    out.sort(key=lambda m: -m.weight)
    l1 = next((m for m in out if m.driver.key == "l1_load"), None)
    l2 = next((m for m in out if m.driver.key == "l2_to_sm"), None)
    if l1 is not None and l2 is not None and max(l1.factor, l2.factor) / min(l1.factor, l2.factor) < SAME_LEVEL:
        # the same traffic at two levels: the L1 misses were the redundant reads; say L2's
        l2.weight = max(l2.weight, l1.weight)
        l2.inner = l1
        out.remove(l1)
        out.sort(key=lambda m: -m.weight)
    return out


# -- words ------------------------------------------------------------------------------
def _bytes_per_load(v: VariantResult) -> float | None:
    loads, nbytes = finite(v.get("global_load_instructions")), finite(v.get("l1_global_load_bytes"))
    return nbytes / loads if loads and nbytes is not None else None


def _load_width(before: VariantResult, after: VariantResult, falls: bool) -> str | None:
    """"global loads 4x fewer, 96 -> 352 bytes each": the load instructions moved with the
    instructions (wider or narrower loads)."""
    b, a = finite(before.get("global_load_instructions")), finite(after.get("global_load_instructions"))
    if not b or not a or (a < b) != falls or max(a, b) / min(a, b) < DRIVER_FACTOR:
        return None
    wb, wa = _bytes_per_load(before), _bytes_per_load(after)
    text = f"global loads {fmt.ratio(max(a, b) / min(a, b))} {'fewer' if a < b else 'more'}"
    if wb is not None and wa is not None:
        text += f", {fmt.count(wb)} -> {fmt.count(wa)} bytes each"
    return text


def _per_byte_text(value: float | None) -> str:
    return fmt.number(value, 3) if value is not None else fmt.MISSING


def move_clause(m: Move, before: VariantResult, after: VariantResult, lead: bool) -> str:
    """"L2->SM traffic falls 4x, 8.59 GB -> 2.15 GB (4 -> 1 bytes per DRAM byte)"; the
    second driver of a sentence drops its words' verb ("and warp instructions 6x, ...")."""
    verb = ""
    if lead:
        verb = ("fall" if m.falls else "rise") if m.driver.plural else ("falls" if m.falls else "rises")
    text = f"{m.driver.words} {verb + ' ' if verb else ''}{fmt.ratio(m.factor)}, " \
           f"{m.driver.text(m.before)} -> {m.driver.text(m.after)}"
    notes = []
    if m.driver.per_byte_unit:
        pb, pa = per_dram_byte(before, m.before), per_dram_byte(after, m.after)
        if pb is not None and pa is not None:
            once = _once(m, before, after)
            notes.append(f"{_per_byte_text(pb)} -> {_per_byte_text(pa)} {m.driver.per_byte_unit} "
                         "per DRAM byte" + (f": {once}" if once else ""))
    inner = m.inner
    if inner is not None:
        notes.append(f"and {inner.driver.words} with it, {inner.driver.text(inner.before)} -> "
                     f"{inner.driver.text(inner.after)}")
    if m.driver.key == "instructions":
        loads = _load_width(before, after, m.falls)
        if loads:
            notes.append(loads)
    if m.driver.key == "l1_load":
        hit = finite((before if m.falls else after).get("l1_global_load_hit_rate_pct"))
        if hit is None:
            hit = finite((before if m.falls else after).get("l1_hit_rate_pct"))
        if hit is not None and hit >= RE_READ_HIT_PCT:
            notes.append(f"{fmt.pct(hit)} L1 hits: the same bytes re-read")
    return text + (f" ({'; '.join(notes)})" if notes else "")


#: Bytes per DRAM byte within this of 1 mean "each byte once".
ONCE_TOLERANCE = 0.05


def _once(m: Move, before: VariantResult, after: VariantResult) -> str | None:
    """"each byte read from DRAM now reaches the SMs once, not 3.99 times": a cache-to-SM
    traffic whose ratio to the DRAM bytes falls to ~1 (the re-reads are gone) or rises from
    ~1 (they appear); None otherwise."""
    if m.driver.key != "l2_to_sm":
        return None
    pb, pa = per_dram_byte(before, m.before), per_dram_byte(after, m.after)
    if pb is None or pa is None:
        return None
    low, high = (pa, pb) if m.falls else (pb, pa)
    if abs(low - 1) > ONCE_TOLERANCE or high < 1.5:
        return None
    times = fmt.number(high, 3)
    if m.falls:
        return f"each byte read from DRAM now reaches the SMs once, not {times} times"
    return f"each byte read from DRAM now reaches the SMs {times} times, not once"


def _same_dram(before: VariantResult, after: VariantResult, rel: float) -> str | None:
    b, a = finite(before.get("dram_bytes")), finite(after.get("dram_bytes"))
    if not b or not a or abs(a - b) / b >= rel:
        return None
    return f"for the same DRAM bytes ({fmt.bytes_decimal(a)})"


#: A math pipe this busy (% of peak) makes a kernel arithmetic-heavy: its DRAM idles by
#: design, so instructions it sheds are not "redundant work while DRAM idled".
MATH_BUSY_PCT = 50.0


def _busy_idle(before: VariantResult, after: VariantResult, moved: list[Move]) -> str | None:
    """"baseline's redundant work, which kept L1 and the SM's issue slots busy (66.3 %,
    53.5 % of peak) while DRAM idled (0.9 % of peak), is gone": said of a faster step for
    the same DRAM bytes when the levels it relieved were busy and DRAM was not, and neither
    kernel keeps a math pipe busy (a flash-attention kernel on the tensor cores idles DRAM
    by design)."""
    if any((p := _busiest_math_pipe(v)) is not None and p[1] >= MATH_BUSY_PCT for v in (before, after)):
        return None
    busy = []
    for m in moved:
        value = m.driver.busy(before)
        if m.driver.key != "dram" and value is not None and value >= BUSY_PCT:
            busy.append((m.driver.busy_words, value))
    dram = finite(before.get("dram_throughput_pct"))
    if not busy or dram is None or dram >= IDLE_DRAM_PCT:
        return None
    names = " and ".join(n for n, _ in busy)
    values = ", ".join(fmt.pct(v) for _, v in busy)
    return (f"{before.label}'s redundant work, which kept {names} busy ({values} of peak) while "
            f"DRAM idled ({fmt.pct(dram)} of peak), is gone")


def _gone_clause(before: VariantResult, after: VariantResult, faster: bool) -> list[str]:
    """Shared-memory traffic and barrier stalls that vanished (faster) or appeared (slower)."""
    src, dst = (before, after) if faster else (after, before)
    out = []
    wave_src, wave_dst = _shared_wavefronts(src), _shared_wavefronts(dst)
    inst_src, total = _shared_instructions(src), finite(src.get("instructions_executed"))
    if (wave_src and wave_dst == 0 and inst_src and total and inst_src / total >= SHARED_SHARE):
        out.append(f"the {fmt.big(wave_src)} shared-memory wavefronts")
    share_src, share_dst = barrier_share(src), barrier_share(dst)
    cyc = finite(src.get("stall_barrier"))
    if (share_src is not None and share_dst is not None and share_src >= BARRIER_SHARE
            and share_dst < BARRIER_SHARE / 10):
        out.append(f"the barrier stalls ({fmt.number(cyc, 2)} cycles per instruction, "
                   f"{fmt.pct(share_src * 100)} of the stall cycles)")
    if not out:
        return []
    return [" and ".join(out) + (" are gone" if faster else " appear")]


#: A math pipe under this share of peak is "not used" when the work moves between pipes.
PIPE_IDLE_PCT = 1.0
#: ... and the pipe that takes the work over is at least this busy.
PIPE_USED_PCT = 5.0
_PIPES = (("fma_pipe_pct", "the FP32 (FMA) pipe"), ("tensor_pipe_pct", "the tensor cores"),
          ("fp64_pipe_pct", "the FP64 pipe"))


def _pipe_shift(before: VariantResult, after: VariantResult) -> str | None:
    """"the math moves from the FP32 (FMA) pipe to the tensor cores (tensor cores 0 % ->
    28.6 % of peak, FP32 (FMA) pipe 28.1 % -> 18.1 %)": a math pipe idle in one run carries
    the work in the other, and another pipe held it there; None when both use the same pipes."""
    got = {col: (finite(before.get(col)), finite(after.get(col))) for col, _ in _PIPES}
    names = dict(_PIPES)
    for col, (b, a) in got.items():
        if b is None or a is None:
            continue
        if b < PIPE_IDLE_PCT and a >= PIPE_USED_PCT:  # col takes the work over
            new, side = col, 0  # the old pipe: the busiest other one before
        elif b >= PIPE_USED_PCT and a < PIPE_IDLE_PCT:  # col gives it up
            new, side = col, 1  # the new pipe: the busiest other one after
        else:
            continue
        others = [(got[c][side], c) for c in got if c != new and got[c][side] is not None]
        if not others or max(others)[0] < PIPE_USED_PCT:
            return None
        other = max(others)[1]
        src, dst = (other, new) if side == 0 else (new, other)
        bare = {c: names[c].removeprefix("the ") for c in (src, dst)}

        def pair(c):
            return f"{bare[c]} {fmt.pct(got[c][0])} -> {fmt.pct(got[c][1])}"

        return (f"the math moves from {names[src]} to {names[dst]} ({pair(dst)} of peak, "
                f"{pair(src)})")
    return None


def _waves(value: float) -> str:
    return f"{value:.2f}"


def _grid_fill(before: VariantResult, after: VariantResult) -> str | None:
    """"the grid grows 16x, 32 -> 512 CTAs: 97 % of the 528 resident-CTA slots filled
    instead of 6.1 % (0.06 -> 0.97 waves)"; None unless the GPU was under-filled and the
    grid grew by DRIVER_FACTOR."""
    gb, ga = finite(before.get("grid_size")), finite(after.get("grid_size"))
    wb, wa = finite(before.get("waves_per_sm")), finite(after.get("waves_per_sm"))
    if not gb or not ga or wb is None or wa is None or wb >= 1 or ga / gb < DRIVER_FACTOR:
        return None
    slots = resident_slots(after)
    filled = (f", filling {fmt.pct(min(wa, 1) * 100)} of the {fmt.count(slots)} resident-CTA "
              f"slots instead of {fmt.pct(wb * 100)}" if slots else "")
    return (f"the grid grows {fmt.ratio(ga / gb)}, {fmt.count(gb)} -> {fmt.count(ga)} CTAs"
            f"{filled} ({_waves(wb)} -> {_waves(wa)} waves)")


def _ceiling(before: VariantResult, after: VariantResult) -> str | None:
    """"DRAM throughput rises 11.5 % -> 90.2 % of peak (4.34 TB/s, 95.8 % of the measured
    4.53 TB/s ceiling): each resident warp moves 18x the DRAM bytes per second (35.2 -> 15.2
    warps per SM), so by Little's law it keeps 18x the bytes in flight"."""
    mark = LABEL_THRESHOLDS.dram_bound_pct
    db, da = finite(before.get("dram_throughput_pct")), finite(after.get("dram_throughput_pct"))
    if db is None or da is None or db >= mark or da < mark or plain(after.bottleneck) != "dram-bound":
        return None
    bw = finite(after.get("achieved_bandwidth_gbs"))
    text = f"DRAM throughput rises {fmt.pct(db)} -> {fmt.pct(da)} of peak"
    if bw is not None:
        ceil = after.ceiling
        text += f" ({fmt.bandwidth_gbs(bw)}"
        if ceil is not None:
            kind = "measured" if ceil.measured else "datasheet"
            text += f", {fmt.pct(bw / ceil.gbs * 100)} of the {kind} {fmt.sig(ceil.tbs)} TB/s ceiling"
        text += ")"
    pb, pa = bandwidth_per_warp(before), bandwidth_per_warp(after)
    if pb and pa and pa / pb >= DRIVER_FACTOR:
        wb, wa = finite(before.get("warps_active_per_sm")), finite(after.get("warps_active_per_sm"))
        text += (f": each resident warp moves {fmt.ratio(pa / pb)} the DRAM bytes per second "
                 f"({fmt.number(wb)} -> {fmt.number(wa)} warps per SM), so by Little's law it "
                 f"keeps {fmt.ratio(pa / pb)} the bytes in flight")
    return text


def _same_work(before: VariantResult, after: VariantResult) -> str | None:
    """"the same work as v5: warp instructions 288 M -> 288 M, ..."; or, when a driver
    moved without the time following, "the work moved but not the time: ..."; None when
    neither run records any of the work."""
    parts = []
    for driver in DRIVERS:
        b, a = driver.amount(before), driver.amount(after)
        if b is None or a is None or driver.key == "l1_load":
            continue
        parts.append(f"{driver.words} {driver.text(b)} -> {driver.text(a)}")
    if not parts:
        return None
    moved = moves(before, after, True) + moves(before, after, False)
    head = f"the same work as {before.label}" if not moved else "the work moved but not the time"
    return f"{head}: " + ", ".join(parts)


def _second(first: Move, second: Move) -> bool:
    """Whether a second driver is named beside the first: it weighs at least
    SECOND_DRIVER of the first, or it moved 2x or more at a busy level."""
    if second.weight >= SECOND_DRIVER * first.weight:
        return True
    return second.factor >= 2 and second.weight >= BUSY_PCT / 100 * math.log(2)


def _drivers_clause(moved: list[Move], before, after, lead: bool) -> str:
    first = moved[0]
    text = move_clause(first, before, after, lead=lead)
    if not lead:
        text = text.replace(first.driver.words, f"{first.driver.words} "
                            f"{'down' if first.falls else 'up'}", 1)
    if len(moved) > 1 and _second(first, moved[1]):
        text += ", and " + move_clause(moved[1], before, after, lead=False)
    return text


def code_path(v: VariantResult, reason: bool = True) -> str | None:
    """The code path a variant took at launch, in the words its family recorded with the
    run (``launch_words``): each clause after the variant's label, joined by "; ", and what
    made the first one right after it ("b split the rows 4 ways (splits 4): 512 CTAs where
    128 would leave 4 of 132 SMs idle"); ``reason=False`` leaves that reason out (a cause
    follows). A run recorded without words says its raw ``launch_details`` ("b chose
    splits 4, order longest"); None when the run records no choice."""
    record = v.provenance
    if record is None:
        return None
    if record.launch_said:
        first, *rest = record.launch_said
        why = f": {record.launch_why}" if reason and record.launch_why else ""
        return "; ".join([f"{v.label} {first}{why}", *(f"{v.label} {clause}" for clause in rest)])
    if record.launch_details:
        return f"{v.label} {chose(dict(record.launch_details))}"
    return None


def cause(before: VariantResult, after: VariantResult, d: dict, t) -> str | None:
    """The step's mechanism (the module docstring says how it is chosen)."""
    dur = d["duration_us"]
    if dur.change is None:
        return None
    path = code_path(after, reason=False)
    if not dur.moved:
        text = _same_work(before, after)
        slots, grid = resident_slots(after), finite(after.get("grid_size"))
        if path and slots and grid:
            verb = "already fill" if grid >= slots / 2 else "fill"
            path = (f"{path}: its {fmt.count(grid)} CTAs {verb} {fmt.pct(min(grid / slots, 1) * 100)} "
                    f"of the {fmt.count(slots)} resident-CTA slots")
        if text and path:  # what the counters say first, the family's launch words after
            return f"{text} (launch: {path})"
        return text or path or None
    faster = dur.change < 0
    moved = moves(before, after, faster)
    clauses: list[str] = []
    grid = _grid_fill(before, after) if faster else None
    ceiling = _ceiling(before, after) if faster else None
    shift = _pipe_shift(before, after)
    if shift:
        clauses.append(shift)
    if grid:
        clauses.append(grid + (f" (launch: {path})" if path else ""))
    if ceiling:
        clauses.append(ceiling)
    if moved:
        if clauses:
            clauses.append("with " + _drivers_clause(moved, before, after, lead=False))
        else:
            text = _drivers_clause(moved, before, after, lead=True)
            same = _same_dram(before, after, t.traffic_rel) if moved[0].driver.key != "dram" else None
            if same:
                text += f", {same}"
            if not faster:
                text += _though(before, after)
            clauses.append(text)
            if faster and same:
                busy = _busy_idle(before, after, moved[:2])
                if busy:
                    clauses.append(busy)
    clauses += _gone_clause(before, after, faster)
    return "; ".join(clauses) or None


def _though(before: VariantResult, after: VariantResult) -> str:
    """", though the grid grows 16x (512 -> 8,192 CTAs, 0.32 -> 1.94 waves)": a slower
    step whose grid grew (more CTAs did not help)."""
    gb, ga = finite(before.get("grid_size")), finite(after.get("grid_size"))
    wb, wa = finite(before.get("waves_per_sm")), finite(after.get("waves_per_sm"))
    if not gb or not ga or ga / gb < DRIVER_FACTOR:
        return ""
    waves = f", {_waves(wb)} -> {_waves(wa)} waves" if wb is not None and wa is not None else ""
    return f", though the grid grows {fmt.ratio(ga / gb)} ({fmt.count(gb)} -> {fmt.count(ga)} CTAs{waves})"


# -- what limits it now ---------------------------------------------------------------
_UNITS = (
    ("dram_throughput_pct", "DRAM"), ("l1_throughput_pct", "L1/TEX"),
    ("l2_throughput_pct", "L2"), ("issue_slots_busy_pct", "issue slots"),
    ("sm_throughput_pct", "SM"),
)


def _busiest(v: VariantResult) -> tuple[str, float] | None:
    known = [(name, finite(v.get(c))) for c, name in _UNITS if finite(v.get(c)) is not None]
    return max(known, key=lambda x: x[1]) if known else None


_MATH_PIPES = (("tensor_pipe_pct", "tensor pipe"), ("fma_pipe_pct", "FMA pipe"),
               ("alu_pipe_pct", "ALU pipe"), ("fp64_pipe_pct", "FP64 pipe"),
               ("xu_pipe_pct", "XU pipe"))


def _busiest_math_pipe(v: VariantResult) -> tuple[str, float] | None:
    """The busiest arithmetic pipe recorded (name, % of peak), None without one: what a
    compute-bound kernel waits on when it is busier than instruction issue (a tensor-core
    kernel keeps the tensor pipe near peak with few instructions)."""
    known = [(name, finite(v.get(c))) for c, name in _MATH_PIPES if finite(v.get(c)) is not None]
    return max(known, key=lambda x: x[1]) if known else None


def _limit_words(v: VariantResult) -> str | None:
    names, blocks = binding_limits(v)
    if not names:
        return None
    words = " and ".join(LIMITERS.get(n, (n, None))[0] for n in names)
    return f"{words} ({fmt.count(blocks)} blocks per SM)" if blocks is not None else words


def limit(v: VariantResult) -> str | None:
    """What limits ``v`` now, from its label and the counters behind it."""
    label = plain(v.bottleneck)
    name = v.label
    busiest = _busiest(v)
    if label == "dram-bound":
        dram, bw = finite(v.get("dram_throughput_pct")), finite(v.get("achieved_bandwidth_gbs"))
        text = f"{name} is limited by DRAM bandwidth now: {fmt.pct(dram)} of peak"
        if bw is not None:
            text += f", {fmt.bandwidth_gbs(bw)}"
            if v.ceiling is not None:
                kind = "measured" if v.ceiling.measured else "datasheet"
                share = bw / v.ceiling.gbs * 100
                text += f" ({fmt.pct(share)} of the {kind} {fmt.sig(v.ceiling.tbs)} TB/s ceiling)"
                if share >= AT_CEILING_PCT:
                    return text + ": only fewer DRAM bytes make it faster"
        return text
    if label == "occupancy/launch-bound":
        grid, sms = finite(v.get("grid_size")), finite(v.get("sm_count"))
        if grid is not None and sms is not None and grid < sms:
            return (f"{name} is limited by its launch now: {fmt.count(grid)} CTAs for "
                    f"{fmt.count(sms)} SMs leave {fmt.count(sms - grid)} SMs without work")
        slots, waves = resident_slots(v), finite(v.get("waves_per_sm"))
        warps, ach = finite(v.get("warps_active_per_sm")), finite(v.get("achieved_occupancy_pct"))
        parts = []
        if slots and waves is not None and waves < 1:
            parts.append(f"{fmt.count(grid)} CTAs fill {fmt.pct(waves * 100)} of the "
                         f"{fmt.count(slots)} resident-CTA slots ({fmt.number(waves, 2)} waves)")
        if warps is not None:
            parts.append(f"{fmt.number(warps)} warps per SM ({fmt.pct(ach)} achieved occupancy)")
        elif ach is not None:
            parts.append(f"achieved occupancy {fmt.pct(ach)}")
        text = f"{name} is limited by too few warps now: " + ", ".join(parts)
        if busiest:
            text += f"; no unit passes {fmt.pct(busiest[1])} of peak ({busiest[0]})"
        return text
    if label == "latency-bound":
        reason = plain(v.get("top_stall_reason"))
        cycles = finite(v.get("top_stall_cycles"))
        text = f"{name} is limited by latency now"
        if busiest:
            text += f": no unit passes {fmt.pct(busiest[1])} of peak ({busiest[0]})"
        if reason and cycles is not None:
            text += (f"; warps wait {fmt.number(cycles, 3)} cycles per issued instruction on "
                     f"{str(reason).replace('_', ' ')}")
            share = barrier_share(v)
            if reason != "barrier" and share is not None and share >= 0.1:
                text += f" and {fmt.number(finite(v.get('stall_barrier')), 3)} on barriers"
        issue = finite(v.get("issue_active_pct"))
        if issue is not None:
            text += f", and the schedulers issue in {fmt.pct(issue)} of active cycles"
        return text
    if label in ("l1-bound", "l2-bound"):
        unit, value = (("L1/TEX", finite(v.get("l1_throughput_pct"))) if label == "l1-bound"
                       else ("L2", finite(v.get("l2_throughput_pct"))))
        if label == "l1-bound" and (value or 0) < (finite(v.get("lsu_pipe_pct")) or 0):
            unit, value = "LSU pipe", finite(v.get("lsu_pipe_pct"))
        text = f"{name} is limited by {unit} throughput now: {fmt.pct(value)} of peak"
        dram = finite(v.get("dram_throughput_pct"))
        if dram is not None:
            text += f", DRAM {fmt.pct(dram)}"
        return text
    if label in ("compute-bound", "issue-bound"):
        issue = _issue_busy(v)
        inst = finite(v.get("instructions_executed"))
        pipe = _busiest_math_pipe(v)
        if pipe is not None and (issue is None or pipe[1] >= issue):
            text = f"{name} is limited by its {pipe[0]} now: {fmt.pct(pipe[1])} of peak"
            if issue is not None:
                text += f" (issue slots {fmt.pct(issue)})"
            return text
        text = f"{name} is limited by instruction issue now: issue slots {fmt.pct(issue)} of peak"
        if inst is not None:
            per = per_dram_byte(v, inst)
            text += f", {fmt.big(inst)} warp instructions"
            if per is not None:
                text += f" ({fmt.number(per, 3)} per DRAM byte)"
        return text
    return None


# -- what would move it next ------------------------------------------------------------
_ESTIMATED = ("OPTIMIZATION", "WARNING")


def _rule_gloss(rule, v: VariantResult) -> str | None:
    """A rule's point in the variant's own counters (by ncu rule id, not by variant)."""
    rid, message = rule.id, rule.message or ""
    if rid == "AchievedOccupancy":
        ach, theo = finite(v.get("achieved_occupancy_pct")), finite(v.get("theoretical_occupancy_pct"))
        if ach is not None and theo is not None:
            return f"achieved occupancy {fmt.pct(ach)} of a theoretical {fmt.pct(theo)}"
    if rid == "TheoreticalOccupancy":
        theo, words = finite(v.get("theoretical_occupancy_pct")), _limit_words(v)
        if theo is not None:
            return f"theoretical occupancy {fmt.pct(theo)}" + (f", limited by {words}" if words else "")
    if rid == "CPIStall":
        reason, cycles = plain(v.get("top_stall_reason")), finite(v.get("top_stall_cycles"))
        if reason and cycles is not None:
            return f"{str(reason).replace('_', ' ')} stalls, {fmt.number(cycles, 3)} cycles per issued instruction"
    if rid == "IssueSlotUtilization":
        issue = finite(v.get("issue_active_pct"))
        if issue is not None:
            return f"the schedulers issue in {fmt.pct(issue)} of active cycles"
    if rid == "LaunchConfiguration":
        waves = finite(v.get("waves_per_sm"))
        if waves is not None and waves > 1:
            return (f"{fmt.number(waves, 3)} waves: the last wave fills "
                    f"{fmt.pct((waves - math.floor(waves)) * 100)} of the GPU")
    if rid == "MemoryCacheAccessPattern":
        found = re.search(r"only ([\d.]+) of the 32 bytes transmitted per sector", message)
        if found:
            return f"{found.group(1)} of each 32-byte sector used per thread"
    if rid == "MemoryL2Compression":
        found = re.search(r"Out of the ([\d.]+) bytes sent to the L2 Compression unit only "
                          r"([\d.]+)% were successfully compressed", message)
        text = "it pays only for data that compresses"
        if found:
            text += (f": {fmt.pct(float(found.group(2)))} of the "
                     f"{fmt.bytes_decimal(float(found.group(1)))} sent to the compressor did")
        dram = finite(v.get("dram_throughput_pct"))
        if dram is not None and rule.speedup_pct is not None and abs(rule.speedup_pct - dram) < 1:
            text += f"; its estimate is DRAM's {fmt.pct(dram)} of peak"
        return text
    sentence = re.match(r"(.+?[.!?])(\s|$)", " ".join(message.split()))
    text = sentence.group(1) if sentence else message
    return text if len(text) <= 140 else text[:139] + "…"


MIN_ESTIMATE_PCT = 1.0
"""ncu rule estimates under this (% of the time) are not worth a sentence."""


#: ncu rules whose advice needs something the kernel's author did not choose and cannot
#: act on in the kernel (L2 compression needs allocations made compressible through the
#: driver's virtual-memory API): never the top move, listed only in the rule table.
NOT_ACTIONABLE = frozenset({"MemoryL2Compression"})


def next_moves(v: VariantResult, count: int = 2) -> tuple[list, bool]:
    """ncu's rules with the largest estimated speedups for ``v``, largest first: those that
    bear on its bottleneck label (``bottleneck.LABEL_RULES``) when any has an estimate,
    else any; and whether they bear on the label. Advice the author cannot act on in the
    kernel (:data:`NOT_ACTIONABLE`) is left out."""
    estimated = [r for r in v.rules.values()
                 if r.speedup_pct is not None and r.speedup_pct >= MIN_ESTIMATE_PCT
                 and r.type in _ESTIMATED and r.id not in NOT_ACTIONABLE]
    wanted = LABEL_RULES.get(plain(v.bottleneck) or "", ())
    relevant = [r for r in estimated if r.id in wanted]
    return sorted(relevant or estimated, key=lambda r: -r.speedup_pct)[:count], bool(relevant)


def next_move(v: VariantResult) -> str | None:
    """"ncu's estimates for what would move v3 next: Achieved Occupancy, up to 49.9 % of its
    time (achieved occupancy 23.8 % of a theoretical 75 %); ..."; when none of ncu's
    estimated rules bears on the label, it says so."""
    chosen, relevant = next_moves(v)
    if not chosen:
        return None
    parts = []
    for r in chosen:
        where = f" in {r.kernel}" if v.multi_kernel and r.kernel else ""
        gloss = _rule_gloss(r, v)
        parts.append(f"{r.title}{where}, up to {fmt.pct(r.speedup_pct)} of its time"
                     + (f" ({gloss})" if gloss else ""))
    label = plain(v.bottleneck)
    aside = (f", none of them about its {bound_words(label)} limit"
             if not relevant and label in LABEL_RULES and LABEL_RULES[label] else "")
    return f"ncu's estimates for what would move {v.label} next{aside}: " + "; ".join(parts)


# -- the STORY functions ------------------------------------------------------------------
def cause_sentence(before, after, d, t) -> str | None:
    """The mechanism of the step, from the counters."""
    return cause(before, after, d, t)


def limit_sentence(before, after, d, t) -> str | None:
    """What limits the variant after the step now."""
    return limit(after)


def next_sentence(before, after, d, t) -> str | None:
    """What would move the variant after the step next, by ncu's rule estimates."""
    return next_move(after)
