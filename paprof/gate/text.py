"""Number formatting shared by the gate's outputs (units from the catalogue, text from fmt)."""

from __future__ import annotations

from paprof.explain import fmt

_FORMAT_BY_UNIT = {
    "%": fmt.pct,
    "us": fmt.duration_us,
    "byte": fmt.bytes_decimal,
    "GB/s": fmt.bandwidth_gbs,
    "cycle": fmt.big,
}


def fmt_value(value: float, unit: str) -> str:
    """``84.9 %``, ``3.35 ms``, ``2.15 GB`` (the catalogue's unit picks the formatter)."""
    return _FORMAT_BY_UNIT.get(unit, fmt.number)(value)


def fmt_delta(delta: float, unit: str, sign: bool = True) -> str:
    """A change in the metric's unit; percentage points (``-27.5 pts``) for ``%`` metrics."""
    if unit == "%":
        text = fmt.signed_pts(delta, decimals=2)
        return text if sign else text.lstrip("+-")
    text = fmt_value(abs(delta), unit)
    if not sign:
        return text
    return ("-" if delta < 0 else "+") + text
