"""The run record: one typed model of a run, written by the profiler, read by every command."""

import json
from pathlib import Path

import pytest

from paprof.errors import UserError
from paprof.read import store
from paprof.read.record import REPORT_BYTES, SCHEMA, RunRecord, as_record
from helpers import recorded

SHIPPED = recorded("h200")


def _a_shipped_sidecar() -> Path:
    return next(SHIPPED.rglob("*.json"))


def test_a_shipped_sidecar_reads_into_typed_fields_without_renaming_a_key():
    path = _a_shipped_sidecar()
    raw = json.loads(path.read_text())
    rec = RunRecord.read(path)
    assert rec.has_sidecar and rec.data == raw and rec.to_dict() == raw
    assert rec.gpu == raw["gpu"] and rec.commit == raw["git_commit"]
    assert rec.verified is raw["verification"]["passed"]
    assert rec.shape_key == raw["shape_slug"] and rec.label == raw["variant"]
    assert rec.kernels == tuple(dict.fromkeys(k["kernel"] for k in raw["profiled_kernels"]))
    # also the JSON as a read-only mapping, for the keys without an attribute
    assert rec["work"] == raw["work"] and rec.get("nope") is None and dict(rec) == raw
    assert rec.origin.git_commit == raw["git_commit"] and rec.origin.gpu_slug == raw["gpu_slug"]


def test_the_store_and_the_table_hand_out_the_record():
    from paprof.model.load import load_reports

    run = store.find_runs(SHIPPED)[0]
    assert isinstance(run.sidecar, RunRecord)
    df = load_reports([run.report])
    assert all(isinstance(s, RunRecord) for s in df["sidecar"])


def test_a_foreign_report_gets_a_record_of_what_the_table_knows():
    rec = RunRecord.foreign(label="sgemm", gpu="NVIDIA A10G", shape="sgemm",
                            report_path="/x/y/z/sgemm.ncu-rep")
    assert not rec.has_sidecar and not rec and rec.gpu == "NVIDIA A10G"
    assert rec.shape_key == "sgemm" and rec.report == "y/z/sgemm.ncu-rep"
    assert rec.verified is None and rec.commit is None and as_record(rec) is None


def test_labelled_keeps_the_sidecar_and_fills_only_what_it_lacks():
    rec = RunRecord.from_sidecar({"variant": "v3", "gpu": "NVIDIA H200", "shape_slug": "b1"})
    shown = rec.labelled("v3 (b1)", gpu="other", shape="b64", report_path="a/b/c/d.ncu-rep")
    assert shown.label == "v3 (b1)" and shown.gpu == "NVIDIA H200" and shown.shape_key == "b1"
    assert shown.report == "b/c/d.ncu-rep" and shown.data == rec.data


def test_with_values_adds_a_key_and_the_profiler_writes_the_record(tmp_path):
    rec = RunRecord.from_sidecar({"schema": SCHEMA, "variant": "v1"})
    more = rec.with_values(**{REPORT_BYTES: 12})
    assert more[REPORT_BYTES] == 12 and REPORT_BYTES not in rec
    store.write_sidecar(tmp_path / "r.json", more)
    assert RunRecord.read(tmp_path / "r.json").data == {"schema": SCHEMA, "variant": "v1",
                                                        REPORT_BYTES: 12}


@pytest.mark.parametrize("key, value, want", [
    ("created", 5, "text"), ("launches", float("inf"), "a finite number"),
    ("work", [1], "a table"), ("sections", "SpeedOfLight", "a list"),
    ("launch_words", ["split 4 ways"], "a table"),
    ("launch_words.said", {"said": "split 4 ways"}, "a list of text"),
    ("launch_words.why", {"said": ["split 4 ways"], "why": 4}, "text"),
])
def test_a_damaged_record_is_one_line_naming_the_file_and_the_key(tmp_path, key, value, want):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"variant": "v1", key.split(".")[0]: value}))
    with pytest.raises(UserError, match=f"damaged record {path}: '{key}' must be {want}"):
        RunRecord.read(path)


def test_a_record_keeps_the_words_its_family_said_and_an_older_one_has_none():
    words = {"said": ["split the rows 4 ways (splits 4)", "chose order longest"],
             "why": "128 CTAs would leave 4 of 132 SMs idle"}
    rec = RunRecord.from_sidecar({"schema": 2, "variant": "b", "launch_details": {"splits": 4, "order": "longest"},
                                  "launch_words": words})
    assert rec.launch_said == tuple(words["said"]) and rec.launch_why == words["why"]
    assert rec["launch_words"] == words and rec.launch_details == {"splits": 4, "order": "longest"}
    older = RunRecord.from_sidecar({"schema": 2, "variant": "b", "launch_details": {"splits": 4}})
    assert (older.launch_said, older.launch_why, older.launch_details) == ((), None, {"splits": 4})
    empty = RunRecord.from_sidecar({"schema": 2, "variant": "b", "launch_words": {}})  # a run without words
    assert (empty.launch_said, empty.launch_why) == ((), None)


def test_a_plain_mapping_in_a_hand_made_table_reads_as_a_record():
    rec = as_record({"variant": "v2", "git_dirty": True, "git_commit": "abc"})
    assert isinstance(rec, RunRecord) and rec.commit_text == "abc (dirty)"
    assert as_record(float("nan")) is None and as_record({}) is None
