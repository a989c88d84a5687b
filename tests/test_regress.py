"""The regression gate's library: stats, tolerance edges, mismatches, the baseline file.

Synthetic per-launch tables built by ``make_table``; values are chosen so that the
differences land exactly on the allowance (binary-exact numbers), so each edge test
fails if ``>`` becomes ``>=`` or the allowance is computed differently.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from paprof import gate
from paprof.read.metrics import BY_COLUMN
from paprof.gate import (
    Baseline,
    BaselineMismatch,
    Settings,
    Stat,
    Tolerance,
    compare_to_baseline,
    judge,
    load_baseline,
    make_baseline,
    parse_tolerance,
    save_baseline,
)
from paprof.errors import UserError

from helpers import OTHER_SHAPE, SECTIONS, SHAPE, make_rows, make_table, verdict_for


@pytest.fixture
def baseline_v3() -> Baseline:
    return make_baseline(make_table(make_rows()))


def status(verdict, metric="dram_throughput_pct"):
    (result,) = [r for r in verdict.results if r.metric == metric]
    return result.status


# -- stats and rules ---------------------------------------------------------------------


def test_stat_is_median_and_half_range():
    s = Stat.of([84.0, 80.0, 81.0, 79.0, 90.0])
    assert (s.value, s.spread, s.n) == (81.0, 5.5, 5)
    assert Stat.of([3.0]) == Stat(3.0, 0.0, 1)


def test_every_gated_metric_is_a_catalogue_column_with_a_direction():
    for metric, rule in gate.GATE_RULES.items():
        assert metric in BY_COLUMN or metric in gate.UNITS
    assert gate.GATE_RULES["dram_throughput_pct"].higher_is_better
    assert gate.GATE_RULES["achieved_bandwidth_gbs"].higher_is_better
    assert not gate.GATE_RULES["duration_us"].higher_is_better
    assert not gate.GATE_RULES["dram_bytes"].higher_is_better
    assert gate.GATE_RULES["dram_bytes"].tolerance == Tolerance(relative=0.005)
    assert gate.GATE_RULES["dram_throughput_pct"].tolerance == Tolerance(absolute=3.0)
    assert gate.GATE_RULES["duration_us"].tolerance == Tolerance(relative=0.05)


@pytest.mark.parametrize(
    "metric, base, now, expected",
    [
        # DRAM throughput: 3 percentage points, higher is better
        ("dram_throughput_pct", 80.0, 77.0, "pass"),
        ("dram_throughput_pct", 80.0, 76.9375, "regressed"),
        ("dram_throughput_pct", 80.0, 83.0, "pass"),
        ("dram_throughput_pct", 80.0, 83.0625, "improved"),
        # duration: 5 % of the baseline, lower is better
        ("duration_us", 1024.0, 1075.2, "pass"),
        ("duration_us", 1024.0, 1075.25, "regressed"),
        ("duration_us", 1024.0, 972.75, "improved"),
        # DRAM bytes: 0.5 %, lower is better (2**31 * 0.005 = 10737418.24)
        ("dram_bytes", 2**31, 2**31 + 10737418.0, "pass"),
        ("dram_bytes", 2**31, 2**31 + 10737419.0, "regressed"),
        ("dram_bytes", 2**31, 2**31 - 10737419.0, "improved"),
    ],
)
def test_default_tolerance_edges(metric, base, now, expected):
    tol = gate.GATE_RULES[metric].tolerance
    _, got = judge(Stat(base, 0.0, 1), Stat(now, 0.0, 1), metric, tol)
    assert got == expected


def test_spread_widens_the_allowance_beyond_the_tolerance():
    base = Stat.of([78.0, 80.0, 82.0])  # 80 +- 2
    tol = Tolerance(absolute=3.0)
    allowed, got = judge(base, Stat.of([74.0, 76.0, 78.0]), "dram_throughput_pct", tol)
    assert (allowed, got) == (4.0, "pass")  # 4 pts down: the ranges still touch
    _, got = judge(base, Stat.of([73.75, 75.75, 77.75]), "dram_throughput_pct", tol)
    assert got == "regressed"


def test_tolerance_wins_when_larger_than_the_spread():
    allowed, got = judge(Stat(80.0, 0.5, 5), Stat(77.0, 0.5, 5), "dram_throughput_pct",
                         Tolerance(absolute=3.0))
    assert (allowed, got) == (3.0, "pass")


@pytest.mark.parametrize(
    "text, metric, tol",
    [
        ("dram_throughput_pct=2", "dram_throughput_pct", Tolerance(absolute=2.0)),
        ("duration_us=3%", "duration_us", Tolerance(relative=0.03)),
        ("dram_bytes = 0.5 %", "dram_bytes", Tolerance(relative=0.005)),
        ("10%", "*", Tolerance(relative=0.1)),
        ("0", "*", Tolerance()),
    ],
)
def test_parse_tolerance(text, metric, tol):
    got_metric, got_tol = parse_tolerance(text)
    assert got_metric == metric
    assert got_tol.absolute == pytest.approx(tol.absolute)
    assert got_tol.relative == pytest.approx(tol.relative)


def test_default_tolerances_print_as_option_text_that_parses_back():
    for metric, rule in gate.GATE_RULES.items():
        assert parse_tolerance(f"{metric}={rule.tolerance.spec()}") == (metric, rule.tolerance)


@pytest.mark.parametrize("text", ["fast", "dram_throughput_pct=", "-1", "nan", "sm_clock=3"])
def test_parse_tolerance_rejects(text):
    with pytest.raises(UserError):
        parse_tolerance(text)


def test_ungateable_metric_is_a_user_error():
    with pytest.raises(UserError, match="no direction declared"):
        make_baseline(make_table(make_rows()), metrics=("grid_size",))


# -- comparing tables --------------------------------------------------------------------


def test_same_runs_pass(baseline_v3):
    verdict = verdict_for(baseline_v3, make_rows())
    assert verdict.passed and verdict.exit_code == 0
    assert {r.metric for r in verdict.results} == set(gate.DEFAULT_METRICS)
    assert {r.status for r in verdict.results} == {"pass"}


def test_lost_dram_throughput_is_a_regression_named_in_the_message(baseline_v3):
    verdict = verdict_for(baseline_v3, make_rows(dram=(57.0,), duration=(1400.0,)))
    assert not verdict.passed and verdict.exit_code == 1
    assert {r.metric for r in verdict.regressions} == {"dram_throughput_pct", "duration_us"}
    dram = next(r for r in verdict.regressions if r.metric == "dram_throughput_pct")
    assert dram.allowed == 3.0 and dram.limit == 77.0 and dram.delta == -23.0
    for part in ("paged_decode/v3", "dram_throughput_pct", "DRAM throughput", "80 %", "57 %",
                 "-23 pts", ">= 77 %"):
        assert part in dram.message
    assert "FAIL" in verdict.summary


def test_settings_choose_metrics_and_tolerances(baseline_v3):
    rows = make_rows(dram=(75.0,), duration=(1100.0,))
    only_dram = verdict_for(baseline_v3, rows, metrics=("dram_throughput_pct",))
    assert [r.metric for r in only_dram.results] == ["dram_throughput_pct"]
    assert not only_dram.passed
    loose = verdict_for(baseline_v3, rows, metrics=("dram_throughput_pct", "duration_us"),
                        tolerances={"dram_throughput_pct": Tolerance(absolute=5.0),
                                    "*": Tolerance(relative=0.1)})
    assert loose.passed
    assert status(loose, "duration_us") == "pass"
    tighter = verdict_for(baseline_v3, rows, metrics=("duration_us",),
                          tolerances={"*": Tolerance(relative=0.0999)})
    assert not tighter.passed


def test_metric_not_in_baseline_is_a_user_error(baseline_v3):
    with pytest.raises(UserError, match="holds no achieved_bandwidth_gbs"):
        verdict_for(baseline_v3, make_rows(), metrics=("achieved_bandwidth_gbs",))


def test_repeat_launches_use_median_and_spread():
    base = make_baseline(make_table(make_rows(dram=(79.0, 80.0, 81.0))))
    entry = base.entries[0]
    assert entry.metrics["dram_throughput_pct"] == Stat(80.0, 1.0, 3)
    assert entry.metrics["duration_us"] == Stat(1000.0, 0.0, 3)
    # median 76 (one outlier at 60), spread (78-60)/2 = 9: within 1 + 9
    noisy = make_rows(dram=(60.0, 76.0, 78.0))
    assert status(verdict_for(base, noisy)) == "pass"
    steady = make_rows(dram=(76.0, 76.0, 76.0))
    assert status(verdict_for(base, steady)) == "regressed"  # 4 pts > max(3, 1 + 0)


def test_only_the_latest_report_per_variant_and_shape_counts(baseline_v3):
    old_bad = make_rows(dram=(50.0,), report="a.ncu-rep", created="2026-11-29T12:00:00+00:00")
    new_good = make_rows(dram=(80.0,), report="b.ncu-rep", created="2026-11-29T14:00:00+00:00")
    assert verdict_for(baseline_v3, old_bad, new_good).passed
    new_bad = make_rows(dram=(50.0,), report="a.ncu-rep", created="2026-11-29T15:00:00+00:00")
    assert not verdict_for(baseline_v3, new_bad, new_good).passed


def test_measure_groups_rows_as_a_groupby_would_in_any_order():
    # Rows of three entries interleaved; a shape missing as None in one row and NaN in
    # the next (one group, as pandas groups them); no family column for one entry; two
    # reports of one entry, the newer listed first; a metric column holding None.
    nan = float("nan")
    rows = [
        *make_rows(variant="v3", dram=(70.0, 72.0), report="old.ncu-rep",
                   created="2026-11-29T12:00:00+00:00"),
        *make_rows(variant="v2", dram=(50.0,), shape=None),
        *make_rows(variant="v3", dram=(80.0, 84.0), report="new.ncu-rep",
                   created="2026-11-29T14:00:00+00:00"),
        *make_rows(variant="v2", dram=(52.0,), shape=nan, report="other.ncu-rep"),
        *make_rows(variant="v5", dram=(90.0,), family=None),
    ]
    rows[0], rows[4] = rows[4], rows[0]  # the newer report's first row before the older's
    table = make_table(rows)
    table["duration_us"] = table["duration_us"].astype(object)
    table.loc[table["variant"] == "v5", "duration_us"] = None
    entries = gate.measure(table, ["dram_throughput_pct", "duration_us"], missing_ok=True)
    assert [(e.family, e.variant, e.shape) for e in entries] == [
        ("paged_decode", "v3", SHAPE), ("paged_decode", "v2", "nan"), ("", "v5", SHAPE)]
    v3, v2, v5 = entries
    assert v3.metrics["dram_throughput_pct"] == Stat(82.0, 2.0, 2)  # new.ncu-rep's launches
    assert v3.provenance.report == "new.ncu-rep"
    assert v2.metrics["dram_throughput_pct"] == Stat(50.0, 0.0, 1)  # the first of a tie
    assert v5.metrics == {"dram_throughput_pct": Stat(90.0, 0.0, 1)}  # None is no value
    assert v5.provenance.gpu == "NVIDIA H200"
    with pytest.raises(UserError, match="v5 at .*: the report has no duration_us"):
        gate.measure(table, ["duration_us"])


def test_measure_without_family_or_report_columns():
    table = make_table(make_rows(dram=(79.0, 81.0))).drop(columns=["family", "report_path"])
    (entry,) = gate.measure(table, None)
    assert (entry.family, entry.variant) == ("", "v3")
    assert entry.metrics["dram_throughput_pct"] == Stat(80.0, 1.0, 2)
    assert entry.provenance.report is None


def test_missing_variant_is_bad_input_not_a_pass(baseline_v3):
    with pytest.raises(UserError, match="no current run for paged_decode/v3"):
        verdict_for(baseline_v3, make_rows(variant="v2"))


def test_runs_without_baseline_entry_are_noted(baseline_v3):
    verdict = verdict_for(baseline_v3, make_rows(), make_rows(variant="v5"))
    assert verdict.passed
    assert any("paged_decode/v5" in n and "no baseline entry" in n for n in verdict.notes)


def test_metric_missing_from_current_run_names_it(baseline_v3):
    rows = make_rows(dram_bytes=(float("nan"),))
    with pytest.raises(UserError, match="has no dram_bytes"):
        verdict_for(baseline_v3, rows)


def test_make_baseline_names_the_section_of_a_missing_metric():
    table = make_table(make_rows(dram_bytes=(float("nan"),)),
                       missing={"dram_bytes": "MemoryWorkloadAnalysis"})
    with pytest.raises(UserError, match="MemoryWorkloadAnalysis"):
        make_baseline(table)


def test_make_baseline_filters_variants():
    table = make_table(make_rows(), make_rows(variant="v2", dram=(57.0,)))
    assert [e.variant for e in make_baseline(table, variants=["v3"]).entries] == ["v3"]
    assert [e.variant for e in make_baseline(table, variants=["paged_decode/v2"]).entries] == ["v2"]
    assert len(make_baseline(table, variants=["all"]).entries) == 2
    with pytest.raises(UserError, match="no runs of v9"):
        make_baseline(table, variants=["v9"])


# -- mismatches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, words",
    [
        ({"gpu": "NVIDIA A100-SXM4-80GB"}, ["GPU", "NVIDIA H200", "NVIDIA A100-SXM4-80GB"]),
        ({"ncu_version": "2024.1.0.0"}, ["ncu version", "2025.3.1.0", "2024.1.0.0"]),
        ({"clock_control": "base"}, ["clock control", "'none'", "'base'"]),
    ],
)
def test_provenance_mismatch_refuses_unless_allowed(baseline_v3, override, words):
    rows = make_rows(**override)
    with pytest.raises(BaselineMismatch) as err:
        verdict_for(baseline_v3, rows)
    assert err.value.exit_code == 2
    for word in words + ["--allow-mismatch"]:
        assert word in str(err.value)
    verdict = verdict_for(baseline_v3, rows, allow_mismatch=True)
    assert verdict.passed
    assert any(n.startswith("mismatch allowed") for n in verdict.notes)


def test_shape_mismatch_refuses_unless_allowed(baseline_v3):
    rows = make_rows(shape=OTHER_SHAPE, dram=(70.0,))
    with pytest.raises(BaselineMismatch, match="batch=8"):
        verdict_for(baseline_v3, rows)
    verdict = verdict_for(baseline_v3, rows, allow_mismatch=True)
    assert status(verdict) == "regressed"
    assert verdict.results[0].shape_now == OTHER_SHAPE


def test_unknown_provenance_is_noted_not_refused(baseline_v3):
    rows = make_rows()
    for row in rows:
        row["sidecar"] = None  # a foreign report: GPU from the report, the rest unknown
    verdict = verdict_for(baseline_v3, rows)
    assert verdict.passed
    assert any("ncu version unknown" in n for n in verdict.notes)


def test_foreign_reports_without_sidecar_round_trip(tmp_path):
    rows = make_rows(variant="my_kernel", family="", shape="")
    for row in rows:
        row["sidecar"] = None
    base = make_baseline(make_table(rows))
    (entry,) = base.entries
    assert (entry.name, entry.shape, entry.provenance.gpu) == ("my_kernel", "", "NVIDIA H200")
    assert entry.provenance.ncu_version is None
    loaded = load_baseline(save_baseline(base, tmp_path / "b.json"))
    assert loaded == base
    assert compare_to_baseline(loaded, make_table(rows)).passed


# -- the baseline file -----------------------------------------------------------------


def test_baseline_round_trip(tmp_path, baseline_v3):
    path = save_baseline(baseline_v3, tmp_path / "b.json")
    data = json.loads(path.read_text())
    assert data["kind"] == "paprof-baseline" and data["schema"] == 3
    (entry,) = data["entries"]
    assert entry["variant"] == "v3" and entry["shape"] == SHAPE
    assert entry["metrics"]["dram_throughput_pct"] == {"value": 80.0, "spread": 0.0, "n": 1}
    assert entry["provenance"]["gpu"] == "NVIDIA H200"
    assert entry["provenance"]["ncu_version"] == "2025.3.1.0"
    assert entry["provenance"]["clock_control"] == "none"
    assert entry["provenance"]["sections"] == SECTIONS
    assert load_baseline(path) == baseline_v3


def test_save_refuses_to_overwrite_without_force(tmp_path, baseline_v3):
    path = tmp_path / "b.json"
    path.write_text("keep me")
    with pytest.raises(UserError, match="--force"):
        save_baseline(baseline_v3, path)
    assert path.read_text() == "keep me"
    save_baseline(baseline_v3, path, force=True)
    assert load_baseline(path) == baseline_v3


def _corrupt(data):
    data["entries"][0]["metrics"]["dram_throughput_pct"]["value"] = "fast"
    return data


def _drop_variant(data):
    del data["entries"][0]["variant"]
    return data


def _duplicate(data):
    data["entries"].append(dict(data["entries"][0]))
    return data


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda d: {**d, "schema": 4}, "schema 4"),
        (lambda d: {**d, "gate": "guess"}, "gate"),
        (lambda d: {k: v for k, v in d.items() if k != "schema"}, "schema None"),
        (lambda d: {k: v for k, v in d.items() if k != "kind"}, "not a paprof baseline"),
        (lambda d: [d], "not a paprof baseline"),
        (lambda d: {**d, "entries": []}, "corrupt"),
        (_corrupt, "finite number"),
        (_drop_variant, "missing field 'variant'"),
        (_duplicate, "twice"),
    ],
)
def test_bad_baselines_are_user_errors(tmp_path, baseline_v3, mangle, message):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(mangle(baseline_v3.to_dict())))
    with pytest.raises(UserError, match=message):
        load_baseline(path)


@pytest.mark.parametrize("metric, field, value, words", [
    ("duration_us", "value", -3350.0, "cannot be negative"),
    ("dram_bytes", "value", -1.0, "cannot be negative"),
    ("dram_throughput_pct", "value", -0.5, "cannot be negative"),
    ("dram_throughput_pct", "value", 100.5, "over 100"),
    ("dram_throughput_pct", "spread", 150.0, "over 100"),
    ("duration_us", "spread", -1.0, "cannot be negative"),
])
def test_impossible_values_make_the_baseline_corrupt(tmp_path, baseline_v3, metric, field,
                                                     value, words):
    data = baseline_v3.to_dict()
    data["entries"][0]["metrics"][metric][field] = value
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=f"corrupt: entry 0: {metric}.{field} .* impossible: .*{words}"):
        load_baseline(path)


def test_possible_edges_are_accepted(tmp_path, baseline_v3):
    data = baseline_v3.to_dict()
    data["entries"][0]["metrics"]["dram_throughput_pct"]["value"] = 100.0
    data["entries"][0]["metrics"]["dram_bytes"]["value"] = 0.0
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    assert load_baseline(path).entries[0].metrics["dram_bytes"].value == 0.0


def test_truncated_and_missing_baselines(tmp_path, baseline_v3):
    path = save_baseline(baseline_v3, tmp_path / "b.json")
    path.write_text(path.read_text()[:40])
    with pytest.raises(UserError, match="not JSON"):
        load_baseline(path)
    with pytest.raises(UserError, match="does not exist"):
        load_baseline(tmp_path / "nope.json")


# -- outputs ---------------------------------------------------------------------------


def test_junit_parses_and_names_the_regression(tmp_path, baseline_v3):
    from paprof.render.junit import write_junit

    verdict = verdict_for(baseline_v3, make_rows(dram=(57.0,)))
    root = ET.parse(write_junit(verdict, tmp_path / "out" / "check.xml")).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures")) == ("3", "1")
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "paprof.check.paged_decode.v3"
    assert suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert len(cases) == 3
    (failure,) = [c.find("failure") for c in cases if c.find("failure") is not None]
    assert failure.get("type") == "regression"
    assert "dram_throughput_pct" in failure.get("message")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["gpu"] == "NVIDIA H200"


def test_junit_of_a_pass_has_no_failures(tmp_path, baseline_v3):
    from paprof.render.junit import junit_tree

    root = junit_tree(verdict_for(baseline_v3, make_rows())).getroot()
    assert root.get("failures") == "0"
    assert root.find(".//failure") is None


def test_markdown_lists_regressions_and_the_table(baseline_v3):
    from paprof.render.check_markdown import verdict_markdown

    text = verdict_markdown(verdict_for(baseline_v3, make_rows(dram=(57.0,))))
    assert text.startswith("## paprof check: FAIL")
    assert "### Regressions" in text
    assert "| paged_decode/v3 |" in text and "**REGRESSED**" in text
    assert "GPU NVIDIA H200" in text
    table_rows = [l for l in text.splitlines() if l.startswith("| paged_decode/v3")]
    assert len(table_rows) == 3
    passing = verdict_markdown(verdict_for(baseline_v3, make_rows()))
    assert passing.startswith("## paprof check: PASS") and "Regressions" not in passing


def test_a_floor_below_zero_is_said_to_be_a_check_that_cannot_fail():
    """v1-like: DRAM 0.9 % with the 3-point default gives allowed >= -2.1 %."""
    from paprof.render.check_markdown import verdict_markdown
    from paprof.render.junit import junit_tree

    base = make_baseline(make_table(make_rows(dram=(0.9,))))
    verdict = compare_to_baseline(base, make_table(make_rows(dram=(0.0,))))
    (dram,) = [r for r in verdict.results if r.metric == "dram_throughput_pct"]
    assert dram.status == "pass" and dram.cannot_fail
    assert dram.allowed_text == ">= -2.1 % (-3 pts): cannot fail"
    (note,) = [n for n in verdict.notes if "cannot fail" in n]
    assert "dram_throughput_pct" in note and "--tolerance dram_throughput_pct=50%" in note
    assert "cannot fail" in verdict_markdown(verdict) and "cannot fail" in ET.tostring(
        junit_tree(verdict).getroot(), encoding="unicode")
    # a relative tolerance makes it a real check again
    strict = compare_to_baseline(base, make_table(make_rows(dram=(0.0,))),
                                 Settings(tolerances={"dram_throughput_pct": Tolerance(relative=0.5)}))
    (dram,) = [r for r in strict.results if r.metric == "dram_throughput_pct"]
    assert dram.regressed and not dram.cannot_fail
    assert not any("cannot fail" in n for n in strict.notes)


def test_a_floor_above_zero_is_an_ordinary_check():
    verdict = compare_to_baseline(make_baseline(make_table(make_rows(dram=(80.0,)))),
                                  make_table(make_rows(dram=(80.0,))))
    assert not any(r.cannot_fail for r in verdict.results)
    assert not any("cannot fail" in n for n in verdict.notes)
