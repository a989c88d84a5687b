"""Measured noise: the calibration file ``paprof calibrate`` writes and ``check --calibration``
reads.

An A/A measurement runs the same variant several times (fresh processes: ``paprof
calibrate`` on a GPU, or repeated runs already in a runs folder). Per run the gate's
value of a metric is taken as the gate takes it (``paprof.gate.measure``: the median over the
run's launches); the **noise** of a (GPU, family, metric) is the largest, over the
family's variants and shapes, coefficient of variation of those per-run values (sample
standard deviation over mean). ``check --calibration FILE`` then uses as a timing
metric's smallest failing change ``max(tolerance, K x noise)`` (``K`` is the file's
``k``, ``DEFAULT_K`` = 3: three standard deviations of A/A noise), and a note says which
one set the limit.

The file is JSON, ``{"kind": "paprof-calibration", "schema": 1, "k": 3, "noise": [...]}``
(see ``Calibration.to_dict``), written atomically and never over another file without
``--force``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from paprof import jsonsafe, outputs
from paprof._version import __version__
from paprof.model import stats
from paprof.errors import UserError
from paprof.gate.measurement import measure
from paprof.gate.rules import GATE_RULES

KIND = "paprof-calibration"
SCHEMA = 1
DEFAULT_K = 3.0
"""The multiple of the measured noise that a change must pass to count."""
MIN_REPEATS = 2
"""Runs of one variant needed to measure its noise (more give a better estimate)."""


@dataclass(frozen=True)
class Noise:
    """The measured noise of one metric of one family on one GPU."""

    gpu: str
    family: str
    metric: str
    relative: float
    """The largest coefficient of variation over the variants measured (0.004 = 0.4 %)."""
    repeats: int
    """The fewest runs of one variant it came from."""
    variants: tuple[str, ...] = ()
    """``variant@shape`` measured."""


@dataclass
class Calibration:
    noise: list[Noise]
    k: float = DEFAULT_K
    created: str = ""
    source: str = ""
    """``runs FOLDER`` or ``gpu`` (A/A repeats made by paprof calibrate)."""
    paprof_version: str = __version__

    def find(self, gpu: str | None, family: str, metric: str) -> Noise | None:
        return next((n for n in self.noise if n.gpu == gpu and n.family == family
                     and n.metric == metric), None)

    def to_dict(self) -> dict:
        return {"kind": KIND, "schema": SCHEMA, "k": self.k, "created": self.created,
                "paprof_version": self.paprof_version, "source": self.source,
                "noise_is": "coefficient of variation (stdev / mean) of per-run values of "
                            "one variant, the largest over the family's variants",
                "noise": [{**dataclasses.asdict(n), "variants": list(n.variants)}
                          for n in self.noise]}

    @classmethod
    def from_dict(cls, data: object, source: str) -> "Calibration":
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise UserError(f"{source} is not a paprof calibration (no \"kind\": \"{KIND}\")")
        if data.get("schema") != SCHEMA:
            raise UserError(f"{source} has calibration schema {data.get('schema')!r}; this "
                            f"paprof reads schema {SCHEMA} (make it again with paprof calibrate)")
        try:
            k = _positive(data.get("k", DEFAULT_K), "k")
            raw = data["noise"]
            if not isinstance(raw, list) or not raw:
                raise ValueError("'noise' must be a non-empty list")
            noise = [Noise(str(n["gpu"]), str(n["family"]), str(n["metric"]),
                           _positive(n["relative"], "relative", zero=True),
                           int(n["repeats"]), tuple(map(str, n.get("variants", []))))
                     for n in raw]
        except (KeyError, TypeError, ValueError) as err:
            why = f"missing field {err}" if isinstance(err, KeyError) else str(err)
            raise UserError(f"{source} is corrupt: {why}") from None
        return cls(noise, k, str(data.get("created", "")), str(data.get("source", "")),
                   str(data.get("paprof_version", "")))


def _positive(value: object, what: str, zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{what} must be a {'non-negative' if zero else 'positive'} number, "
                         f"got {value!r}")
    return float(value)


def load(path) -> Calibration:
    path = Path(path)
    try:
        data = jsonsafe.load(path)
    except FileNotFoundError:
        raise UserError(f"calibration {path} does not exist (make one with paprof calibrate "
                        f"--out {path})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read calibration {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"calibration {path} is corrupt: not JSON ({err})") from None
    except ValueError as err:  # over a limit (jsonsafe)
        raise UserError(f"calibration {path} is corrupt: {err}") from None
    return Calibration.from_dict(data, f"calibration {path}")


def check_target(path, force: bool = False, inputs=()) -> None:
    outputs.check_target(path, force=force, inputs=inputs, parents=True)


def save(calibration: Calibration, path, force: bool = False, inputs=()) -> Path:
    """Write atomically; ``UserError`` over an existing file without ``force``."""
    check_target(path, force, inputs)
    text = json.dumps(calibration.to_dict(), indent=2, allow_nan=False) + "\n"
    return outputs.write(path, text, parents=True)


def timing_metrics() -> list[str]:
    """The gate's metrics that are not counts: those noise moves."""
    return [m for m, rule in GATE_RULES.items() if not rule.count]


def repeats_from_table(table, metrics=None) -> dict[tuple, list]:
    """``{(gpu, family, variant, shape): [Entry per run]}`` from a runs table holding
    several runs (reports) of the same variant: each report measured as the gate measures
    it (``paprof.gate.measure``)."""
    if table.empty or "report_path" not in table:
        raise UserError("no profiled kernels found in the runs")
    chosen = list(metrics or timing_metrics())
    out: dict[tuple, list] = {}
    for _, rows in table.groupby("report_path", sort=False):
        for entry in measure(rows, chosen, missing_ok=True):
            if entry.metrics:
                key = (entry.provenance.gpu or "", entry.family, entry.variant, entry.shape)
                out.setdefault(key, []).append(entry)
    return out


def from_repeats(repeats: dict[tuple, list], metrics=None) -> list[Noise]:
    """The noise per (GPU, family, metric) from ``{(gpu, family, variant, shape): [Entry,
    ...]}``, each list the A/A runs of one variant (``MIN_REPEATS`` or more; others are
    left out). ``UserError`` when no variant has enough runs."""
    spread: dict[tuple, list] = {}
    for (gpu, family, variant, shape), entries in repeats.items():
        if len(entries) < MIN_REPEATS:
            continue
        held = set.intersection(*(set(e.metrics) for e in entries))
        for metric in sorted(held if metrics is None else held & set(metrics)):
            values = [e.metrics[metric].value for e in entries]
            mean = statistics.fmean(values)
            if mean == 0:
                continue
            cv = statistics.stdev(values) / abs(mean)
            spread.setdefault((gpu, family, metric), []).append(
                (cv, len(entries), f"{variant}@{shape}"))
    if not spread:
        raise UserError(f"no variant was run {MIN_REPEATS} or more times at one shape on one "
                        "GPU: nothing to measure the noise from (run the same variant again "
                        "into another runs folder, or run paprof calibrate on the GPU)")
    return [Noise(gpu, family, metric, max(cv for cv, _, _ in found),
                  min(n for _, n, _ in found), tuple(name for _, _, name in found))
            for (gpu, family, metric), found in sorted(spread.items())]


def make(noise: list[Noise], source: str, k: float = DEFAULT_K) -> Calibration:
    return Calibration(noise, k, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       source)


# -- the gate's limit ----------------------------------------------------------------------


@dataclass
class Limits:
    """What ``paprof.gate.verdict.settings_for`` decided, for the verdict's notes (one per family and metric)."""

    calibration: Calibration
    said: dict = field(default_factory=dict)

    def notes(self) -> list[str]:
        return list(self.said.values())
