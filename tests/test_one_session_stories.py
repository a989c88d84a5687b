"""One ncu session for several variants (issue 40) tells the same stories as one ncu a
variant: the same kind of cause and the same bottlenecks on every step.

Recorded on the device tool's H100 80GB (ncu 2025.3.1, `--clock-control none`,
2026-12-06, `kernels/scripts/one_session.sh`): `paprof run --family paged_decode --variant
all` under the default preset, first one ncu a variant (`old-default/`,
PAPROF_NCU_PER_VARIANT=1), then one session split into a report a run (`new-default/`),
on the same GPU one after the other. Each report is read and explained by today's code.

The largest term of a step's decomposition is not compared: between kernels of the same
work (v5 -> v6 -> v7, all three DRAM-bound at the same bytes) it is noise, and it changed
between the two stores as it changes between two runs made the same way."""

from __future__ import annotations

import re

import pytest

from helpers import DATA, unpacked

pytestmark = pytest.mark.slow  # two comparisons of nine runs: about 5 s

ORDER = ["baseline", "handbook", "v1", "v2", "v3", "v4", "v5", "v6", "v7"]


def _stories(store):
    import paprof

    report = paprof.compare(ORDER, runs=store)
    out = []
    for step in report.explanation["transitions"]:
        kind = re.split(r"[:(0-9]", step.get("cause") or "", maxsplit=1)[0].strip()
        out.append((step["before"], step["after"], kind, step["bottleneck_before"], step["bottleneck_after"]))
    return out


@pytest.fixture(scope="module")
def stores():
    root = unpacked(DATA / "one-session-h100.tar.xz")
    return _stories(root / "old-default"), _stories(root / "new-default")


def test_one_session_tells_every_step_as_one_ncu_a_variant(stores):
    alone, shared = stores
    assert len(alone) == len(ORDER) - 1
    assert all(kind for _b, _a, kind, *_ in alone), alone  # every step has a cause
    assert shared == alone


def test_the_comparison_can_tell_the_stores_apart(stores):
    """The check above compares stories that differ between steps (it would notice a
    store whose steps all read alike)."""
    alone, _shared = stores
    assert len({(kind, b, a) for _x, _y, kind, b, a in alone}) >= 5
