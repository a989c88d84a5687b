"""One run's record: the typed, versioned model of where a run came from and what it was.

``paprof run`` writes it as the JSON sidecar beside the report (``<slug>.json``, schema
``SCHEMA``; docs/CONTRACTS.md lists its keys); the store reads it back into a
``RunRecord`` (``RunRecord.read``), the table carries it in its ``sidecar`` column, the
comparison keeps one per compared variant (``Comparison.provenance``), the report's footer
and the explanation show it, and the gate's baseline copies its ``Origin``. Nothing renames
a key on the way: each attribute below says which sidecar key it reads.

A report paprof did not write (any foreign ``.ncu-rep``) gets a record too
(``RunRecord.foreign``): what the table knows of it (the GPU the report names, the shape
slug), every other field None, ``has_sidecar`` False.

A record is also a read-only mapping of the sidecar as written (``record["work"]``,
``record.get("launch_details")``), so code that reads one more key needs no new attribute;
``to_dict()`` is the JSON written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from paprof import phases as run_phases
from paprof.errors import UserError
from paprof import jsonsafe
from paprof.read.store_files import read

SCHEMA = 2
"""Sidecar schema written now. Schema 1 (before families: ``shape_fields`` and the
family's byte count, no ``params``/``work``/``source``) still loads everywhere."""

REPORT_BYTES = "report_bytes"
"""The key naming the size of the report the record was written with: a record whose
report has another size belongs to another report (a record torn by a kill, or mixed by
hand) and is not read as this one's. Records written before it have no such key."""

LARGEST = 1e18
"""The largest magnitude a record's number may have: a report's bytes, a time in us, a
count all stay far below; 1e308 (finite, but past what the charts and sums survive) is
a damaged record."""

_TEXT_KEYS = ("family", "variant", "kind", "kernel_regex", "shape", "shape_slug", "gpu",
              "gpu_slug", "driver", "ncu_version", "clock_control", "preset", "git_commit",
              "created", "paprof_version", "report", "log", "nvtx_range", "step_range")
_NUMBER_KEYS = ("schema", "read_ceiling_tbs", "gemm_ceiling_tflops", "duration_us_event",
                "bandwidth_tbs", "tflops", "replay_passes", "launches", REPORT_BYTES, "median_us",
                "tbs", "pct_of_ceiling", "rel_error", "rounds")
_TIME_KEYS = ("duration_us_event", "median_us")
_NONNEGATIVE_KEYS = ("read_ceiling_tbs", "gemm_ceiling_tflops", "bandwidth_tbs", "tflops",
                     "replay_passes", "launches", REPORT_BYTES, "tbs", "pct_of_ceiling",
                     "rel_error", "rounds")
SHORTEST_US = 1e-3
"""The shortest time a record may hold, in microseconds (1 ns: no launch is shorter). A
time of 0, below 0 or of 1e-300 us is a damaged record: it would win every comparison
by a ratio of 300 digits, or drop its point from a sweep's map in silence."""
_TABLE_KEYS = ("params", "work", "source", "verification", "launch_details", "launch_words", "code",
               "environment", "selection", "ncu_session")
_LIST_KEYS = ("sections", "gate_metrics", "command", "profiled_kernels")


def _shown(value) -> str:
    """A bad value as an error names it: its repr, cut to 40 characters."""
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def check(data: Mapping, path) -> Mapping:
    """``data`` (a run record or a bench record) when each key paprof reads has its type
    (text, a finite number, a table, a list; or null); else a one-line ``UserError``
    naming the file and the key: ``created: 5`` would otherwise end a command in a
    traceback far from the file."""

    def bad(key, want):
        return UserError(f"damaged record {path}: '{key}' must be {want}, got {_shown(data[key])}")

    for key in _TEXT_KEYS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise bad(key, "text")
    for key in _NUMBER_KEYS:
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or abs(value) > LARGEST):
            raise bad(key, f"a finite number (at most {LARGEST:g})")
    for key in _TIME_KEYS:
        if data.get(key) is not None and data[key] < SHORTEST_US:
            raise bad(key, f"a time of at least {SHORTEST_US:g} us")
    for key in _NONNEGATIVE_KEYS:
        if data.get(key) is not None and data[key] < 0:
            raise bad(key, "a number of 0 or more")
    for key in _TABLE_KEYS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise bad(key, "a table")
    for key in _LIST_KEYS:
        if data.get(key) is not None and not isinstance(data[key], list):
            raise bad(key, "a list")
    work = data.get("work") or {}
    for key in ("bytes", "flops"):
        value = work.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or not 0 <= value <= LARGEST):
            raise UserError(f"damaged record {path}: 'work.{key}' must be a finite number from "
                            f"0 to {LARGEST:g}, got {_shown(value)}")
    words = data.get("launch_words") or {}
    said, why = words.get("said"), words.get("why")
    if said is not None and not (isinstance(said, list) and all(isinstance(c, str) for c in said)):
        raise UserError(f"damaged record {path}: 'launch_words.said' must be a list of text")
    if why is not None and not isinstance(why, str):
        raise UserError(f"damaged record {path}: 'launch_words.why' must be text")
    run_phases.parse(data.get(run_phases.KEY), path)  # a damaged list is one line naming the file
    return data


@dataclass(frozen=True)
class Origin:
    """The machine and the code a run was made with (what ``paprof.measure.provenance
    .collect`` probes); also what a gate baseline keeps of each entry's runs."""

    gpu: str | None = None
    gpu_slug: str | None = None
    driver: str | None = None
    ncu_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    created: str | None = None
    """ISO 8601 time the run was made (UTC, with offset)."""
    paprof_version: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _text(value) -> str | None:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


@dataclass(frozen=True, eq=False)
class RunRecord(Mapping):
    """One run as paprof knows it. Fields are None where unknown (a foreign report, an
    older schema lacking the key)."""

    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The sidecar as written (read it, never change it: the record is frozen)."""
    label: str = ""
    """The variant's label where a comparison holds the record (else the variant id)."""
    gpu: str | None = None
    """``gpu``; for a foreign report the device the report names."""
    driver: str | None = None
    ncu_version: str | None = None
    clock_control: str | None = None
    shape: str | None = None
    """``shape`` as spec text (``batch=64,...``), else the slug."""
    shape_key: str | None = None
    """What shapes are compared by: ``shape_slug`` (a store layout without a sidecar only
    knows the slug)."""
    preset: str | None = None
    sections: tuple[str, ...] | None = None
    created: str | None = None
    commit: str | None = None
    """``git_commit``: paprof's (or the variant's) commit when the run was made."""
    dirty: bool = False
    """``git_dirty``."""
    verified: bool | None = None
    """``verification.passed``: True passed, False failed, None not run or unknown."""
    unverified: bool = False
    """The record says the run was not verified (a command, ``--no-check``)."""
    kind: str | None = None
    """The variant kind: ``cuda``, ``callable``, ``command``."""
    rel_error: float | None = None
    """``verification.rel_error``."""
    report: str | None = None
    """The report's path, its last three parts (``family/variant/slug.ncu-rep``)."""
    has_sidecar: bool = False
    launch_details: Mapping = field(default_factory=dict)
    """Choices the variant made at launch (schema 2), raw, e.g. ``{"splits": 16}``."""
    launch_said: tuple[str, ...] = ()
    """``launch_words.said``: those choices in the family's words, clauses each read after
    the variant's label ("split each sequence 16 ways (splits 16)"); empty for a run
    recorded without them (older runs, a family that gives none)."""
    launch_why: str | None = None
    """``launch_words.why``: what made the first clause right on that GPU ("512 CTAs where
    32 would leave 100 of 132 SMs idle"), if the family said."""
    kernels: tuple[str, ...] = ()
    """The kernels ncu profiled in the run (``profiled_kernels``)."""
    phases: tuple = ()
    """Where the run's time went (``phases``: ``paprof.phases.Phase`` each, in running
    order); empty for a run recorded before phases were kept."""

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_sidecar(cls, sidecar: Mapping | None, *, label: str | None = None,
                     gpu: str | None = None, shape: str | None = None,
                     report_path: str | None = None, path=None) -> "RunRecord":
        """The record of a sidecar's JSON object (validated: ``check``); ``None`` gives a
        foreign report's record. ``gpu``/``shape`` fill in what the sidecar lacks."""
        if isinstance(sidecar, RunRecord):
            sidecar = sidecar.data
        s = check(sidecar, path or report_path or "record") if isinstance(sidecar, Mapping) else {}
        verification = s.get("verification") or {}
        details = s.get("launch_details")
        words = s.get("launch_words") or {}
        sections = s.get("sections")
        kernels: list[str] = []
        for k in s.get("profiled_kernels") or ():
            name = k.get("kernel") if isinstance(k, Mapping) else None
            if name and name not in kernels:
                kernels.append(str(name))
        return cls(
            data=dict(s),
            label=label if label is not None else str(s.get("variant") or ""),
            gpu=_text(s.get("gpu")) or _text(gpu),
            driver=s.get("driver"),
            ncu_version=s.get("ncu_version"),
            clock_control=s.get("clock_control"),
            shape=s.get("shape") or _text(shape),
            shape_key=s.get("shape_slug") or _text(shape),
            preset=s.get("preset"),
            sections=tuple(sections) if isinstance(sections, (list, tuple)) else None,
            created=s.get("created"),
            commit=s.get("git_commit"),
            dirty=bool(s.get("git_dirty")),
            verified=verification.get("passed"),
            unverified=bool(s) and s.get("verified") is False and not verification,
            kind=s.get("kind"),
            rel_error=verification.get("rel_error"),
            report="/".join(Path(report_path).parts[-3:]) if report_path else None,
            has_sidecar=bool(s),
            launch_details=dict(details) if isinstance(details, Mapping) else {},
            launch_said=tuple(c for c in words.get("said") or () if c),
            launch_why=words.get("why") or None,
            kernels=tuple(kernels),
            phases=run_phases.parse(s.get(run_phases.KEY), path or report_path or "record"),
        )

    @classmethod
    def foreign(cls, *, label: str, gpu: str | None = None, shape: str | None = None,
                report_path: str | None = None) -> "RunRecord":
        """The record of a report paprof did not write: only what the table knows."""
        return cls.from_sidecar(None, label=label, gpu=gpu, shape=shape, report_path=report_path)

    @classmethod
    def read(cls, path: Path) -> "RunRecord | None":
        """The record in the sidecar file ``path``; None when there is none (or it is not
        a JSON object); a one-line ``UserError`` when it cannot be read or is damaged."""
        try:
            raw = read(path)  # None for a link (skipped, with a warning), a FIFO, nothing
            if raw is None:
                return None
            data = jsonsafe.parse(raw)
        except jsonsafe.Refused as err:
            raise UserError(f"damaged record {path}: {err}") from None
        except (OSError, ValueError) as err:
            raise UserError(f"cannot read the run sidecar {path}: {err}") from None
        return cls.from_sidecar(data, path=path) if isinstance(data, dict) else None

    def labelled(self, label: str, *, gpu: str | None = None, shape: str | None = None,
                 report_path: str | None = None) -> "RunRecord":
        """This record as a comparison holds it: under ``label``, with the table's GPU and
        shape where the sidecar names none, and the report's short path."""
        return replace(
            self, label=label, gpu=self.gpu or _text(gpu), shape=self.shape or _text(shape),
            shape_key=self.shape_key or _text(shape),
            report="/".join(Path(report_path).parts[-3:]) if report_path else self.report)

    def with_values(self, **values) -> "RunRecord":
        """A copy whose sidecar has these keys set (e.g. ``report_bytes`` once the report
        is in place)."""
        return RunRecord.from_sidecar({**self.data, **values}, label=self.label,
                                      report_path=self.report)

    def to_dict(self) -> dict:
        """The sidecar as JSON would hold it."""
        return dict(self.data)

    # -- derived ------------------------------------------------------------------------

    @property
    def origin(self) -> Origin:
        return Origin(gpu=self.gpu, gpu_slug=self.data.get("gpu_slug"), driver=self.driver,
                      ncu_version=self.ncu_version, git_commit=self.commit,
                      git_dirty=self.data.get("git_dirty"), created=self.created,
                      paprof_version=self.data.get("paprof_version"))

    @property
    def commit_text(self) -> str | None:
        """The commit as the footer shows it: ``abc1234 (dirty)`` when the tree was dirty."""
        if self.dirty:
            return f"{self.commit or 'unknown'} (dirty)"
        return self.commit

    @property
    def work(self) -> Mapping:
        """The work model (``{"bytes", "flops", "flop_kind"}``); empty when unknown."""
        work = self.data.get("work")
        return work if isinstance(work, Mapping) else {}

    # -- the sidecar as a read-only mapping ---------------------------------------------

    def __getitem__(self, key: str):
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other) -> bool:
        """Two records: the same sidecar shown alike; a record and a plain mapping: the
        same JSON."""
        if isinstance(other, RunRecord):
            return (self.data, self.label, self.gpu, self.shape, self.shape_key, self.report) == \
                (other.data, other.label, other.gpu, other.shape, other.shape_key, other.report)
        if isinstance(other, Mapping):
            return dict(self.data) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (holds mappings)


def as_record(value) -> RunRecord | None:
    """A table cell's run record: a ``RunRecord`` as it is, a plain mapping (a table
    built by hand, a notebook) read into one, anything else (NaN, None) None."""
    if isinstance(value, RunRecord):
        return value if value.has_sidecar else None
    if isinstance(value, Mapping) and value:
        return RunRecord.from_sidecar(value)
    return None
