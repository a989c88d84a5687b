"""The explanation as data (``paprof compare --json``, ``paprof.explain.explanation``):
a versioned document whose numbers are the report's and whose terms add up."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from paprof.explain.explanation import SCHEMA
from paprof.cli import main

from helpers import recorded

H200 = recorded("h200")


def _json(args) -> dict:
    res = CliRunner().invoke(main, ["compare", *args, "--runs", str(H200), "--json", "-"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_compare_json_is_the_versioned_explanation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = _json(["v3", "v4", "v5"])
    assert doc["schema"] == SCHEMA and doc["comparable"] is True and doc["cross"] == []
    assert [r["label"] for r in doc["runs"]] == ["v3", "v4", "v5"]
    assert doc["runs"][1]["kernels"][1]["kernel"] == "paged_decode_v4_merge"
    assert doc["runs"][0]["ceiling"]["origin"] in ("measured", "datasheet")
    first = doc["transitions"][0]
    assert (first["before"], first["after"]) == ("v3", "v4")
    dec = first["decomposition"]
    assert sum(t["us"] for t in dec["terms"]) == pytest.approx(dec["delta_us"], rel=1e-9)
    assert first["causes"][0]["mechanism"] == "memory"
    assert first["causes"][0]["counters"][0]["label"].startswith("global load requests")
    assert [k["status"] for k in first["kernels"]] == ["matched", "new"]
    # the mechanism first, then its term, the launch words last (issue 37)
    assert first["cause"].startswith("more round trips to memory") and "(memory waits (long scoreboard) +" in first["cause"]
    assert first["cause"].endswith("num_splits 4))") and "(launch: v4 split each sequence 4 ways" in first["cause"]
    assert first["causes"][0]["words"] == first["cause"].split(" (memory waits")[0]
    text = json.dumps(doc)
    assert "NaN" not in text and "Infinity" not in text


def test_compare_json_to_a_file_and_not_twice_to_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["compare", "v2", "v3", "--runs", str(H200), "--json", "e.json"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "e.json").read_text())["schema"] == SCHEMA
    again = CliRunner().invoke(main, ["compare", "v2", "v3", "--runs", str(H200), "--json", "e.json"])
    assert again.exit_code == 2 and "exists" in again.output  # never overwritten silently
    both = CliRunner().invoke(main, ["compare", "v2", "v3", "--runs", str(H200), "--json", "-",
                                     "--markdown", "-"])
    assert both.exit_code == 2


def test_the_notebook_has_the_same_document():
    import paprof

    report = paprof.compare(["v2", "v3"], runs=H200)
    doc = report.explanation
    assert doc["schema"] == SCHEMA
    assert doc["transitions"][0]["cause"] == report.steps.iloc[0]["cause"]
