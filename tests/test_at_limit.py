"""The unit-at-its-limit identity: a DRAM-bound step's time as bytes over bandwidth."""

import math

import pytest

import paprof
from paprof.explain.cause_words import at_limit_text
from paprof.model.decompose import AT_LIMIT_PCT, at_limit

from helpers import recorded


def _run(us, dram_bytes, pct):
    return {"duration_us": us, "dram_bytes": dram_bytes, "dram_throughput_pct": pct}


def test_the_two_terms_add_up_to_the_difference_and_mean_what_they_say():
    # half the bytes at 90 % of peak, then the same bytes a little faster
    lim = at_limit(_run(200.0, 8e8, 90.0), _run(95.0, 4e8, 92.0))
    assert lim is not None
    assert math.isclose(lim.bytes_us + lim.bandwidth_us, 95.0 - 200.0, rel_tol=1e-12)
    assert lim.bytes_us < -90 and lim.bandwidth_us < 0  # fewer bytes, a higher bandwidth
    text = at_limit_text(lim)
    assert text.startswith("DRAM at its limit (90 % -> 92 % of peak): 2x fewer bytes")
    assert "a higher bandwidth" in text
    # the same bytes, slower: all of it is bandwidth
    lim = at_limit(_run(100.0, 4e8, 90.0), _run(110.0, 4e8, 82.0))
    assert lim.bytes_us == 0 and math.isclose(lim.bandwidth_us, 10.0)


@pytest.mark.parametrize("before, after", [
    (_run(100.0, 4e8, AT_LIMIT_PCT - 1), _run(90.0, 4e8, 90.0)),  # not at the limit before
    (_run(100.0, 4e8, 90.0), _run(90.0, None, 90.0)),  # bytes unknown
    (_run(0.0, 4e8, 90.0), _run(90.0, 4e8, 90.0)),  # no duration
])
def test_no_identity_where_the_unit_is_not_at_its_limit_in_both(before, after):
    assert at_limit(before, after) is None


def test_the_shipped_dram_bound_step_says_it_and_the_compute_bound_ones_do_not():
    cmp = paprof.compare(["v2", "v3", "v5", "v6"], runs=recorded("h200")).comparison
    by = {(s.before, s.after): s for s in cmp.steps}
    v5v6 = by[("v5", "v6")]
    lim = v5v6.decomposition.limit
    assert lim is not None and lim.pct_before >= AT_LIMIT_PCT
    assert math.isclose(lim.bytes_us + lim.bandwidth_us, v5v6.decomposition.delta_us, rel_tol=1e-9)
    assert v5v6.decomposition.to_dict()["at_limit"]["unit"] == "DRAM"
    assert by[("v2", "v3")].decomposition.limit is None  # v2 is not DRAM-bound (24 % of L2)
