"""JSON records read with limits: every record paprof reads back (a run's sidecar, a bench
record, a sweep manifest, a gate baseline, a calibration) comes through :func:`load`.

A record is data others may have written (a store another CI job filled, a shard a
matrix job uploaded), so reading one must end in its value or in one line naming the
file: never a ``RecursionError`` (JSON nested 100,000 deep), an ``OverflowError`` later
(``1e400`` reads as infinity; an integer of 400 digits overflows a float), or minutes
spent on a file of gigabytes. The limits:

* ``MAX_BYTES``: the largest record read (a sweep manifest of 10,000 points is ~10 MB);
* ``MAX_DEPTH``: the deepest nesting (paprof writes at most 5 levels);
* every number finite as a float (``NaN`` passes: paprof writes it for "not measured").

Each refusal is a :class:`Refused` (a ``ValueError``) whose text names the field
(``work.bytes``, ``points[3].coords``); the callers say which file, in one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

MAX_BYTES = 64 << 20
MAX_DEPTH = 64
_LARGEST = sys.float_info.max


class Refused(ValueError):
    """A record over a limit: the text says which, and where."""


def load(path, max_bytes: int | None = None):
    """The JSON value in the file ``path``, read with the limits above. ``OSError`` and
    ``UnicodeDecodeError`` pass through; ``ValueError`` (``json.JSONDecodeError`` or
    :class:`Refused`) for a file that is not JSON or is over a limit."""
    path = Path(path)
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    with open(path, "rb") as handle:
        # read(n) makes an n-byte buffer first: ask for the file's size, not the limit
        raw = handle.read(min(os.fstat(handle.fileno()).st_size, max_bytes) + 1)
    if len(raw) > max_bytes:
        raise Refused(f"larger than {max_bytes:,} bytes, the most a record may be")
    return _loads(raw.decode("utf-8"), raw)


def parse(raw: bytes, max_bytes: int | None = None):
    """The JSON value in ``raw`` (a file's bytes, read by the caller, e.g. through
    ``store_files.read``), with the limits of :func:`load`."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    if len(raw) > max_bytes:
        raise Refused(f"larger than {max_bytes:,} bytes, the most a record may be")
    return _loads(raw.decode("utf-8"), raw)


_SHAPE = bytes.maketrans(b"0123456789Ee-{", b"0000000000ee+[")
"""Each digit as ``0``, an exponent's mark as ``e``, a sign as ``+``: the shape of the
numbers in a text (``_shape``); and each ``{`` as ``[``, to count the brackets at once."""


def _shape(raw: bytes) -> tuple[bool, int]:
    """(``_finite`` of a text, how many ``[`` and ``{`` it holds), told from its UTF-8
    bytes (``raw``): a byte table translates a file's bytes in a third of the time a text
    takes, and what is looked for is ASCII, which no other character's UTF-8 bytes hold."""
    shape = raw.translate(_SHAPE)
    finite = (b"Infinity" not in raw and _EXPONENT.search(shape) is None
              and b"0" * 200 not in shape)
    return finite, shape.count(b"[")


_EXPONENT = re.compile(rb"e\+?000")
"""``e000`` or ``e+000`` in a shape: one pass that stops only at an ``e`` (the two
substring searches stop at nearly every digit)."""


def _finite(text: str) -> bool:
    """Whether every number in ``text`` is finite as a float and every integer within 300
    digits, told without parsing: such a number needs ``Infinity``, an exponent of three
    digits or more, or 200 digits in a row (below that, a number is under 1e200 x 1e99).
    False also where a string only looks like one (the text is then checked number by
    number)."""
    return _shape(text.encode("utf-8", "surrogatepass"))[0]


def loads(text: str):
    """The JSON value of ``text`` with the limits above (:class:`Refused` otherwise)."""
    return _loads(text, text.encode("utf-8", "surrogatepass"))


def _loads(text: str, raw: bytes):
    """``loads(text)``, ``raw`` the text's UTF-8 bytes (a file's, as read)."""
    odd: list = []  # set by the parser when a number is not finite as a float

    def real(s: str) -> float:
        value = float(s)
        if math.isinf(value):
            odd.append(s)
        return value

    def integer(s: str) -> int:
        if len(s) > 300:
            odd.append(s)
        return int(s)

    # no number to check (``_finite``): the C parser alone, no call per number
    finite, brackets = _shape(raw)
    hooks = {} if finite else {"parse_float": real, "parse_int": integer,
                               "parse_constant": real}
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    # The walk (it names the field) costs 4x the parse: a text with few brackets and no
    # odd number (a run's sidecar: 13 brackets) cannot fail it; without an odd number
    # only the depth can, which a walk over the containers alone tells (a baseline of
    # 10,000 entries: 0.1 s against 0.8 s), the field named by the walk when it fails.
    if odd or (brackets > MAX_DEPTH and _deeper(value, MAX_DEPTH)):
        check(value)
    return value


def _deeper(value, limit: int) -> bool:
    """Whether ``value`` (as ``json.loads`` makes it: plain dicts and lists) holds a
    container ``limit`` levels down (the top is level 0); breadth first, containers
    only."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        if depth >= limit:
            return True
        below: list = []
        for item in level:
            below += [v for v in (item.values() if type(item) is dict else item)
                      if type(v) is dict or type(v) is list]
        level, depth = below, depth + 1
    return False


def check(value) -> None:
    """:class:`Refused` unless ``value`` nests at most ``MAX_DEPTH`` deep and each of its
    numbers is finite as a float (NaN passes). Iterative: no recursion to run out of; the
    field's path is spelt out only for the refusal."""
    todo = [(value, 0, None)]
    while todo:
        item, depth, trail = todo.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise Refused(f"nested deeper than {MAX_DEPTH} levels at '{_field(trail)}'")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            todo.extend((v, depth + 1, (trail, k)) for k, v in pairs)
        elif isinstance(item, float):
            if math.isinf(item):
                raise Refused(f"'{_field(trail)}' must be a finite number, got {item}")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > _LARGEST:
            raise Refused(f"'{_field(trail)}' must be a finite number, got an integer past 1.8e308")


def _field(trail) -> str:
    """``work.bytes``, ``points[3].coords``: the path of keys ``trail`` links, each key cut
    to 40 characters."""
    parts = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else "." + str(key)[:40])
    return "".join(reversed(parts)).lstrip(".") or "."



def dumps(value, indent: int, allow_nan: bool = True) -> str:
    """``json.dumps(value, indent=indent, allow_nan=allow_nan)``, the same text, made
    faster: with an indent the standard library encodes in Python, item by item (a
    baseline of 10,000 runs: 2.6 s), but here each container whose items are all plain
    values (the bulk of a baseline: each kernel's counters) is encoded whole by its C
    encoder, an item separator of a newline and the indent making the same lines (1 s).
    Anything else (a key that is not text, a value json would ask ``default`` about, an
    error) is left to ``json.dumps`` itself."""
    if type(indent) is not int or indent < 1:
        return json.dumps(value, indent=indent, allow_nan=allow_nan)
    out: list[str] = []
    try:
        _dump(value, 0, out, _Encoders(indent, allow_nan))
    except (_Other, RecursionError, ValueError):
        return json.dumps(value, indent=indent, allow_nan=allow_nan)
    return "".join(out)


class _Other(Exception):
    """A value :func:`dumps` leaves to ``json.dumps``."""


_PLAIN = frozenset({str, int, float, bool, type(None)})


class _Encoders:
    """The C encoders :func:`dumps` uses: of a plain value, and of a container of plain
    values at each level of indentation."""

    def __init__(self, indent: int, allow_nan: bool):
        self.indent, self.allow_nan = indent, allow_nan
        self.plain = json.JSONEncoder(allow_nan=allow_nan).encode
        self.flat: list = []

    def pad(self, level: int) -> str:
        return "\n" + " " * (self.indent * level)

    def lines(self, item, level: int) -> str:
        """``item`` (a non-empty list or dict of plain values) at ``level``, whole."""
        while len(self.flat) <= level:
            pad = self.pad(len(self.flat) + 1)
            self.flat.append(json.JSONEncoder(separators=("," + pad, ": "),
                                              allow_nan=self.allow_nan).encode)
        text = self.flat[level](item)
        return text[0] + self.pad(level + 1) + text[1:-1] + self.pad(level) + text[-1]


def _dump(item, level: int, out: list, enc: _Encoders) -> None:
    kind = type(item)
    if kind is dict or kind is list or kind is tuple:
        if not item:
            out.append("{}" if kind is dict else "[]")
            return
        values = item.values() if kind is dict else item
        if kind is dict and not all(type(k) is str for k in item):
            raise _Other
        if all(type(v) in _PLAIN for v in values):
            out.append(enc.lines(item, level))
            return
        inner = enc.pad(level + 1)
        out.append("{" if kind is dict else "[")
        if kind is dict:
            for i, (key, v) in enumerate(item.items()):
                out.append((inner if not i else "," + inner) + enc.plain(key) + ": ")
                _dump(v, level + 1, out, enc)
        else:
            for i, v in enumerate(item):
                out.append(inner if not i else "," + inner)
                _dump(v, level + 1, out, enc)
        out.append(enc.pad(level) + ("}" if kind is dict else "]"))
    elif kind in _PLAIN:
        out.append(enc.plain(item))
    else:
        raise _Other
