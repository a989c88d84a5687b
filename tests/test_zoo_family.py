"""The ground-truth zoo, ``examples/zoo/``: pairs of kernels, each slow for one known cause.

Runs anywhere (no GPU, no nvcc): discovery through ``[tool.paprof]``, every pair's two
variants, ``causes.toml`` against the family and its vocabulary, each variant refusing the
other pairs' parameters, and the float64 reference, output and work model of every pair on
tiny NumPy inputs.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from paprof import registry
from paprof.errors import ShapeError
from paprof.family import CudaVariant, Work

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "zoo"

TINY = {
    "uncoalesced": "n=8192",
    "vector_loads": "n=64",
    "occupancy_shared_mem": "n=100",
    "partial_wave": "sms=1,iters=3",
    "bank_conflicts": "n=64",
    "barrier": "n=100,iters=5",
    "divergence": "n=100,iters=5",
    "dependent_chain": "sms=1,iters=5",
    "l2_resident": "n=100,iters=3",
    "atomics": "n=5000",
    "spills": "n=10,iters=3",
    "launch_overhead": "n=256,iters=4",
    "fp64": "n=100,iters=5",
    "case23": "n=64,iters=96",
}


def _ours(module) -> bool:
    return (getattr(module, "__file__", None) or "").startswith(str(EXAMPLE))


@pytest.fixture(scope="module")
def zoo():
    """The ``zoo`` family as paprof discovers it from inside the example folder, and the
    family module; the folder leaves ``sys.path`` and its modules ``sys.modules`` after."""
    registry.clear()
    mp = pytest.MonkeyPatch()
    mp.chdir(EXAMPLE)
    mp.setattr(sys, "path", list(sys.path))
    try:
        fam = registry.discover()["zoo"]
        yield fam, sys.modules[fam.module]
    finally:
        mp.undo()
        registry.clear()
        for name in [n for n, m in list(sys.modules.items()) if _ours(m)]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def causes():
    return tomllib.loads((EXAMPLE / "causes.toml").read_text())


def test_discovered_with_every_pair(zoo):
    fam, mod = zoo
    assert "[tool.paprof]" in fam.origin and fam.name == "zoo"
    ids = [v.id for v in fam.variants]
    assert len(mod.PAIRS) >= 13
    assert ids == [f"{pair}_{speed}" for pair in mod.PAIRS for speed in ("slow", "fast")]
    for v in fam.variants:
        assert isinstance(v, CudaVariant) and v.build is not None
        assert v.idea and "\n" not in v.idea and v.launch


def test_sources_define_the_kernels(zoo):
    fam, mod = zoo
    for v in fam.variants:
        pair, speed = v.id.rsplit("_", 1)
        (path,) = v.source_paths()
        name = mod.kernel_name(pair, speed)
        # case18's slow variant runs two kernels, {name}1 and {name}2
        assert re.search(rf'extern "C" __global__ void(\s+__launch_bounds__\([^)]*\))?\s+{name}\d?\(',
                         path.read_text()), (v.id, path)
        assert v.kernel_regex == name
        units = v.compile_units(fam.params(pair=pair))
        assert units == [((path.name,), {})]


def test_causes_toml_matches_the_family(zoo, causes):
    fam, mod = zoo
    vocabulary = causes["vocabulary"]
    assert set(vocabulary) == set(mod.CAUSES)
    ids = {v.id for v in fam.variants}
    pairs = causes["pair"]
    assert [p["name"] for p in pairs] == list(mod.PAIRS)
    for p in pairs:
        assert p["slow"] in ids and p["fast"] in ids, p["name"]
        assert (p["slow"], p["fast"]) == (f"{p['name']}_slow", f"{p['name']}_fast")
        assert p["cause"] in vocabulary and p["cause"] == mod.PAIRS[p["name"]].cause
        params = fam.parse(p["shape"])
        assert params.pair == p["name"]
        assert p["evidence"], p["name"]
        for e in p["evidence"]:
            assert e["metric"] and e["moves"] and "slow" in e and "fast" in e


def test_variants_refuse_other_pairs(zoo):
    fam, mod = zoo
    for v in fam.variants:
        pair = v.id.rsplit("_", 1)[0]
        v.check(fam.params(pair=pair))
        other = next(q for q in mod.PAIRS if q != pair)
        with pytest.raises(ShapeError, match=f"pair={pair}"):
            v.check(fam.params(pair=other))


def test_default_shapes_and_slugs(zoo):
    fam, mod = zoo
    for pair in mod.PAIRS:
        p = fam.parse(f"pair={pair}")
        assert p.spec() == f"pair={pair}" and p.slug() == pair.replace("_", "-")
        assert p.size > 0 and fam.work(p).bytes > 0
    assert fam.parse("pair=partial_wave").size == (132 + 4) * 1024 * 16
    with pytest.raises(ShapeError):
        fam.parse("pair=uncoalesced,n=1000")  # not whole rows of 4096
    with pytest.raises(ShapeError):
        fam.parse("pair=bank_conflicts,n=100")


@pytest.mark.parametrize("pair", list(TINY))
def test_reference_on_tiny_inputs(zoo, pair):
    fam, mod = zoo
    p = fam.parse(f"pair={pair},{TINY[pair]}")
    inputs = fam.inputs(p, 7, np)
    for a in inputs.values():
        assert a.dtype == np.float32 and np.all(a != 0)
    out = fam.output(p, np)
    ref = fam.reference(p, inputs, np)
    assert ref.dtype == np.float64 and ref.shape == out.shape
    assert np.all(np.isfinite(ref))
    assert isinstance(fam.work(p), Work) and fam.tolerance_for(p) >= 0
    # every launch plan covers the output with a positive grid, for both variants
    for plan in mod.PLANS[pair]:
        grid = plan.grid(p, p.sms)
        assert all(g >= 1 for g in grid) and plan.launches(p) >= 1
        args = plan.args(p, inputs, out, 0)
        assert any(a is out for a in args)


def test_reference_values(zoo):
    """Spot checks of the functions against a direct float64 computation."""
    fam, mod = zoo
    p = fam.parse("pair=barrier,n=50,iters=9")
    x = fam.inputs(p, 1, np)["x"].astype(np.float64)
    y = x.copy()
    for _ in range(9):
        y = y * mod.C + (1 - mod.C)
    np.testing.assert_allclose(fam.reference(p, {"x": x.astype(np.float32)}, np), y, rtol=1e-12)
    p = fam.parse("pair=spills,n=3,iters=2")
    x = fam.inputs(p, 1, np)["x"]
    v = x.astype(np.float64)
    for _ in range(2):
        v = 0.75 * v + 0.25 * np.roll(v, -1, axis=0)
    np.testing.assert_allclose(fam.reference(p, {"x": x}, np), v, rtol=1e-12)
    p = fam.parse("pair=l2_resident,n=1000,iters=3")
    i = fam.inputs(p, 1, np)
    x = i["x"].astype(np.float64)
    want = [sum(x[(j + r * mod.L2_SHIFT) % 1000] for r in range(3)) for j in (0, 1, 443, 999)]
    np.testing.assert_allclose(fam.reference(p, i, np)[[0, 1, 443, 999]], want, rtol=1e-12)
    np.testing.assert_array_equal(i["big"].reshape(3, -1), np.stack([i["x"]] * 3))
