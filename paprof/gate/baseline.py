"""The baseline file: per variant and shape, each metric's ``Stat`` and the runs'
``Provenance``; versioned JSON that loads old schemas and refuses bad input."""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from paprof import jsonsafe
from paprof._version import __version__
from paprof.read.metrics import BY_COLUMN
from paprof.errors import UserError
from paprof.gate.rules import NON_NEGATIVE_UNITS, UNITS
from paprof.gate.cause import check_counters
from paprof import outputs

SCHEMA = 3
"""Version of the baseline file format this module writes (schema 2 adds per-launch
``samples`` to each metric, the ``gate`` kind and the ``compiler`` provenance; schema 3
each entry's ``counters``: what the gate's cause decomposes, ``paprof.gate.cause``, and
the provenance's ``code`` fingerprint and ``environment``)."""
READS = (1, 2, 3)
"""Baseline schemas this module reads."""
GATES = ("profile", "static")
"""What a baseline was measured by: profiled runs, or compiled cubins (``--static``)."""
KIND = "paprof-baseline"
"""The ``kind`` field that marks a JSON file as a paprof baseline."""



@dataclass(frozen=True)
class Stat:
    """One metric of one (variant, shape): the median over launches and its spread."""

    value: float
    """Median over the launches."""
    spread: float
    """Half-range ``(max - min) / 2`` over the launches; 0 for one launch."""
    n: int
    """Number of launches measured."""
    samples: tuple[float, ...] = field(default=(), compare=False)
    """The per-launch values (schema 2; empty for one launch or a schema-1 baseline)."""

    @classmethod
    def of(cls, values: Iterable[float]) -> "Stat":
        vals = [float(v) for v in values]
        keep = tuple(vals) if len(vals) > 1 else ()
        return cls(statistics.median(vals), (max(vals) - min(vals)) / 2, len(vals), keep)

    def pooled(self, more: Sequence[float]) -> "Stat":
        """This stat with ``more`` samples added (a re-measurement)."""
        return Stat.of([*(self.samples or (self.value,)), *more])


@dataclass(frozen=True)
class Provenance:
    """Where a measurement came from (the run store's sidecar, where there is one).

    None means unknown (a report without a sidecar); unknown fields are not compared.
    """

    gpu: str | None = None
    ncu_version: str | None = None
    clock_control: str | None = None
    sections: tuple[str, ...] | None = None
    preset: str | None = None
    driver: str | None = None
    git_commit: str | None = None
    report: str | None = None
    created: str | None = None
    compiler: str | None = None
    """The static gate's ``nvcc`` release and target (``nvcc 13.0.88 sm_90``)."""
    code: str | None = None
    """The SASS and launch settings' fingerprint (schema 3; ``same_code``)."""
    code_why: str | None = None
    """Why there is no ``code`` fingerprint."""
    environment: str | None = None
    """The GPU's state while measured (schema 3; ``environment``)."""


@dataclass(frozen=True)
class Entry:
    """One (family, variant, shape) with its metric stats: a baseline entry, or the
    current measurement it is compared with."""

    family: str
    variant: str
    shape: str
    metrics: dict[str, Stat]
    provenance: Provenance = Provenance()
    counters: dict | None = None
    """The run's compact counters (``paprof.gate.cause.snapshot``) that a regression's cause
    is decomposed from; None in older baselines, static ones, or where the report had none."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.family, self.variant, self.shape)

    @property
    def name(self) -> str:
        """``family/variant`` (just ``variant`` when the family is unknown)."""
        return f"{self.family}/{self.variant}" if self.family else self.variant


@dataclass
class Baseline:
    """The versioned baseline file: ``{"kind": "paprof-baseline", "schema": 3, ...}``."""

    entries: list[Entry]
    created: str = ""
    paprof_version: str = __version__
    schema: int = SCHEMA
    gate: str = "profile"
    """``profile`` (runs, ``paprof check``) or ``static`` (cubins, ``check --static``)."""

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "schema": self.schema,
            "gate": self.gate,
            "created": self.created,
            "paprof_version": self.paprof_version,
            "spread": "half-range (max - min) / 2 over the launches of one report",
            "entries": [_entry_to_dict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "baseline") -> "Baseline":
        """Validate and parse; ``UserError`` for anything that is not a schema-1 baseline."""
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise UserError(f"{source} is not a paprof baseline (no \"kind\": \"{KIND}\")")
        schema = data.get("schema")
        if schema not in READS:
            raise UserError(
                f"{source} has baseline schema {schema!r}; this paprof reads schemas "
                f"{', '.join(map(str, READS))} (rebuild it with 'paprof baseline update --force')"
            )
        gate = data.get("gate", "profile")
        if gate not in GATES:
            raise UserError(f"{source} is corrupt: \"gate\" must be one of {', '.join(GATES)}")
        raw = data.get("entries")
        if not isinstance(raw, list) or not raw:
            raise UserError(f"{source} is corrupt: \"entries\" must be a non-empty list")
        entries, seen = [], set()
        for i, item in enumerate(raw):
            try:
                entry = _entry_from_dict(item)
            except (KeyError, TypeError, ValueError) as err:
                raise UserError(f"{source} is corrupt: entry {i}: {_why(err)}") from None
            if entry.key in seen:
                raise UserError(f"{source} is corrupt: {entry.name} at {entry.shape} twice")
            seen.add(entry.key)
            entries.append(entry)
        return cls(
            entries=entries,
            created=str(data.get("created", "")),
            paprof_version=str(data.get("paprof_version", "")),
            schema=SCHEMA,
            gate=gate,
        )


def _why(err: Exception) -> str:
    return f"missing field {err}" if isinstance(err, KeyError) else str(err)


def _entry_to_dict(e: Entry) -> dict:
    prov = {k: v for k, v in e.provenance.__dict__.items()}
    if prov["sections"] is not None:
        prov["sections"] = list(prov["sections"])
    return {
        "family": e.family,
        "variant": e.variant,
        "shape": e.shape,
        "metrics": {
            m: {"value": s.value, "spread": s.spread, "n": s.n,
                **({"samples": list(s.samples)} if s.samples else {})}
            for m, s in e.metrics.items()
        },
        "provenance": prov,
        **({"counters": e.counters} if e.counters is not None else {}),
    }


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a finite number, got {_short(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError(f"{what} must be a finite number, got {_short(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {_short(value)}")
    return number


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


_MOST_US = 1e12
"""Longer than any measured kernel launch (11.6 days, in us): a baseline past it is
impossible, not a slow kernel."""


def _consistent(m: str, value: float, spread: float, n: int, samples: tuple) -> None:
    """``ValueError`` when a metric's numbers contradict each other or are impossible:
    samples that are not ``n``, a value that is not their median, a spread that is not
    their half-range, a duration of zero or of days."""
    if samples:
        if len(samples) != n:
            raise ValueError(f"{m}: n is {n} but {len(samples)} samples are given")
        median = statistics.median(samples)
        half = (max(samples) - min(samples)) / 2
        if not math.isclose(value, median, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(f"{m}.value {value:g} is not the median of its samples ({median:g})")
        if not math.isclose(spread, half, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(f"{m}.spread {spread:g} is not the half-range of its samples ({half:g})")
    unit = UNITS.get(m) or (BY_COLUMN[m].unit if m in BY_COLUMN else None)
    if unit == "us" and not 0 < value < _MOST_US:
        raise ValueError(f"{m}.value {value:g} us is impossible for a kernel's duration")
    if unit == "us" and spread >= _MOST_US:
        raise ValueError(f"{m}.spread {spread:g} us is impossible for a kernel's duration")
    if unit == "%" and spread > 50:
        raise ValueError(f"{m}.spread {spread:g} is impossible: a percentage's half-range is at most 50")


def _possible(metric: str, value: float, what: str) -> float:
    """``value`` if a measurement of ``metric`` can have it; ``ValueError`` otherwise."""
    unit = UNITS.get(metric) or (BY_COLUMN[metric].unit if metric in BY_COLUMN else None)
    if value < 0 and (what == "spread" or unit in NON_NEGATIVE_UNITS):
        raise ValueError(f"{metric}.{what} {value:g} is impossible: it cannot be negative")
    if unit == "%" and value > 100:
        raise ValueError(f"{metric}.{what} {value:g} is impossible: a percentage over 100")
    return value


def _entry_from_dict(d: object) -> Entry:
    if not isinstance(d, dict):
        raise TypeError("an entry must be an object")
    if not isinstance(d["variant"], str) or not d["variant"]:
        raise ValueError("'variant' must be a non-empty string")
    if not isinstance(d["shape"], str):  # empty for a report without a sidecar
        raise ValueError("'shape' must be a string")
    metrics = {}
    if not isinstance(d["metrics"], dict) or not d["metrics"]:
        raise ValueError("'metrics' must be a non-empty object")
    for m, s in d["metrics"].items():
        if not isinstance(s, dict):
            raise TypeError(f"metric {m!r} must be an object")
        n = s["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{m}.n must be a positive integer, got {n!r}")
        spread = _possible(m, _finite(s["spread"], f"{m}.spread"), "spread")
        raw = s.get("samples", [])
        if not isinstance(raw, list):
            raise TypeError(f"{m}.samples must be a list")
        samples = tuple(_possible(m, _finite(v, f"{m}.samples"), "value") for v in raw)
        value = _possible(m, _finite(s["value"], f"{m}.value"), "value")
        _consistent(m, value, spread, n, samples)
        metrics[m] = Stat(value, spread, n, samples)
    prov = d.get("provenance") or {}
    if not isinstance(prov, dict):
        raise TypeError("'provenance' must be an object")
    known = Provenance.__dataclass_fields__
    kwargs = {k: v for k, v in prov.items() if k in known}
    if kwargs.get("sections") is not None:
        kwargs["sections"] = tuple(kwargs["sections"])
    family = str(d.get("family") or "")
    counters = d.get("counters")
    if counters is not None:
        counters = check_counters(counters)
    return Entry(family, d["variant"], d["shape"], metrics, Provenance(**kwargs), counters)


def load_baseline(path: str | os.PathLike) -> Baseline:
    """Read a baseline file; ``UserError`` (exit 2) if missing, corrupt or another schema."""
    path = Path(path)
    try:
        data = jsonsafe.load(path)
    except FileNotFoundError:
        raise UserError(
            f"baseline {path} does not exist (write one with 'paprof baseline update --out {path}')"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read baseline {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"baseline {path} is corrupt: not JSON ({err})") from None
    except ValueError as err:  # over a limit (jsonsafe)
        raise UserError(f"baseline {path} is corrupt: {err}") from None
    return Baseline.from_dict(data, source=f"baseline {path}")


def save_baseline(baseline: Baseline, path: str | os.PathLike, force: bool = False,
                  inputs: Iterable = ()) -> Path:
    """Write ``baseline`` as JSON, atomically (``paprof.outputs``); refuse (``UserError``)
    to replace a file unless ``force``, and one of ``inputs`` (the reports read) always."""
    check_baseline_target(path, force, inputs)
    text = jsonsafe.dumps(baseline.to_dict(), 2, allow_nan=False) + "\n"  # json.dumps's text
    return outputs.write(path, text, parents=True)


def check_baseline_target(path: str | os.PathLike, force: bool = False,
                          inputs: Iterable = ()) -> None:
    """``UserError`` now when ``save_baseline(..., path, force)`` would refuse."""
    outputs.check_target(path, force=force, inputs=inputs, parents=True)
