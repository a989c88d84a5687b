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
    return loads(raw.decode("utf-8"))


def parse(raw: bytes, max_bytes: int | None = None):
    """The JSON value in ``raw`` (a file's bytes, read by the caller, e.g. through
    ``store_files.read``), with the limits of :func:`load`."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    if len(raw) > max_bytes:
        raise Refused(f"larger than {max_bytes:,} bytes, the most a record may be")
    return loads(raw.decode("utf-8"))


def loads(text: str):
    """The JSON value of ``text`` with the limits above (:class:`Refused` otherwise)."""
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

    try:
        value = json.loads(text, parse_float=real, parse_int=integer, parse_constant=real)
    except RecursionError:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    # The walk (it names the field) costs 4x the parse: a text with few brackets and no
    # odd number (a run's sidecar: 13 brackets) cannot fail it.
    if odd or text.count("[") + text.count("{") > MAX_DEPTH:
        check(value)
    return value


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
