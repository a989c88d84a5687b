"""What a paged_decode variant chose at launch, in words (``Launcher.said`` / ``why``).

paprof records the words with the run (``launch_words``) and its reports read them after
the variant's label: "v6 split each sequence 16 ways (paged_decode_v6_split, num_splits
16): 512 CTAs where 32 would leave 100 of 132 SMs idle". ``launch_words`` is a pure
function of what the launcher knows (its ``launch_details``, the kernels it launches, the
grid of the first one, the GPU's SM count), so it runs without a GPU: in tests, and in
kernels/scripts/launch_words.py, which gives runs recorded before the words existed theirs
from their recorded details and report.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from paprof.family import chose


def _count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _n(x) -> str:
    return f"{round(x):,}"


def launch_words(details: Mapping, kernels: Sequence[str], grid: int | None = None,
                 sm_count: int | None = None) -> tuple[list[str], str]:
    """``(said, why)`` of a launch: the clauses that say its ``details`` (each read after the
    variant's label) and what made the first one right on this GPU ("" when nothing did).

    ``num_splits`` 1: "ran its no-split kernel K (num_splits 1)", why "the grid already
    fills the GPU, G CTAs for S SMs" when the grid has a CTA for every SM; more splits:
    "split each sequence N ways (K, num_splits N)", why "G CTAs where G/N would leave .. of
    S SMs idle" when the unsplit grid had fewer CTAs than SMs. v7's work list
    (``work_items``, ``chunk_pages``): "split the batch into W chunks of at most P pages (K,
    up to N parts a sequence)"; its packed ranges (``ctas``, ``pages_per_cta``): "cut the
    batch's pages into C equal ranges of at most P pages, one a CTA (K, W items, up to N
    parts a sequence)". The details no clause says follow as "chose key value, ...".
    ``kernels`` are the names launched (K, joined by " + "), ``grid`` the first kernel's
    CTAs."""
    rest = dict(details)
    kernel = " + ".join(kernels)
    splits = rest.pop("num_splits") if _count(rest.get("num_splits")) else None  # else said raw
    parts = f", up to {splits} parts a sequence)" if _count(splits) else ")"
    chunks, chunk = rest.get("work_items"), rest.get("chunk_pages")
    ctas, per_cta = rest.get("ctas"), rest.get("pages_per_cta")
    said, why = [], ""
    if _count(chunks) and _count(ctas) and _count(per_cta):  # packed ranges, one a CTA
        del rest["work_items"], rest["ctas"], rest["pages_per_cta"]
        said.append(f"cut the batch's pages into {_n(ctas)} equal ranges of at most {_n(per_cta)} "
                    f"pages, one a CTA ({kernel}, {_n(chunks)} items{parts}")
    elif _count(chunks) and _count(chunk):  # a work list of chunks
        del rest["work_items"], rest["chunk_pages"]
        said.append(f"split the batch into {_n(chunks)} chunks of at most {_n(chunk)} pages ({kernel}{parts}")
    elif splits == 1:
        said.append(f"ran its no-split kernel {kernel} (num_splits 1)")
        if grid and sm_count and grid >= sm_count:
            why = f"the grid already fills the GPU, {_n(grid)} CTAs for {_n(sm_count)} SMs"
    elif splits:
        said.append(f"split each sequence {splits} ways ({kernel}, num_splits {splits})")
        unsplit = grid / splits if grid and sm_count else None
        if unsplit is not None and unsplit < sm_count:
            why = (f"{_n(grid)} CTAs where {_n(unsplit)} would leave {_n(sm_count - unsplit)} of "
                   f"{_n(sm_count)} SMs idle")
    if rest:
        said.append(chose(rest))
    return said, why


def grid_ctas(grid) -> int:
    """The CTAs of a grid ``(x, y, z)``."""
    return math.prod(int(g) for g in grid)


def for_launcher(launcher, sm_count: int):
    """``launcher`` with its words (``said``, ``why``) from its details, its kernels and
    the GPU's SM count; the same launcher."""
    kernels = launcher.kernels
    launcher.said, launcher.why = launch_words(
        launcher.details, [k.name for k in kernels], grid_ctas(kernels[0].grid) if kernels else None, sm_count)
    return launcher
