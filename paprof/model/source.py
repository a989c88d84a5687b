"""Source hot spots: where each variant's warps wait, line by line, from SourceCounters.

A report made with the ``source`` preset (section SourceCounters, kernels built with
``-lineinfo``) holds, for every SASS instruction, the warp-state samples that landed on
it (each split by stall reason) and the instructions it executed; its line table maps each
instruction to a file and line. :func:`read_report` turns that into one
:class:`KernelHotspots` per kernel; :func:`variant_hotspots` merges a variant's kernels
line by line, each line's time being its share of its kernel's samples times the kernel's
ncu duration (so the lines of a variant add up to its duration, and a line's time is
comparable across variants, whose sampling intervals differ). :func:`diff` says which lines
grew or shrank between two variants; lines are matched by their source text where both
sides have it (v2 and v3 are different files), else by file and line.

Source text comes from a ``Sources`` object (``locate(file, line) -> (where, text)``):
by default the report's own copies (``ncu --import-source yes``) or the file on disk;
``paprof.measure.source_text`` knows where a family's compiled sources live. Without line
information (no ``-lineinfo``) the hot spots are SASS instructions.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from paprof import safetext
from paprof.read import metrics as M
from paprof.read import ncu_reader
from paprof.errors import UserError

log = logging.getLogger(__name__)

TOP = 5
"""Lines (or instructions) a variant's table shows."""
TOP_CHANGES = 6
"""Line changes a step shows."""


@dataclass
class Instruction:
    """One SASS instruction with its samples."""

    offset: int
    """Address from the kernel's first instruction."""
    sass: str
    samples: float
    stalls: dict[str, float]
    """Stall reason -> samples (``selected``: the warp was issuing)."""
    executed: float
    """Warp-level instructions executed at this address."""
    file: str | None
    line: int | None


@dataclass
class Line:
    """One source line of a variant: its samples, reasons, instructions and time."""

    file: str
    line: int
    where: str
    """How the line is named to a reader: ``v2_vectorized.cu:36``."""
    text: str | None
    samples: float = 0.0
    time_us: float = 0.0
    """Its share of each kernel's samples times that kernel's duration, summed."""
    stalls: dict[str, float] = field(default_factory=dict)
    executed: float = 0.0
    instructions: list[Instruction] = field(default_factory=list)
    """Hottest first."""
    share: float = 0.0
    """Fraction of the variant's time."""

    @property
    def top_stall(self) -> tuple[str, float] | None:
        """(reason, fraction of the line's samples) of its largest stall reason other than
        ``selected`` (issuing, not stalling)."""
        waits = {r: s for r, s in self.stalls.items() if r != "selected" and s > 0}
        if not waits or not self.samples:
            return None
        reason = max(waits, key=waits.get)
        return reason, waits[reason] / self.samples


@dataclass
class KernelHotspots:
    """One kernel's instructions with their samples."""

    kernel: str
    duration_us: float | None
    samples: float
    instructions: list[Instruction]

    @property
    def has_lines(self) -> bool:
        return any(i.line for i in self.instructions)


@dataclass
class VariantHotspots:
    """One variant's lines, hottest first (or its instructions, without line info)."""

    label: str
    report: str
    kernels: list[KernelHotspots]
    lines: list[Line]
    duration_us: float
    samples: float
    source_note: str = ""
    """Where the source text came from."""

    @property
    def has_lines(self) -> bool:
        return any(k.has_lines for k in self.kernels)

    def top(self, n: int = TOP) -> list[Line]:
        return self.lines[:n]

    def line(self, where: str) -> Line | None:
        return next((x for x in self.lines if x.where == where), None)


@dataclass
class LineChange:
    """A line whose time moved between two variants."""

    key: str
    before: Line | None
    after: Line | None

    @property
    def before_us(self) -> float:
        return self.before.time_us if self.before else 0.0

    @property
    def after_us(self) -> float:
        return self.after.time_us if self.after else 0.0

    @property
    def change_us(self) -> float:
        return self.after_us - self.before_us

    @property
    def kind(self) -> str:
        """``new``, ``gone``, ``grew`` or ``shrank``."""
        if self.before is None:
            return "new"
        if self.after is None:
            return "gone"
        return "grew" if self.change_us > 0 else "shrank"

    @property
    def text(self) -> str | None:
        return (self.after or self.before).text


@dataclass
class StepHotspots:
    before: str
    after: str
    changes: list[LineChange]
    matched_by_text: bool
    """True when lines were matched by their source text (else by file and line)."""


@dataclass
class Hotspots:
    """The hot spots of the variants that have source counters, and their steps."""

    variants: list[VariantHotspots]
    steps: list[StepHotspots]
    without: list[str] = field(default_factory=list)
    """Compared variants whose reports hold no source counters."""

    def variant(self, label: str) -> VariantHotspots:
        return next(v for v in self.variants if v.label == label)


class Sources:
    """Source text for a report's line table: the report's own copies, else the file on
    disk. ``locate(file, line)`` -> (the line's name for a reader, its text or None)."""

    note = ""

    def __init__(self, embedded: dict[str, str] | None = None):
        self._embedded = dict(embedded or {})
        self._cache: dict[str, list[str] | None] = {}

    def lines_of(self, file: str) -> list[str] | None:
        if file not in self._cache:
            text = self._embedded.get(file)
            if text is None:
                try:
                    text = Path(file).read_text(errors="replace") if Path(file).is_file() else None
                except OSError:
                    text = None
            self._cache[file] = text.split("\n") if text is not None else None
        return self._cache[file]

    def locate(self, file: str, line: int) -> tuple[str, str | None]:
        lines = self.lines_of(file)
        text = lines[line - 1] if lines is not None and 0 < line <= len(lines) else None
        return f"{Path(file).name}:{line}", text

    def with_embedded(self, embedded: dict[str, str]) -> "Sources":
        self._embedded.update(embedded)
        return self


# -- reading ---------------------------------------------------------------------------
def _stall_metrics(action) -> dict[str, str]:
    """reason -> per-PC metric name (all samples, not only the not-issued ones)."""
    out = {}
    for name in ncu_reader.metric_names(action):
        if name.startswith(M.PC_STALL_PREFIX) and not name.endswith(M.PC_NOT_ISSUED_SUFFIX):
            out[name[len(M.PC_STALL_PREFIX):]] = name
    return out


def read_report(path) -> tuple[list[KernelHotspots], dict[str, str]]:
    """Every kernel's instructions with their samples, and the source files the report
    carries; ``([], {})`` when it holds no source counters."""
    duration = M.BY_COLUMN["duration_us"]
    _context, actions = ncu_reader.open_full(Path(path))
    kernels, embedded = [], {}
    for action in actions:
        samples = ncu_reader.read_instanced(action, M.PC_SAMPLES)
        if not samples:
            continue
        embedded.update(ncu_reader.embedded_sources(action))
        executed = ncu_reader.read_instanced(action, M.PC_EXECUTED)
        stalls = {r: ncu_reader.read_instanced(action, n) for r, n in _stall_metrics(action).items()}
        pcs = sorted(set(samples) | set(executed))
        base = pcs[0] if pcs else 0
        instructions = []
        for pc in pcs:
            where = ncu_reader.source_location(action, pc)
            instructions.append(Instruction(
                offset=pc - base, sass=ncu_reader.sass_text(action, pc),
                samples=samples.get(pc, 0.0),
                stalls={r: v[pc] for r, v in stalls.items() if v.get(pc)},
                executed=executed.get(pc, 0.0),
                file=where[0] if where else None, line=where[1] if where else None))
        us = ncu_reader.read_metric(action, duration.ncu_name) * duration.scale
        kernels.append(KernelHotspots(action.name(), us if us == us else None,
                                      sum(samples.values()), instructions))
    return kernels, embedded


def variant_hotspots(label: str, report: str, kernels: list[KernelHotspots],
                     sources: Sources | None = None) -> VariantHotspots:
    """A variant's lines from its kernels' instructions (instructions without a line
    become lines of their own, named by their SASS). A kernel profiled several times counts
    as the mean of its launches."""
    sources = sources or Sources()
    by_key: dict[tuple, Line] = {}
    launches = {k.kernel: sum(1 for x in kernels if x.kernel == k.kernel) for k in kernels}
    total_us = sum((k.duration_us or 0.0) / launches[k.kernel] for k in kernels)
    for k in kernels:
        # several profiled launches of a kernel: their mean, as the comparison's medians
        per_sample = (k.duration_us or 0.0) / k.samples / launches[k.kernel] if k.samples else 0.0
        for ins in k.instructions:
            if ins.line:
                key = (ins.file, ins.line)
                if key not in by_key:
                    where, text = sources.locate(ins.file, ins.line)
                    by_key[key] = Line(ins.file, ins.line, where, text)
            else:
                key = (k.kernel, ins.offset)
                if key not in by_key:
                    by_key[key] = Line("", 0, f"{k.kernel}+0x{ins.offset:04x}", ins.sass)
            line = by_key[key]
            line.samples += ins.samples
            line.time_us += ins.samples * per_sample
            line.executed += ins.executed
            for reason, n in ins.stalls.items():
                line.stalls[reason] = line.stalls.get(reason, 0.0) + n
            if ins.samples:
                line.instructions.append(ins)
    lines = sorted(by_key.values(), key=lambda x: (-x.time_us, -x.executed, x.where))
    for line in lines:
        line.instructions.sort(key=lambda i: -i.samples)
        line.share = line.time_us / total_us if total_us else 0.0
    return VariantHotspots(label, str(report), kernels, lines, total_us,
                           sum(k.samples for k in kernels), sources.note)


# -- comparing ---------------------------------------------------------------------------
_WORDS = re.compile(r"[A-Za-z0-9_]")


def line_key(line: Line, by_text: bool) -> str:
    """How a line is matched across variants: its source text with the spaces squeezed
    (a line of punctuation only, a brace, by file and line), else its file name and line."""
    if by_text and line.text is not None and _WORDS.search(line.text):
        return " ".join(line.text.split())
    return line.where


def diff(before: VariantHotspots, after: VariantHotspots, top: int = TOP_CHANGES) -> StepHotspots:
    """The ``top`` lines whose time moved most from ``before`` to ``after`` (lines of the
    same text are summed on each side)."""
    by_text = any(x.text is not None for x in before.lines) and any(x.text is not None for x in after.lines)

    def grouped(v: VariantHotspots) -> dict[str, Line]:
        out: dict[str, Line] = {}
        for line in v.lines:
            if not line.samples:
                continue
            key = line_key(line, by_text)
            if key in out:  # the same statement twice: one entry, both lines' time
                kept = out[key]
                out[key] = Line(kept.file, kept.line, kept.where, kept.text, kept.samples + line.samples,
                                kept.time_us + line.time_us, _add(kept.stalls, line.stalls),
                                kept.executed + line.executed, kept.instructions + line.instructions,
                                kept.share + line.share)
            else:
                out[key] = line
        return out

    a, b = grouped(before), grouped(after)
    changes = [LineChange(k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])]
    changes.sort(key=lambda c: -abs(c.change_us))
    return StepHotspots(before.label, after.label, [c for c in changes if c.change_us][:top], by_text)


def _add(x: dict, y: dict) -> dict:
    return {k: x.get(k, 0.0) + y.get(k, 0.0) for k in dict.fromkeys([*x, *y])}


def for_comparison(cmp, sources_for=None) -> Hotspots | None:
    """The hot spots of a ``Comparison``'s variants whose reports hold source counters
    (``pc_samples`` recorded); None when none does. ``sources_for(variant_result)`` gives
    each variant its ``Sources`` (default: the report's copies or the files on disk)."""
    have = [v for v in cmp.variants if v.report_path and v.get("pc_samples")]
    if not have:
        return None
    made = []
    for v in have:
        try:
            kernels, embedded = read_report(v.report_path)
        except UserError as err:  # no ncu_report here, a damaged file: the rest still reports
            log.warning("%s: no source hot spots: %s", safetext.shown(v.label), safetext.shown(err))
            kernels = []
        if not kernels:
            continue
        sources = (sources_for(v) if sources_for else None) or Sources()
        made.append(variant_hotspots(v.label, v.report_path, kernels, sources.with_embedded(embedded)))
    if not made:
        return None
    steps = [diff(x, y) for x, y in zip(made, made[1:])]
    labels = {m.label for m in made}
    return Hotspots(made, steps, [v.label for v in cmp.variants if v.label not in labels])
