"""The SASS hash: taken before timing, kept in the sidecar and the baseline; a timing
change with the same SASS and launch settings is noise ("same code"), and "same code" is
never claimed without the hashes on both sides."""

from __future__ import annotations

import json

import pytest

from paprof import registry
from paprof.measure import sass_hash, static
from paprof.gate import same_code
from paprof.gate import (Baseline, Entry, Provenance, Stat, compare_to_baseline,
                                     load_baseline, save_baseline)
from paprof.family import CommandVariant
from paprof.measure.argv import NcuSettings
from paprof.measure.profile import profile_variant

from helpers import lab_shape




def the_shape():
    return lab_shape("batch=8,context=1024")
SASS = """
        code for sm_90
                Function : kernel_a
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;   /* 0x00000a0000017a02 */
        /*0010*/                   EXIT ;                   /* 0x000000000000794d */
                Function : kernel_b
        /*0000*/                   EXIT ;                   /* 0x000000000000794d */
"""
LAUNCH = {"name": "kernel_a", "grid": [64, 1, 1], "block": [128, 1, 1], "dynamic_smem": 0,
          "registers": 32, "static_smem": 0}

needs_tools = pytest.mark.skipif(
    static._tools("nvcc") is None or static.find_cuobjdump() is None,
    reason="needs nvcc and cuobjdump")


def test_sass_is_split_per_function_and_the_fingerprint_covers_launches():
    parts = sass_hash.split_functions(SASS)
    assert list(parts) == ["kernel_a", "kernel_b"] and parts["kernel_b"].startswith("/*0000*/")
    hashes = {k: sass_hash.digest(v) for k, v in parts.items()}
    one = sass_hash.fingerprint(hashes, sass_hash.launch_settings([LAUNCH]))
    assert one == sass_hash.fingerprint(dict(hashes), sass_hash.launch_settings([dict(LAUNCH)]))
    wider = sass_hash.launch_settings([{**LAUNCH, "block": [256, 1, 1]}])
    assert sass_hash.fingerprint(hashes, wider) != one  # same SASS, another launch
    other = {**hashes, "kernel_a": sass_hash.digest(parts["kernel_a"] + "\nNOP ;")}
    assert sass_hash.fingerprint(other, sass_hash.launch_settings([LAUNCH])) != one


@pytest.mark.lab
@needs_tools
def test_a_cuda_variant_is_hashed_and_other_kinds_say_why_not():
    v3 = sass_hash.hash_sass(registry.get("v3"), the_shape(), "sm_90")
    assert v3["taken"] is True and "paged_decode_v3" in v3["sass"] and "cuobjdump" in v3["how"]
    assert sass_hash.hash_sass(registry.get("v3"), the_shape(), "sm_90")["sass"] == v3["sass"]  # stable
    v4 = sass_hash.hash_sass(registry.get("v4"), the_shape(), "sm_90")
    assert v4["sass"] != v3["sass"]
    command = CommandVariant(id="prog", idea="a program", command=("true",))
    assert sass_hash.hash_sass(command, None)["taken"] is False
    recorded = sass_hash.record(v3, [LAUNCH])
    assert recorded["fingerprint"] == sass_hash.fingerprint(v3["sass"], [LAUNCH])
    assert sass_hash.record(v3, [])["taken"] is False  # no launch settings: no fingerprint


@pytest.mark.lab
def test_without_cuobjdump_the_hash_is_not_taken(monkeypatch):
    monkeypatch.setattr(static, "find_cuobjdump", lambda: None)
    monkeypatch.setattr(static, "find_nvcc", lambda: "/usr/bin/nvcc")
    record = sass_hash.hash_sass(registry.get("v3"), the_shape(), "sm_90")
    assert record == {"taken": False, "why": record["why"]} and "cuobjdump" in record["why"]


@pytest.mark.lab
@needs_tools
def test_profile_variant_records_the_code(fake_bin, fake_launcher, tmp_path):
    fake_launcher.result = {"launches": [{**LAUNCH, "name": "paged_decode_v3"}]}
    run = profile_variant(registry.get("v3"), the_shape(), NcuSettings(), tmp_path / "runs")
    code = json.loads(run.report.with_suffix(".json").read_text())["code"]
    assert code["taken"] is True and code["launches"][0]["block"] == [128, 1, 1]
    assert code["fingerprint"] == sass_hash.fingerprint(code["sass"], code["launches"])
    assert same_code.provenance_fields(run.sidecar)["code"] == code["fingerprint"]


# -- the gate ------------------------------------------------------------------------------

BASE = [100.0, 100.5, 100.2, 99.8, 100.1, 100.3, 99.9]
SLOW = [110.0, 111.0, 110.5, 110.2, 110.8, 111.1, 110.4]


def _entry(samples, code=None, why=None):
    return Entry("paged_decode", "v3", "batch=8", {"duration_us_event": Stat.of(samples),
                                                    "registers_per_thread": Stat.of([64])},
                 Provenance(gpu="NVIDIA H200", code=code, code_why=why))


def test_a_timing_change_with_the_same_code_is_noise():
    verdict = compare_to_baseline(Baseline([_entry(BASE, "f" * 64)]), [_entry(SLOW, "f" * 64)])
    timing = next(r for r in verdict.results if r.metric == "duration_us_event")
    assert timing.verdict == "noise (same code)" and timing.status == "pass"
    assert "identical" in timing.message and verdict.exit_code == 0
    assert any("same code" in n for n in verdict.notes)


def test_changed_code_regresses_and_missing_hashes_claim_nothing():
    changed = compare_to_baseline(Baseline([_entry(BASE, "a" * 64)]), [_entry(SLOW, "b" * 64)])
    assert changed.exit_code == 1 and changed.regressions[0].verdict == "regressed"
    for base_code, now_code in (("a" * 64, None), (None, "a" * 64), (None, None)):
        verdict = compare_to_baseline(
            Baseline([_entry(BASE, base_code, None if base_code else "a --cmd program")]),
            [_entry(SLOW, now_code, None if now_code else "a triton variant")])
        assert verdict.exit_code == 1, (base_code, now_code)
        (note,) = [n for n in verdict.notes if "not known whether the code changed" in n]
        assert ("a --cmd program" in note) == (base_code is None)
        assert ("a triton variant" in note) == (now_code is None)


def test_counts_with_the_same_code_still_fail():
    base = _entry(BASE, "f" * 64)
    now = Entry("paged_decode", "v3", "batch=8", {"duration_us_event": Stat.of(BASE),
                                                   "registers_per_thread": Stat.of([96])},
                Provenance(gpu="NVIDIA H200", code="f" * 64))
    assert compare_to_baseline(Baseline([base]), [now]).exit_code == 1


def test_the_baseline_carries_the_fingerprint_and_old_ones_load(tmp_path):
    path = save_baseline(Baseline([_entry(BASE, "c" * 64)]), tmp_path / "b.json")
    data = json.loads(path.read_text())
    assert data["schema"] == 3 and data["entries"][0]["provenance"]["code"] == "c" * 64
    assert load_baseline(path).entries[0].provenance.code == "c" * 64
    data["schema"] = 2
    for e in data["entries"]:
        for key in ("code", "code_why", "environment"):
            e["provenance"].pop(key)
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = load_baseline(tmp_path / "old.json")
    assert old.entries[0].provenance.code is None
    verdict = compare_to_baseline(old, [_entry(SLOW, "c" * 64)])
    assert verdict.exit_code == 1  # no hash in the old baseline: no "same code"


def test_sidecar_records_read_into_the_provenance():
    assert same_code.provenance_fields({})["code"] is None
    assert "before paprof hashed" in same_code.provenance_fields({})["code_why"]
    assert same_code.provenance_fields({"code": {"taken": False, "why": "a --cmd program"}}) == {
        "code": None, "code_why": "a --cmd program"}
    assert same_code.provenance_fields({"code": {"taken": True, "fingerprint": "ab"}}) == {
        "code": "ab", "code_why": None}


def test_the_ci_outputs_name_the_noise_verdicts():
    import xml.etree.ElementTree as ET

    from paprof.render.check_markdown import verdict_markdown
    from paprof.render.junit import junit_tree

    same = compare_to_baseline(Baseline([_entry(BASE, "f" * 64)]), [_entry(SLOW, "f" * 64)])
    text = verdict_markdown(same)
    assert "pass (*noise*: same SASS and launch settings)" in text and "REGRESSED" not in text
    throttled = Entry("paged_decode", "v3", "batch=8", {"duration_us_event": Stat.of(SLOW)},
                      Provenance(environment="disturbed: throttled (SW power cap)"))
    base = Entry("paged_decode", "v3", "batch=8", {"duration_us_event": Stat.of(BASE)})
    verdict = compare_to_baseline(Baseline([base]), [throttled])
    assert "pass (*ambiguous*: GPU throttled or shared)" in verdict_markdown(verdict)
    xml = ET.tostring(junit_tree(verdict).getroot(), encoding="unicode")
    assert 'value="ambiguous"' in xml and "throttled (SW power cap)" in xml
