"""Instructions by class and the cause in an engineer's words (issue 37): the per-opcode
counts InstructionStats records, read by both readers; classes that add up to the
instructions executed and to the instructions term; evidence that moves the term's way;
offsetting terms said in words, never as a share over 100 %."""

from __future__ import annotations

import re

import pytest

from paprof.explain import cause_words as cw
from paprof.read import metrics as M
from paprof.read import ncu_fastread, ncu_reader
from paprof.model.decompose import decompose
from paprof.model.load import load_reports
from helpers import ROOT, recorded, unpacked

ZOO = ROOT / "examples" / "zoo" / "runs.tar.xz"


def _report():
    root = recorded("h200-flash_fwd") / "nvidia-h200" / "flash_fwd"
    return next((root / "mma").glob("*.ncu-rep"))


def test_both_readers_give_the_same_counts_by_opcode():
    path = _report()
    (fast,) = ncu_fastread.read_report(path, [M.OPCODE_METRIC], (), [M.OPCODE_METRIC])
    counts = ncu_reader.read_by_instance(fast, M.OPCODE_METRIC)
    assert counts and counts["HMMA"] > 0
    _context, actions = ncu_reader.open_full(path)
    assert ncu_reader.read_by_instance(actions[0], M.OPCODE_METRIC) == counts


def test_every_opcode_has_one_class_and_the_classes_add_up_to_the_instructions():
    df = load_reports(_report().parent)
    row = df.iloc[0]
    total = sum(row[c] for c in M.OPCODE_COLUMNS)
    assert total == pytest.approx(row["instructions_executed"], rel=1e-12)
    assert row["inst_tensor"] > 0 and row["inst_gmma"] == 0
    assert M.opcode_class("HGMMA") == "gmma" and M.opcode_class("MUFU") == "xu"
    assert M.opcode_class("UIADD3") == "uniform" and M.opcode_class("NOPE") == "other"
    assert all(v != v for v in M.classify_opcodes(None).values())  # NaN: not recorded


@pytest.fixture(scope="module")
def zoo_steps():
    from paprof.explain.compare import compare

    df = load_reports(unpacked(ZOO) / "runs")
    out = {}
    for pair in sorted({v.rsplit("_", 1)[0] for v in df["variant"]}):
        sub = df[df["variant"].isin([f"{pair}_slow", f"{pair}_fast"])]
        cmp = compare(sub, order=[f"{pair}_slow", f"{pair}_fast"])
        out[pair] = cmp.steps[0]
    return out


@pytest.mark.skipif(not ZOO.is_file(), reason="examples/zoo/runs.tar.xz is not there")
def test_the_class_parts_add_up_to_the_instructions_term(zoo_steps):
    for pair, step in zoo_steps.items():
        (term,) = [t for t in step.decomposition.terms if t.key == "instructions"]
        assert term.parts, pair
        assert sum(p.us for p in term.parts) == pytest.approx(term.us, rel=1e-9, abs=1e-9), pair


@pytest.mark.skipif(not ZOO.is_file(), reason="examples/zoo/runs.tar.xz is not there")
def test_words_no_share_over_the_whole_and_evidence_only_the_terms_way(zoo_steps):
    for pair, step in zoo_steps.items():
        assert "more than the whole" not in step.cause, pair
        for share in re.findall(r"(\d+)% of the", step.cause):
            assert int(share) <= 100, (pair, step.cause)
        for t in step.decomposition.causes() + step.decomposition.offsets():
            assert all(e.along(t.us) for e in cw.shown_evidence(t)), (pair, t.key)
    # the math moved to another unit: said as such, not as "instructions issued"
    # (the steps of this fixture run fast -> slow)
    fp64 = zoo_steps["fp64"].cause
    assert "FP64 math (DFMA, DADD, DMUL) instead of FP32 math (FFMA, FADD, FMUL)" in fp64
    # a term larger than the whole: the others went the other way, said in words
    assert "; partly offset by shorter memory waits -" in zoo_steps["vector_loads"].cause
    # the stores are named where the store side waited (drain), loads and stores apart
    assert zoo_steps["uncoalesced"].cause.startswith("uncoalesced loads and stores: sectors per "
                                                     "global load request 4 -> 32, sectors per "
                                                     "global store request 4 -> 32")


class _Side:
    def __init__(self, values):
        self.values = values
        self.kernels = [_Part(values)]

    def get(self, key):
        return self.values.get(key)


class _Part:
    kernel = "k"
    launches = 1

    def __init__(self, values):
        self.values = values
        self.duration_us = values["duration_us"]


def _kernel(instructions: float, time: float, classes: dict | None) -> dict:
    v = {"duration_us": time, "smsp_cycles_elapsed": time * 1000, "smsp_cycles_active": time * 1000,
         "warps_active_per_scheduler": 4.0, "warp_cycles_per_issue": 4.0 * time * 1000 / instructions,
         "sm_count": 1.0, "instructions_issued": 4 * instructions,
         "instructions_executed": 4 * instructions, "stall_wait": 1.0}
    if classes is not None:
        v.update({c: 0.0 for c in M.OPCODE_COLUMNS})
        v.update(classes)
    return v


def test_an_old_report_without_the_per_opcode_counts_says_what_is_missing():
    a, b = _kernel(1e6, 100.0, None), _kernel(2.5e5, 25.0, None)
    dec = decompose(_Side(a), _Side(b))
    text = cw.cause_text(dec)
    assert text.startswith("instructions issued 0.25x (no instruction class: the reports lack "
                           "InstructionStats' per-opcode counts)")


class _Step:
    """A step of several kernels (a program's), each a ``_Part`` of its own name."""

    def __init__(self, kernels: dict):
        self.kernels = []
        for name, values in kernels.items():
            part = _Part(values)
            part.kernel = name
            self.kernels.append(part)
        self.values = {"duration_us": sum(v["duration_us"] for v in kernels.values())}

    def get(self, key):
        return self.values.get(key)


def test_a_step_of_several_kernels_without_opcode_counts_gives_the_steps_ratio():
    # two pairs: "big" halves its instructions (it moves the term most), "small" is
    # unchanged; the step's instructions go 1.1 M -> 0.6 M, not the big pair's 0.5x
    a = _Step({"big": _kernel(1e6, 100.0, None), "small": _kernel(1e5, 10.0, None)})
    b = _Step({"big": _kernel(5e5, 50.0, None), "small": _kernel(1e5, 10.0, None)})
    dec = decompose(a, b)
    (term,) = [t for t in dec.terms if t.key == "instructions"]
    assert term.before == pytest.approx(1.1e6) and term.after == pytest.approx(6e5)
    assert cw.cause_text(dec).startswith("instructions issued 0.545x (no instruction class")


def test_ffma_to_hmma_is_said_as_the_tensor_cores_taking_the_work():
    a = _kernel(1e6, 100.0, {"inst_fp32": 3.8e6, "inst_integer": 2e5})
    b = _kernel(2.5e5, 25.0, {"inst_fp32": 0.0, "inst_tensor": 3.1e4, "inst_integer": 9.69e5})
    text = cw.cause_text(decompose(_Side(a), _Side(b)))
    assert text.startswith("warp-level tensor-core MMA (HMMA, IMMA) instead of FP32 math (FFMA, "
                           "FADD, FMUL): FP32 math (FFMA, FADD, FMUL) 3.8 M -> 0, warp-level "
                           "tensor-core MMA (HMMA, IMMA) 0 -> 31"), text
