"""The gate's verdicts carry their cause (``paprof.gate.cause``, ``check --json``).

On real shipped runs: a v3 baseline of the H200 paged-decode runs checked against v2's
report relabelled as v3 (v2 loads the KV cache with 4-byte loads: 5x the global load
requests), and zoo pairs whose one cause is known (``examples/zoo/causes.toml``), the
fast variant's baseline checked against the slow one's run relabelled as the fast one.
"""

from __future__ import annotations

import json
import tarfile
import xml.etree.ElementTree as ET

import pytest

from paprof import gate
from paprof.explain import cause_words as cw
from paprof.model import decompose as dc
from paprof.gate import cause
from helpers import EXAMPLES, ROOT, relabelled, shipped

ZOO = ROOT / "examples" / "zoo" / "runs.tar.xz"


def _compared(a: str, b: str):
    from paprof.explain.compare import compare_reports

    return compare_reports([shipped(a), shipped(b)]).variants


# -- the counters a baseline keeps --------------------------------------------------------


class _Recording(dict):
    seen: set = set()

    def get(self, key, default=None):
        _Recording.seen.add(key)
        return super().get(key, default)


def test_columns_hold_every_counter_the_decomposition_reads(monkeypatch):
    before, after = _compared("v3", "v4")  # v4: two kernels
    real = dc._values
    _Recording.seen = set()
    monkeypatch.setattr(dc, "_values", lambda part: _Recording(real(part)))
    assert dc.decompose(before, after) is not None
    assert _Recording.seen and _Recording.seen <= set(dc.COLUMNS), _Recording.seen - set(dc.COLUMNS)


def test_the_snapshot_decomposes_exactly_as_compare_does():
    for a, b in (("v3", "v2"), ("v3", "v4"), ("v1", "v3")):
        before, after = _compared(a, b)
        full = dc.decompose(before, after)
        compact = dc.decompose(cause._Side(cause.snapshot(before)), cause._Side(cause.snapshot(after)))
        assert compact.to_dict() == full.to_dict(), (a, b)  # every term and counter
        said = cause.explain(cause.snapshot(before), cause.snapshot(after))
        assert said.available and said.text == cw.cause_text(full), (a, b)


def test_the_baseline_file_keeps_the_counters(v3_baseline):
    data = json.loads(v3_baseline.read_text())
    assert data["schema"] == 3
    counters = data["entries"][0]["counters"]
    assert counters["version"] == cause.COUNTERS_VERSION
    (kernel,) = counters["kernels"]
    assert kernel["kernel"] == "paged_decode_v3"
    assert {"smsp_cycles_active", "warp_cycles_per_issue", "stall_long_scoreboard"} <= set(kernel["values"])
    assert set(kernel["values"]) <= set(dc.COLUMNS)
    assert gate.load_baseline(v3_baseline).entries[0].counters == counters


# -- the check, as a user runs it --------------------------------------------------------


def test_a_regression_names_its_cause_everywhere(invoke, v3_baseline, v2_as_v3, tmp_path):
    out = {k: tmp_path / f"check.{k}" for k in ("xml", "md", "json")}
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--junit", out["xml"],
                    "--markdown", out["md"], "--json", out["json"])
    assert result.exit_code == 1, result.output
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("CAUSE")]
    assert line.startswith("CAUSE paged_decode/v3 (regressed): kernel time +1")
    assert "memory waits (long scoreboard)" in line and "global load requests" in line

    data = json.loads(out["json"].read_text())
    assert data["schema"] == "paprof.check/1" and data["passed"] is False and data["exit_code"] == 1
    by_metric = {r["metric"]: r for r in data["results"]}
    duration = by_metric["duration_us"]
    assert duration["outcome"] == "regressed" and duration["set_by"] == "tolerance"
    assert duration["now"]["value"] > duration["limit"] > duration["baseline"]["value"]
    assert duration["delta"] == pytest.approx(duration["now"]["value"] - duration["baseline"]["value"])
    assert by_metric["dram_bytes"]["outcome"] == "same"
    (found,) = data["causes"]
    assert found["outcome"] == "regressed" and found["available"] and found["reason"] is None
    top = found["terms"][0]
    assert (top["mechanism"], top["term"]) == ("memory", "stall:long_scoreboard")
    requests = next(c for c in top["counters"] if c["label"].startswith("global load requests"))
    assert requests["after"] > 5 * requests["before"] > 0  # v2's 4-byte loads
    assert sum(t["share"] for t in found["terms"]) <= 1.5

    failures = ET.parse(out["xml"]).getroot().findall(".//failure")
    assert failures and all("\ncause: kernel time +" in f.text for f in failures)
    md = out["md"].read_text()
    assert "### Causes" in md and "**paged_decode/v3** (regressed): kernel time" in md


def test_the_cause_needs_only_the_baseline_file(invoke, v3_baseline, v2_as_v3, tmp_path):
    data = json.loads(v3_baseline.read_text())
    data["entries"][0]["provenance"]["report"] = str(tmp_path / "gone" / "v3.ncu-rep")
    v3_baseline.write_text(json.dumps(data))
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3)
    assert result.exit_code == 1
    assert "CAUSE paged_decode/v3 (regressed): kernel time" in result.stdout
    assert "unavailable" not in result.stdout


def test_an_old_baseline_loads_and_says_why_there_is_no_cause(invoke, v3_baseline, v2_as_v3, tmp_path):
    data = json.loads(v3_baseline.read_text())
    data["schema"] = 2
    del data["entries"][0]["counters"]
    data["entries"][0]["provenance"]["report"] = str(tmp_path / "gone" / "v3.ncu-rep")
    v3_baseline.write_text(json.dumps(data))
    out = tmp_path / "v.json"
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--json", out)
    assert result.exit_code == 1, result.output  # the verdict itself is unchanged
    assert "cause unavailable: the baseline holds no counters" in result.stdout
    assert "paprof baseline update --force" in result.stdout
    (found,) = json.loads(out.read_text())["causes"]
    assert not found["available"] and found["terms"] == [] and "no counters" in found["reason"]


def test_an_old_baseline_reads_its_report_where_it_is_still_there(invoke, v3_baseline, v2_as_v3):
    data = json.loads(v3_baseline.read_text())
    data["schema"] = 2
    del data["entries"][0]["counters"]
    v3_baseline.write_text(json.dumps(data))
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3)
    assert "CAUSE paged_decode/v3 (regressed): kernel time" in result.stdout


def test_an_improvement_gets_a_short_cause(invoke, tmp_path):
    runs = relabelled(shipped("v2"), tmp_path / "runs", "v3")
    base = tmp_path / "v2.json"
    assert invoke("baseline", "update", "--runs", runs, "--variant", "v3", "--out", base).exit_code == 0
    result = invoke("check", "--baseline", base, "--runs", EXAMPLES, "--metric", "duration_us")
    assert result.exit_code == 0, result.output
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("CAUSE")]
    assert line.startswith("CAUSE paged_decode/v3 (improved): kernel time -5")
    assert "long scoreboard" in line and "; then" not in line


def test_no_cause_and_the_same_file_twice(invoke, v3_baseline, v2_as_v3, tmp_path):
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--no-cause")
    assert result.exit_code == 1 and "CAUSE" not in result.stdout
    same = tmp_path / "x.out"
    twice = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--json", same,
                   "--markdown", same)
    assert twice.exit_code == 2 and "same file" in twice.stderr and not same.exists()


def test_json_is_not_written_over_a_foreign_file(invoke, v3_baseline, v2_as_v3, tmp_path):
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": 1}\n')
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--json", mine)
    assert result.exit_code == 2 and "--force" in result.stderr
    assert mine.read_text() == '{"mine": 1}\n'


def test_corrupt_counters_are_one_line_exit_2(invoke, v3_baseline, v2_as_v3):
    data = json.loads(v3_baseline.read_text())
    data["entries"][0]["counters"]["kernels"][0]["values"]["stall_wait"] = "fast"
    v3_baseline.write_text(json.dumps(data))
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3)
    assert result.exit_code == 2
    assert "corrupt" in result.stderr and "stall_wait" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# -- the zoo: pairs with one known cause ---------------------------------------------------


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    if not ZOO.is_file():
        pytest.skip(f"{ZOO} is not there")
    where = tmp_path_factory.mktemp("zoo")
    with tarfile.open(ZOO) as tar:
        tar.extractall(where, filter="data")
    return where / "runs"


@pytest.mark.parametrize("pair, mechanisms, counter", [
    ("spills", {"memory", "instructions"}, "local-memory (spill) instructions"),
    ("uncoalesced", {"memory"}, "sectors per global load request"),
    ("bank_conflicts", {"shared"}, "shared-memory"),
])
def test_a_zoo_regression_names_its_known_cause(invoke, zoo, tmp_path, pair, mechanisms, counter):
    base = tmp_path / "base.json"
    made = invoke("baseline", "update", "--runs", zoo, "--variant", f"{pair}_fast", "--out", base)
    assert made.exit_code == 0, made.output
    (slow,) = sorted((zoo / "nvidia-h200" / "zoo" / f"{pair}_slow").glob("*.ncu-rep"))
    runs = relabelled(slow, tmp_path / "runs", f"{pair}_fast")
    out = tmp_path / "v.json"
    result = invoke("check", "--baseline", base, "--runs", runs, "--json", out)
    assert result.exit_code == 1, result.output
    (found,) = json.loads(out.read_text())["causes"]
    top = found["terms"][0]
    assert top["mechanism"] in mechanisms, found["paragraph"]
    assert any(c["label"].startswith(counter) and c["before"] != c["after"] for c in top["counters"]), \
        found["paragraph"]
