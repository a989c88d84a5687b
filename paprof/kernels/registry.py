"""The catalogue of kernel families and their variants.

A variant is a ``.cu`` file (or several) plus what the rest of paprof needs to know about
it without a GPU: its id, a one-line idea, the regular expression its kernels' names
match (for ncu's kernel filter and for grouping a report's rows), the shapes it accepts,
and how it is launched. The GPU-side launch code lives in each family's ``variants.py``
and is imported only when a variant is built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from paprof.errors import UserError
from paprof.kernels.problem import Shape

KERNELS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Variant:
    """One kernel variant of a family."""

    family: str
    """Family id, e.g. ``paged_decode``; also its folder under ``paprof/kernels``."""
    id: str
    """Variant id, unique within the family (``baseline``, ``v1`` ...)."""
    idea: str
    """One line: what this version changes and why it should be faster."""
    kernel_regex: str
    """Regular expression matching the names of every kernel this variant launches."""
    sources: tuple[str, ...]
    """``.cu`` files in the family folder."""
    launch: str
    """Grid and block, in words, for ``paprof list`` and the reports."""
    check: Callable[[Shape], None] = field(repr=False, compare=False)
    """Raises ``ShapeError`` (one line, says why) for shapes the variant cannot take."""
    order: int = 0
    """Position in the family's story (baseline first)."""

    @property
    def name(self) -> str:
        return f"{self.family}/{self.id}"

    @property
    def nvtx_range(self) -> str:
        """The NVTX push/pop range the launcher wraps the profiled launches in."""
        return f"{self.family}.{self.id}"

    def source_paths(self) -> list[Path]:
        return [KERNELS_DIR / self.family / s for s in self.sources]

    def build(self, shape: Shape, device):
        """Compile for ``device`` and return a launcher (GPU only; imports CuPy)."""
        self.check(shape)
        module = importlib.import_module(f"paprof.kernels.{self.family}.variants")
        return module.build(self, shape, device)

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "variant": self.id,
            "idea": self.idea,
            "kernel_regex": self.kernel_regex,
            "sources": list(self.sources),
            "launch": self.launch,
        }


_FAMILIES = ("paged_decode",)


def _family_variants(family: str) -> list[Variant]:
    module = importlib.import_module(f"paprof.kernels.{family}.catalog")
    return sorted(module.VARIANTS, key=lambda v: v.order)


def families() -> tuple[str, ...]:
    return _FAMILIES


def variants(family: str | None = None) -> list[Variant]:
    """All variants, or a family's, in story order."""
    if family is not None and family not in _FAMILIES:
        raise UserError(f"unknown kernel family {family!r}; known: {', '.join(_FAMILIES)}")
    names = (family,) if family else _FAMILIES
    return [v for f in names for v in _family_variants(f)]


def get(name: str, family: str | None = None) -> Variant:
    """A variant by ``id`` or ``family/id``; unknown names list the known ones."""
    if "/" in name:
        family, name = name.split("/", 1)
    candidates = [v for v in variants(family) if v.id == name]
    if not candidates:
        known = ", ".join(v.id for v in variants(family))
        raise UserError(f"unknown variant {name!r}; known: {known} (or 'all')")
    if len(candidates) > 1:
        raise UserError(
            f"variant {name!r} exists in several families; say which: "
            + ", ".join(v.name for v in candidates)
        )
    return candidates[0]


def resolve(names, family: str | None = None) -> list[Variant]:
    """Expand ``all`` and drop repeats, keeping the order given."""
    out: list[Variant] = []
    for name in names or ():
        chosen = variants(family) if name == "all" else [get(name, family)]
        out.extend(v for v in chosen if v not in out)
    if not out:
        raise UserError("name at least one variant (--variant v3, or --variant all)")
    return out
