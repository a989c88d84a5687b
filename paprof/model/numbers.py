"""A table cell as a number or a plain value: how the model (and everything above it)
reads the tidy table's cells, NaN, NA, numpy scalars and text included."""

from __future__ import annotations

import math


def finite(x) -> float | None:
    """``x`` as a finite float; None for anything else (None, text, a flag, a list, NaN,
    NA, inf): how analysis reads a table cell as a number."""
    if x is None or isinstance(x, (str, bool)):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def is_missing(value) -> bool:
    """True for None, NaN and anything that is not a number."""
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def plain(value):
    """A plain Python value: NaN/NA and "" -> None, numpy scalars -> float/int/str."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return value
    if isinstance(value, str):
        return value or None
    try:
        if value != value:  # NaN, pd.NA raises TypeError below
            return None
    except (TypeError, ValueError):
        return None
    if hasattr(value, "item"):
        value = value.item()
    return value
