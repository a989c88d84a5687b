"""paged_decode says its launch choices in words (``paprof_kernels.paged_decode.words``):
the pure function the launcher calls, no GPU; and the shipped runs carry the words it
gives for what they recorded (kernels/scripts/launch_words.py wrote them once)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from paprof.family import KernelLaunch, Launcher
from paprof_kernels.paged_decode.words import for_launcher, grid_ctas, launch_words

ROOT = Path(__file__).resolve().parents[2]


def test_v6_without_splits_says_its_no_split_kernel_and_why_when_the_grid_fills_the_gpu():
    said, why = launch_words({"num_splits": 1}, ["paged_decode_v6_nosplit"], 512, 132)
    assert said == ["ran its no-split kernel paged_decode_v6_nosplit (num_splits 1)"]
    assert why == "the grid already fills the GPU, 512 CTAs for 132 SMs"
    assert launch_words({"num_splits": 1}, ["paged_decode_v6_nosplit"], 64, 132)[1] == ""  # no reason
    assert launch_words({"num_splits": 1}, ["paged_decode_v6_nosplit"])[1] == ""  # grid unknown


def test_v6_split_16_ways_says_how_many_ways_and_the_sms_the_unsplit_grid_would_leave_idle():
    said, why = launch_words({"num_splits": 16}, ["paged_decode_v6_split"], 512, 132)
    assert said == ["split each sequence 16 ways (paged_decode_v6_split, num_splits 16)"]
    assert why == "512 CTAs where 32 would leave 100 of 132 SMs idle"
    # v4: two kernels; 8,192 CTAs unsplit 2,048, more than the SMs: no reason
    said, why = launch_words({"num_splits": 4}, ["paged_decode_v4_partial", "paged_decode_v4_merge"], 8192, 132)
    assert said == ["split each sequence 4 ways (paged_decode_v4_partial + paged_decode_v4_merge, num_splits 4)"]
    assert why == ""


def test_v7_work_list_says_its_chunks_then_the_rest_of_its_choices():
    details = {"path": "tokens", "waves": 1, "resident_ctas_per_sm": 4, "num_splits": 10, "chunk_pages": 108,
               "work_items": 66, "multi_part_sequences": 12}
    assert launch_words(details, ["paged_decode_v7_tokens"], 528, 132) == ([
        "split the batch into 66 chunks of at most 108 pages (paged_decode_v7_tokens, up to 10 parts a sequence)",
        "chose path tokens, waves 1, resident_ctas_per_sm 4, multi_part_sequences 12"], "")


def test_v7_packed_says_its_equal_ranges_one_a_cta():
    details = {"merge": "fused", "path": "packed", "waves": 1, "resident_ctas_per_sm": 4, "num_splits": 12,
               "ctas": 66, "work_items": 81, "pages_per_cta": 94, "multi_part_sequences": 12}
    assert launch_words(details, ["paged_decode_v7_packed"], 528, 132) == ([
        "cut the batch's pages into 66 equal ranges of at most 94 pages, one a CTA (paged_decode_v7_packed, "
        "81 items, up to 12 parts a sequence)",
        "chose merge fused, path packed, waves 1, resident_ctas_per_sm 4, multi_part_sequences 12"], "")


def test_v7_direct_is_v6s_no_split_kernel_and_nothing_chosen_says_nothing():
    details = {"path": "direct", "waves": 1, "resident_ctas_per_sm": 4, "num_splits": 1, "work_items": 0}
    assert launch_words(details, ["paged_decode_v6_nosplit"], 512, 132) == (
        ["ran its no-split kernel paged_decode_v6_nosplit (num_splits 1)",
         "chose path direct, waves 1, resident_ctas_per_sm 4, work_items 0"],
        "the grid already fills the GPU, 512 CTAs for 132 SMs")
    assert launch_words({}, ["paged_decode_v5"], 512, 132) == ([], "")
    assert launch_words({"num_splits": True}, ["k"], 512, 132) == (["chose num_splits True"], "")


def test_the_launcher_gets_its_words_from_its_first_kernels_grid_and_the_sms():
    kernels = [KernelLaunch("paged_decode_v6_split", (8, 4, 16), (96, 1, 1)),
               KernelLaunch("a_second_kernel", (1, 1, 1), (32, 1, 1))]
    launcher = for_launcher(Launcher("v6", kernels, lambda inputs, out: None, details={"num_splits": 16}), 132)
    assert grid_ctas((8, 4, 16)) == 512
    assert launcher.words() == {
        "said": ["split each sequence 16 ways (paged_decode_v6_split + a_second_kernel, num_splits 16)"],
        "why": "512 CTAs where 32 would leave 100 of 132 SMs idle"}
    assert for_launcher(Launcher("v5", [], lambda inputs, out: None), 132).words() is None


def _script():
    spec = importlib.util.spec_from_file_location("launch_words_script", ROOT / "kernels" / "scripts" / "launch_words.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHIPPED = sorted(p for p in (ROOT / "examples").rglob("*.json")
                 if p.with_suffix(".ncu-rep").is_file() and json.loads(p.read_text()).get("launch_details")
                 and json.loads(p.read_text()).get("family") == "paged_decode")


def test_every_shipped_run_with_choices_was_given_its_words():
    assert len(SHIPPED) >= 20
    assert all("launch_words" in json.loads(p.read_text()) for p in SHIPPED)


@pytest.mark.parametrize("sidecar", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_a_shipped_runs_words_are_the_familys_for_what_it_recorded(sidecar):
    """Its details, its kernels, its report's grid and SM count, through ``launch_words``."""
    assert _script().words_of(sidecar) == json.loads(sidecar.read_text())["launch_words"]
