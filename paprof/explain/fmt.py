"""Numbers as the reports and the step stories print them.

One place for units and rounding, so that a sentence and the table cell beside it agree.
Every function takes a raw number (or None / NaN) and returns text; a missing value prints
as ``n/a``.
"""

from __future__ import annotations

import math
import os
import re

from paprof.model.numbers import is_missing

MISSING = "n/a"


def sig(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures, no exponent, no trailing zeros."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def count(value) -> str:
    """An integer with thousands separators: ``2,048``."""
    if is_missing(value):
        return MISSING
    return f"{round(float(value)):,}"


def pct(value, decimals: int = 1) -> str:
    """A percentage: ``41.7 %``, ``50 %`` (a whole number drops its ``.0``)."""
    if is_missing(value):
        return MISSING
    text = f"{float(value):,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text == "-0":
        text = "0"
    return f"{text} %"


def duration_us(value) -> str:
    """A duration given in microseconds: ``22.6 us``, ``3.35 ms``, ``1.2 s``."""
    if is_missing(value):
        return MISSING
    us = float(value)
    return _scaled(us, (("s", 1e6), ("ms", 1e3))) or f"{sig(us)} us"


def bytes_decimal(value) -> str:
    """DRAM traffic in decimal units (they go with bandwidth in TB/s): ``2.15 GB``."""
    if is_missing(value):
        return MISSING
    b = float(value)
    return _scaled(b, (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))) or f"{sig(b)} B"


def _scaled(b: float, units) -> str | None:
    """``b`` in the first of ``units`` ((name, scale), largest first) it reaches, else None."""
    for unit, scale in units:
        if abs(b) >= scale:
            return f"{sig(b / scale)} {unit}"
    return None


def bytes_binary(value) -> str:
    """On-chip sizes in binary units (as the hardware limits are quoted): ``16 KiB``."""
    if is_missing(value):
        return MISSING
    b = float(value)
    return _scaled(b, (("MiB", 1 << 20), ("KiB", 1 << 10))) or f"{round(b):,} B"


def bandwidth_gbs(value) -> str:
    """Bandwidth given in GB/s: ``850 GB/s``, ``3.92 TB/s``."""
    if is_missing(value):
        return MISSING
    gbs = float(value)
    return _scaled(gbs, (("TB/s", 1e3),)) or f"{sig(gbs)} GB/s"


def flop_rate(tflops) -> str:
    """A FLOP rate given in TFLOP/s: ``2.49 TFLOP/s``, ``830 GFLOP/s``."""
    if is_missing(tflops):
        return MISSING
    t = float(tflops)
    return f"{sig(t)} TFLOP/s" if t >= 1 else f"{sig(t * 1e3)} GFLOP/s"


def big(value) -> str:
    """A large count (cycles): ``39.1 M``, ``812 k``, ``1.2 G``."""
    if is_missing(value):
        return MISSING
    v = float(value)
    return _scaled(v, (("G", 1e9), ("M", 1e6), ("k", 1e3))) or sig(v)


def number(value, digits: int = 3) -> str:
    """A plain quantity to ``digits`` significant figures: ``15.5``."""
    if is_missing(value):
        return MISSING
    return sig(float(value), digits)


def ratio(value) -> str:
    """A speedup factor: ``1.48x``, ``16x``."""
    if is_missing(value):
        return MISSING
    v = float(value)
    return f"{sig(v, 3 if v < 100 else 4)}x"


def signed_pct(value, decimals: int = 1) -> str:
    """A relative change, with its sign: ``+12.5 %``, ``-40 %``."""
    if is_missing(value):
        return MISSING
    text = pct(value, decimals)
    return text if text.startswith("-") or text == "0 %" else "+" + text


def signed_duration_us(us: float) -> str:
    """A change of time, with its sign: ``+1.2 ms``, ``-40 us`` (no sign for zero)."""
    return ("+" if us > 0 else "-" if us < 0 else "") + duration_us(abs(us))


def signed_pts(value, decimals: int = 1) -> str:
    """A change of a percentage, in points: ``+27.5 pts``."""
    if is_missing(value):
        return MISSING
    text = f"{float(value):+.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("+0", "-0"):
        text = "0"
    return f"{text} pts"


FORMATTERS = {
    "count": count,
    "pct": pct,
    "duration_us": duration_us,
    "bytes": bytes_decimal,
    "bytes_binary": bytes_binary,
    "bandwidth_gbs": bandwidth_gbs,
    "flop_rate": flop_rate,
    "big": big,
    "number": number,
    "ratio": ratio,
}
"""Formatter by kind name, for the report's metric table."""


_BOUNDARY = re.compile(r"(?<=[_/,<>()\s])|(?<=:)(?!:)|(?<=[a-z0-9])(?=[A-Z])")
"""Where an identifier may break: after ``_ / : , < > ( )`` or a space, and between a
lower-case letter or digit and an upper-case one (``BatchDecode|With|Paged``)."""


def identifier_breaks(name: str) -> list[int]:
    """The positions at which ``name`` may be broken without cutting an identifier."""
    return sorted({m.start() for m in _BOUNDARY.finditer(name)} - {0, len(name)})


def shorten_identifier(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters, cut at an identifier boundary and ending in
    "…" when it is longer; a name with no boundary early enough is kept whole."""
    if len(name) <= width:
        return name
    cuts = [i for i in identifier_breaks(name) if i <= width - 1]
    return name[: cuts[-1]].rstrip() + "…" if cuts else name


def identifier_tail(name: str, width: int) -> str:
    """The end of ``name`` in at most ``width`` characters, cut at an identifier boundary
    and starting with "…" when it is longer (``…v4_partial``): where the kernels of one
    variant share their prefix, the tail tells them apart; no boundary late enough: whole."""
    if len(name) <= width:
        return name
    cuts = [i for i in identifier_breaks(name) if len(name) - i <= width - 1]
    return "…" + name[cuts[0]:].lstrip() if cuts else name


def abbreviated(names, width: int) -> dict[str, str]:
    """Each of ``names`` in at most ``width`` characters where it can be, still told apart
    as the whole names are (a narrow terminal's column: "paged_de..." on every row told
    nothing): a name that fits stays whole; a longer one loses the prefix all the names
    share (cut at an identifier boundary, "…" in its place), then, still too long, its
    middle (its start and its end kept: ``paged…_partial``). Names whose short forms
    would be the same are kept whole."""
    names = list(dict.fromkeys(str(n) for n in names))
    prefix = 0
    if len(names) > 1:
        common = os.path.commonprefix(names)
        prefix = max([i for i in identifier_breaks(common + "\0") if i <= len(common)],
                     default=0)
    short = {}
    for name in names:
        text = name
        if len(text) > width and prefix >= 3:
            text = "…" + name[prefix:]
            if len(text) > width and "+" in text:  # kernels summed: each part's prefix
                text = "+".join("…" + part[prefix:] if part.startswith(common[:prefix])
                                else part for part in name.split("+"))
        if len(text) > width >= 5:
            head = (width - 1) // 2
            text = text[:head] + "…" + text[len(text) - (width - 1 - head):]
        short[name] = text
    seen: dict[str, int] = {}
    for text in short.values():
        seen[text] = seen.get(text, 0) + 1
    return {n: (t if seen[t] == 1 else n) for n, t in short.items()}


def wrapped(text: str, width: int, indent: str = "    ") -> list[str]:
    """``text`` (one line) in lines of at most ``width`` characters, broken at spaces (a
    number keeps its unit: "16.8 %" is never split), the continuations indented past the
    line's own indentation by ``indent``; a word longer than a line is cut."""
    import textwrap

    if len(text) <= width:
        return [text]
    own = text[:len(text) - len(text.lstrip(" "))]
    kept = re.sub(r"(?<=\d) (?=%|[kMGT]?B\b|[mu]?s\b|pts\b|x\b)", "\u00a0", text)
    lines = textwrap.wrap(kept, width, subsequent_indent=own + indent, break_on_hyphens=False)
    return [line.replace("\u00a0", " ") for line in lines] or [""]
