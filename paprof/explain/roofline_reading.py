"""Where each variant stands against its roofline: bound by a roof, far under it, or
faster than a measured roof (one library kernel's rate, not the chip's peak).

``reading(v, roofs)`` takes a ``paprof.model.roofline.VariantRoofline``'s binding point
(or its work-model point when no measured level binds) and decides; the report words it.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.model import roofline as R

NEAR_ROOF_PCT = 60.0
"""A point under this share of what its roof allows is not limited by that roof: the
roofline says where the point sits, the bottleneck verdict says what limits it."""

BOUND, FAR_UNDER, ABOVE = "bound", "far under", "above"


@dataclass
class Reading:
    point: object
    """The point read (``roofline.Point``), with ``bound`` set."""
    roof: object
    """The roof over it (``roofline.Roof``)."""
    standing: str
    """``BOUND``, ``FAR_UNDER`` (under ``NEAR_ROOF_PCT`` of what it allows) or ``ABOVE``
    (faster than the roof allows: a measured roof)."""


def reading(v, roofs: dict) -> Reading | None:
    """Where ``v`` (a ``VariantRoofline``) stands; None without a bounded point."""
    p = v.binding
    if p is None or p.bound is None:
        p = v.point(R.WORK)
        if p is None or p.bound is None:
            return None
    share = p.of_attainable
    if share is not None and share > 100.0:
        standing = ABOVE
    elif share is not None and share < NEAR_ROOF_PCT:
        standing = FAR_UNDER
    else:
        standing = BOUND
    return Reading(p, roofs[p.bound.roof], standing)
