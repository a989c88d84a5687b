"""The decomposition of a step's time (``paprof.model.decompose``) and the ledger that
groups it (``paprof.model.ledger``): terms that add up to the measured difference
exactly, each moving only when its factor moves, checked on made-up kernels whose cause
is known and on the recorded H200 runs (tests/data)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from paprof.model import decompose as D
from paprof.explain.cause_words import cause_text
from paprof.model.ledger import TERMS, from_decomposition, group
from paprof.read.metrics import STALL_REASONS

from helpers import recorded


def kernel(instructions=1e6, cpi=8.0, warps=4.0, idle=1.0, clock=1980.0, stalls=None, sms=132, **extra):
    """A kernel's values built FROM the identity's factors, so its time is known:
    time = idle x instructions x cpi / warps / clock (instructions per scheduler)."""
    stalls = stalls or {"long_scoreboard": cpi - 1.0, "selected": 1.0}
    assert sum(stalls.values()) == pytest.approx(cpi)
    active = instructions * cpi / warps
    elapsed = active * idle
    values = {"duration_us": elapsed / clock, "smsp_cycles_elapsed": elapsed,
              "smsp_cycles_active": active, "warps_active_per_scheduler": warps,
              "warp_cycles_per_issue": cpi, "instructions_issued": instructions * 4 * sms,
              "sm_count": sms}
    values.update({f"stall_{r}": stalls.get(r, 0.0) for r in STALL_REASONS})
    values.update(extra)
    return values


@dataclass
class Part:
    kernel: str
    values: dict
    duration_us: float = 0.0

    def __post_init__(self):
        self.duration_us = self.values["duration_us"]


@dataclass
class Variant:
    kernels: list
    values: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)

    def __post_init__(self):
        self.values = {"duration_us": sum(k.duration_us for k in self.kernels)}

    def get(self, column):
        return self.values.get(column)


def step(before: list[tuple[str, dict]], after: list[tuple[str, dict]]):
    return D.decompose(Variant([Part(n, v) for n, v in before]), Variant([Part(n, v) for n, v in after]))


def test_the_terms_add_up_to_the_measured_difference_exactly():
    a = kernel(instructions=2e6, cpi=9.0, warps=3.0, idle=1.4, clock=1900.0,
               stalls={"long_scoreboard": 5.0, "wait": 2.0, "barrier": 1.0, "selected": 1.0})
    b = kernel(instructions=1.1e6, cpi=6.0, warps=7.0, idle=1.05, clock=1980.0,
               stalls={"long_scoreboard": 2.5, "wait": 1.5, "short_scoreboard": 1.0, "selected": 1.0})
    dec = step([("k", a)], [("k", b)])
    assert dec.exact
    assert dec.total_us == pytest.approx(dec.delta_us, rel=1e-12)
    led = from_decomposition(dec)
    assert sum(led.terms.values()) + led.residual == pytest.approx(dec.delta_us, rel=1e-12)
    assert led.residual == 0.0
    assert [k for k, _w, _u in led.rows()] == [k for k, _ in TERMS] + ["unexplained"]


@pytest.mark.parametrize("change, key", [
    (dict(instructions=4e6), "instructions"),
    (dict(warps=1.0), "warps"),
    (dict(idle=2.5), "idle"),
    (dict(clock=990.0), "clock"),
    (dict(cpi=20.0, stalls={"long_scoreboard": 19.0, "selected": 1.0}), "stall:long_scoreboard"),
    (dict(cpi=20.0, stalls={"long_scoreboard": 7.0, "barrier": 12.0, "selected": 1.0}), "stall:barrier"),
    (dict(cpi=20.0, stalls={"long_scoreboard": 7.0, "short_scoreboard": 12.0, "selected": 1.0}),
     "stall:short_scoreboard"),
])
def test_one_factor_moved_is_the_whole_difference_and_the_cause(change, key):
    a = kernel()
    b = kernel(**change)
    dec = step([("k", a)], [("k", b)])
    assert dec.delta_us > 0
    assert [t.key for t in dec.causes()] == [key]
    moved = {t.key: t.us for t in dec.terms if abs(t.us) > 1e-9 * dec.delta_us}
    assert moved == {key: pytest.approx(dec.delta_us, rel=1e-9)}


def test_a_difference_within_the_noise_names_no_cause():
    a = kernel()
    b = kernel(instructions=1.01e6)  # 1 % slower: under NOISE_SHARE
    dec = step([("k", a)], [("k", b)])
    assert dec.causes() == []
    assert cause_text(dec).startswith("within the noise")
    # a measured spread wider than the difference is noise too, whatever its share
    wide = D.decompose(Variant([Part("k", a)]), Variant([Part("k", kernel(instructions=1.1e6))]),
                       spread_us=1e9)
    assert wide.causes() == []


def test_kernels_are_matched_by_name_then_role_and_the_rest_is_new_or_gone():
    gemm_a = kernel(instructions=5e6)
    gemm_b = kernel(instructions=5e6)
    norm = kernel(instructions=2e5)
    silu = kernel(instructions=3e5)
    fused = kernel(instructions=2e5)
    dec = step([("sm90_xmma_gemm_bf16_tile128x256", gemm_a), ("rms_norm_kernel", norm),
                ("vectorized_elementwise_kernel<silu>", silu), ("vectorized_elementwise_kernel<mul>", silu)],
               [("nvjet_hsh_256x128_2x1", gemm_b), ("triton_red_fused_rmsnorm_0", fused),
                ("triton_poi_fused_silu_mul_1", fused)])
    pairing = dec.pairing
    assert [(a.kernel, b.kernel) for a, b in pairing.pairs] == [
        ("sm90_xmma_gemm_bf16_tile128x256", "nvjet_hsh_256x128_2x1")]
    assert sorted(k.kernel for k in pairing.gone) == ["rms_norm_kernel", "vectorized_elementwise_kernel<mul>",
                                                      "vectorized_elementwise_kernel<silu>"]
    assert [k.kernel for k in pairing.new] == ["triton_red_fused_rmsnorm_0", "triton_poi_fused_silu_mul_1"]
    assert dec.total_us == pytest.approx(dec.delta_us, rel=1e-12)
    assert dec.causes()[0].key == "kernel-"
    assert group("kernel-") == group("kernel+") == "kernels"


def test_a_single_kernel_replaced_by_two_pairs_with_the_longer_one():
    one = kernel(instructions=1e6)
    dec = step([("paged_decode_v3", one)],
               [("paged_decode_v4_partial", kernel(instructions=1.5e6)), ("paged_decode_v4_merge", kernel(instructions=1e4))])
    assert [(a.kernel, b.kernel) for a, b in dec.pairing.pairs] == [("paged_decode_v3", "paged_decode_v4_partial")]
    assert [k.kernel for k in dec.pairing.new] == ["paged_decode_v4_merge"]


def test_a_kernel_without_the_identitys_counters_is_one_unexplained_term():
    a = {"duration_us": 100.0}
    b = {"duration_us": 50.0}
    dec = step([("k", a)], [("k", b)])
    assert not dec.exact
    assert [(t.key, t.us) for t in dec.terms] == [("unexplained", -50.0)]
    assert dec.causes() == [] and cause_text(dec) is None


def test_the_logmean():
    assert D.logmean(2.0, 2.0) == 2.0
    assert D.logmean(1.0, math.e) == pytest.approx(math.e - 1.0)


def test_the_identity_holds_on_the_shipped_h200_runs():
    # active cycles x warps = instructions issued / schedulers x cycles per instruction,
    # to the cycle, on every shipped paged_decode run: the decomposition is exact there.
    from paprof.model.load import load_reports

    df = load_reports([recorded("h200")])
    for _, row in df.iterrows():
        f = D.factors(row.to_dict())
        assert f is not None, row["variant"]
        active = row["smsp_cycles_active"]
        assert f.instructions * f.cpi / f.warps == pytest.approx(active, rel=1e-6)
        assert f.idle == pytest.approx(row["smsp_cycles_elapsed"] / active, rel=1e-6)


def test_the_showcase_steps_name_their_mechanism_first():
    from paprof.api import write_report

    res = write_report(["v2", "v3", "v4", "v5", "v6"], runs=recorded("h200"), out=None, markdown="-")
    steps = {f"{s.before}->{s.after}": s for s in res.comparison.steps}
    # v2 -> v3: v2's time is its warps waiting on each K load (long scoreboard); v3 stages
    # a page at a time: 5.3x fewer global load requests, the waits fall first
    s = steps["v2->v3"]
    assert s.decomposition.causes()[0].key == "stall:long_scoreboard"
    # the mechanism first, with its counter, then the term (issue 37)
    assert s.cause.startswith("fewer round trips to memory: global load requests 25.2 M -> 4.72 M")
    assert "(memory waits (long scoreboard) -765 us" in s.cause.split(";")[0]
    # v3 -> v4 the same in reverse
    assert steps["v3->v4"].decomposition.causes()[0].key == "stall:long_scoreboard"
    # v5 -> v6: the same kernel, within the noise
    assert steps["v5->v6"].decomposition.causes() == []
    for st in steps.values():
        assert st.decomposition.total_us == pytest.approx(st.decomposition.delta_us, rel=1e-9)


def test_several_launches_of_one_kernel_are_one_kernel_and_the_identity_still_holds():
    # many small launches against one: each launch's fill and drain are idle schedulers
    small = kernel(instructions=1e5, idle=1.6)
    big = kernel(instructions=32e5, idle=1.02)
    dec = step([("chunk", small)] * 32, [("whole", big)])
    assert [(a.kernel, b.kernel, a.launches) for a, b in dec.pairing.pairs] == [("chunk", "whole", 32)]
    assert dec.total_us == pytest.approx(dec.delta_us, rel=1e-9)
    first = dec.causes()[0]
    assert first.key == "idle"
    assert [(e.label, e.before, e.after) for e in first.evidence if e.label == "launches"] == [("launches", 32.0, 1.0)]


def test_mma_to_wgmma2_names_the_tensor_pipe_not_the_loads_tma_replaced():
    # TMA's copies are not global loads: "SM<-L1 global-load traffic falls 257x" was an
    # artefact. The cause is 4.5x fewer instructions issued: warpgroup MMA (HGMMA) in place
    # of warp-level MMA (HMMA), and far less address arithmetic.
    from paprof.api import write_report

    built = write_report(["flash_fwd/mma", "flash_fwd/wgmma2"], runs=recorded("h200-flash_fwd"),
                         out=None, markdown=None)
    (s,) = built.comparison.steps
    first = s.decomposition.causes()[0]
    assert first.key == "instructions"
    assert s.cause.startswith("warpgroup tensor-core MMA (HGMMA, wgmma) instead of warp-level "
                              "tensor-core MMA (HMMA, IMMA)")
    assert "(instructions issued -16.5 ms; net -12 ms)" in s.cause
    assert "global-load" not in s.cause
