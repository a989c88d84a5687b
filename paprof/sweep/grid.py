"""The grid of a sweep: ``--grid KEY=VALUES`` per axis, over ``--shape`` fixed parameters.

VALUES is a comma-separated list whose items are single values or ranges:

``a..bxF``
    geometric: a, a*F, a*F^2 ... up to b (F > 1); ``context=1024..131072x2``
``a..b+S``
    arithmetic: a, a+S, a+2S ... up to b (S > 0); ``batch=8..64+8``

Every value is read by the family's own ``Params.parse``, so a key may be any alias
(``b=1,4``), and bounds, choices and cross-field rules are the family's. A point is the
Cartesian product's ``Params``: axes in the order given, the last varying fastest,
values in the order given (repeats dropped). A combination the family refuses (a
cross-field rule) stays in the grid as an *invalid* point with its reason; a value that
no combination accepts is an error.

``shard(points, k, n)`` gives shard ``k`` of ``n`` (1-based, as Slurm's
``SLURM_ARRAY_TASK_ID=1..N`` and a CI matrix's ``1..N``): every n-th point starting at
the k-th, so each point lands in exactly one shard and sizes spread over the shards.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

from paprof.errors import ShapeError, UsageError
from paprof.family import Params, format_value
from paprof.family import parse_value as _field_value

MAX_POINTS = 100_000
"""A grid larger than this is refused (a typo in a range, most likely)."""
MAX_RANGE = 10_000
"""Values one range may expand to."""

_NUMBER = r"-?[0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?"
_RANGE = re.compile(rf"^(?P<a>{_NUMBER})\.\.(?P<b>{_NUMBER})(?:(?P<op>[x+])(?P<step>{_NUMBER}))?$")


def _number(text: str) -> int | float:
    text = text.replace("_", "")
    try:
        return int(text)
    except ValueError:
        return float(text)


def expand_range(text: str) -> list[str]:
    """``1024..8192x2`` -> ``["1024", "2048", "4096", "8192"]``; ``UsageError`` if malformed."""
    match = _RANGE.match(text.replace(" ", ""))
    if not match:
        raise UsageError(f"range {text!r} is not a..bxF (geometric) or a..b+S (arithmetic), "
                         "e.g. 1024..131072x2 or 8..64+8")
    a, b = _number(match["a"]), _number(match["b"])
    if match["op"] is None:
        raise UsageError(f"range {text!r} needs a step: {text}x2 (geometric) or {text}+1 (arithmetic)")
    step = _number(match["step"])
    if b < a:
        raise UsageError(f"range {text!r} runs backwards: give the smaller end first")
    if match["op"] == "x" and (step <= 1 or a <= 0):
        raise UsageError(f"range {text!r}: a geometric range needs a factor above 1 and a start above 0")
    if match["op"] == "+" and step <= 0:
        raise UsageError(f"range {text!r}: an arithmetic range needs a step above 0")
    integral = all(isinstance(v, int) for v in (a, b)) and (match["op"] == "x" or isinstance(step, int))
    values: list = []
    i = 0
    while True:
        value = a * step**i if match["op"] == "x" else a + step * i
        if value > b * (1 + 1e-12):
            break
        value = round(value) if integral else value
        if not values or value != values[-1]:
            values.append(value)
        if len(values) > MAX_RANGE:
            raise UsageError(f"range {text!r} gives more than {MAX_RANGE} values")
        i += 1
    return [str(v) if isinstance(v, int) else repr(float(v)) for v in values]


def split_axis(text: str) -> tuple[str, list[str]]:
    """``batch=1,4,16`` -> ``("batch", ["1", "4", "16"])`` with ranges expanded."""
    key, sep, values = (text or "").partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--grid {text!r} is not KEY=VALUES (e.g. batch=1,4,16,64 or "
                         "context=1024..131072x2)")
    items = [item.strip() for item in values.split(",")]
    if not any(items):
        raise UsageError(f"--grid {key}= has no values")
    out: list[str] = []
    for item in items:
        if not item:
            raise UsageError(f"--grid {text!r} has an empty value (two commas in a row?)")
        if "=" in item:
            raise UsageError(f"--grid {text!r}: one key per --grid; give "
                             f"--grid {item.split('=')[0].strip()}=... separately")
        out.extend(expand_range(item) if ".." in item else [item])
    return key, out


def _field_keys(params_cls) -> dict:
    return {key: f for f in params_cls.fields() for key in f.keys}


def _given_keys(params_cls, text: str | None) -> dict[str, str]:
    """Field name -> the key used, for each ``KEY=VALUE`` in ``text``."""
    keys = _field_keys(params_cls)
    given = {}
    for item in (text or "").split(","):
        key = item.partition("=")[0].strip()
        if key in keys:
            given[keys[key].name] = key
    return given


@dataclass(frozen=True)
class Axis:
    """One swept parameter: the family's key for it and its values (JSON values)."""

    key: str
    values: tuple
    given: str = ""
    """The ``--grid`` text it came from."""

    def texts(self) -> list[str]:
        return [format_value(v) for v in self.values]

    def to_dict(self) -> dict:
        return {"key": self.key, "values": [list(v) if isinstance(v, tuple) else v for v in self.values],
                "given": self.given}


@dataclass(frozen=True)
class Point:
    """One point of the grid: its coordinates on the axes and its parameters."""

    index: int
    coords: dict
    """Axis key -> value."""
    params: Params | None
    error: str | None = None
    """Why the family refuses this combination (then ``params`` is None)."""

    @property
    def slug(self) -> str | None:
        return self.params.slug() if self.params is not None else None

    @property
    def spec(self) -> str:
        if self.params is not None:
            return self.params.spec()
        return ",".join(f"{k}={format_value(v)}" for k, v in self.coords.items())

    @property
    def label(self) -> str:
        """``batch 4, context 32768``."""
        return ", ".join(f"{k} {format_value(v)}" for k, v in self.coords.items())


@dataclass(frozen=True)
class Grid:
    """Axes over fixed parameters, and every point of their product in order."""

    axes: tuple[Axis, ...]
    fixed: Params
    fixed_text: str
    points: tuple[Point, ...] = field(repr=False)

    @property
    def keys(self) -> list[str]:
        return [a.key for a in self.axes]

    def to_dict(self) -> dict:
        return {"axes": [a.to_dict() for a in self.axes], "fixed": self.fixed_text,
                "fixed_params": self.fixed.to_dict(), "points": len(self.points)}


def _parse_value(params_cls, fixed: Params, key: str, text: str):
    """The value ``KEY=text`` gives the field (cross-field rules not yet applied)."""
    f = _field_keys(params_cls)[key]
    try:
        return getattr(params_cls.parse(f"{key}={text}", base=fixed), f.name), None
    except ShapeError as err:
        # Refused at the fixed parameters: maybe only a cross-field rule; the product decides.
        try:
            return _field_value(f, key, text), err
        except ShapeError:
            return text, err


def make_grid(params_cls: type, grid: list[str] | tuple[str, ...], fixed: str | None = None) -> Grid:
    """The grid of ``params_cls`` (a family's ``Params``) for ``--grid`` texts over ``fixed``.

    Raises ``UsageError``/``ShapeError`` (one line) for bad syntax, unknown keys, a key
    swept twice or both swept and fixed, a value no point accepts, or too many points.
    """
    if not grid:
        raise UsageError("name at least one axis: --grid KEY=VALUES (e.g. --grid batch=1,4,16,64)")
    try:
        base = params_cls.parse(fixed)
    except ShapeError as err:
        raise ShapeError(f"--shape {fixed}: {err}") from None
    keys = _field_keys(params_cls)
    fixed_fields = _given_keys(params_cls, fixed)
    axes: list[Axis] = []
    seen: dict[str, str] = {}
    raw: list[list] = []
    alone: list[list] = []  # each value's error at the fixed parameters (None: fine there)
    for text in grid:
        key, values = split_axis(text)
        f = keys.get(key)
        if f is None:
            raise UsageError(f"--grid {key}: unknown parameter; known: "
                             + ", ".join(g.key for g in params_cls.fields()))
        if f.name in seen:
            raise UsageError(f"--grid {f.key} is given twice ({seen[f.name]}, {text})")
        if f.name in fixed_fields:
            raise UsageError(f"{f.key} is both swept (--grid {text}) and fixed (--shape "
                             f"{fixed_fields[f.name]}=...); drop one")
        seen[f.name] = text
        parsed, texts, errors = [], [], []
        for value in values:
            got, err = _parse_value(params_cls, base, key, value)
            if got not in parsed:
                parsed.append(got)
                texts.append(value)
                errors.append(err)
        axes.append(Axis(f.key, tuple(parsed), text))
        raw.append(texts)
        alone.append(errors)
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_POINTS:
        raise UsageError(f"the grid has {total:,} points, more than {MAX_POINTS:,}; narrow it")
    points = []
    works: list[set] = [set() for _ in axes]
    first_error: list[dict] = [{} for _ in axes]
    for index, combo in enumerate(itertools.product(*(range(len(a.values)) for a in axes))):
        text = ",".join(f"{a.key}={raw[i][j]}" for i, (a, j) in enumerate(zip(axes, combo)))
        coords = {a.key: a.values[j] for a, j in zip(axes, combo)}
        try:
            params, error = params_cls.parse(text, base=base), None
        except ShapeError as err:
            params, error = None, str(err)
        for i, j in enumerate(combo):
            if params is not None:
                works[i].add(j)
            else:
                first_error[i].setdefault(j, error)
        points.append(Point(index, coords, params, error))
    # A value no point accepts is an error: blame first a value refused on its own.
    for own in (True, False):
        for i, axis in enumerate(axes):
            for j in range(len(axis.values)):
                if j not in works[i] and (alone[i][j] is not None) == own:
                    why = alone[i][j] if own else first_error[i][j]
                    raise ShapeError(f"--grid {axis.key}={raw[i][j]}: {why}")
    return Grid(tuple(axes), base, fixed or "", tuple(points))


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: shard K of N, 1-based (1 <= K <= N); None -> ``(1, 1)``."""
    if text is None or text == "":
        return 1, 1
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise UsageError(f"--shard {text!r} is not K/N (e.g. 1/4: the first of 4 shards; K counts from 1)")
    k, n = int(match[1]), int(match[2])
    if n < 1 or not 1 <= k <= n:
        raise UsageError(f"--shard {text}: K must be between 1 and N (K counts from 1), got {k} of {n}")
    return k, n


def shard(points, k: int, n: int) -> list:
    """Shard ``k`` of ``n`` (1-based): the points at positions k-1, k-1+n, k-1+2n ..."""
    if n < 1 or not 1 <= k <= n:
        raise UsageError(f"shard {k}/{n}: K must be between 1 and N")
    return list(points)[k - 1 :: n]


def shard_of(index: int, n: int) -> int:
    """The shard (1-based) that holds the point at position ``index`` of ``n`` shards."""
    return index % n + 1
