"""``paprof.compare`` for notebooks: an object that shows the HTML report and holds
DataFrames of what it says; ``import paprof`` stays light."""

from __future__ import annotations

import html
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = recorded("h200")


def test_import_paprof_imports_no_pandas():
    code = ("import sys, paprof; heavy = [m for m in ('pandas', 'numpy', 'matplotlib', "
            "'paprof.notebook', 'paprof.render.build', 'paprof.compare_flow') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_is_still_an_attribute_error():
    import paprof

    with pytest.raises(AttributeError):
        paprof.no_such_thing  # noqa: B018


@pytest.fixture(scope="module")
def report():
    import paprof

    return paprof.compare(["v2", "v3", "v5"], runs=EXAMPLES)


def test_repr_html_is_the_report_with_its_charts(report):
    shown = report._repr_html_()
    assert shown.startswith("<iframe srcdoc=")
    doc = html.unescape(shown.split('srcdoc="', 1)[1].split('" style=', 1)[0])
    assert doc == report.html
    assert doc.count('<img class="chart"') >= 5 and "data:image/png;base64," in doc
    assert "<title>paprof: v2 -&gt; v3 -&gt; v5</title>" in doc
    assert repr(report) == "<paprof.Report v2 -> v3 -> v5>"


def test_dataframes_of_what_the_report_says(report):
    v = report.variants
    assert list(v["label"]) == ["v2", "v3", "v5"] and (v["launches"] == 1).all()
    assert v["duration_us"].is_monotonic_decreasing
    s = report.steps
    assert list(s.columns) == ["before", "after", "speedup", "headline", "first_sentence",
                               "cause", "limit", "next_move"]
    assert list(zip(s["before"], s["after"])) == [("v2", "v3"), ("v3", "v5")]
    assert (s["speedup"] > 1).all() and (s["first_sentence"] == s["cause"]).all()
    assert s["cause"][0].startswith("fewer round trips to memory")
    assert s["cause"][1].startswith("fewer instructions: FP32 math (FFMA, FADD, FMUL)")
    assert s["limit"][1].startswith("v5 is limited by DRAM bandwidth now")
    tr = report.traffic.set_index("key")
    assert tr.loc["l2_to_l1_bytes", "v2"] == report.comparison.variant("v2").get("l2_to_l1_bytes")
    assert tr.loc["l2_to_sm_per_dram_byte", "v2"] == pytest.approx(4.0, rel=0.01)
    t = report.table.set_index("key")
    assert list(report.table.columns[:3]) == ["section", "key", "metric"]
    assert t.loc["duration_us", "v3"] == report.comparison.variant("v3").get("duration_us")
    r = report.rules
    assert set(r["variant"]) <= {"v2", "v3", "v5"} and len(r) > 0
    led = report.ledger
    assert list(led.columns) == ["before", "after", "term", "us"] and len(led) == 2 * 11
    for (before, after), group in led.groupby(["before", "after"]):
        change = t.loc["duration_us", after] - t.loc["duration_us", before]
        assert group["us"].sum() == pytest.approx(change)


def test_compare_against_a_chosen_baseline_like_the_cli(report):
    import paprof
    from paprof.api import write_report

    star = paprof.compare(["v3", "v5"], runs=EXAMPLES, baseline="v2")
    assert list(star.variants["label"]) == ["v2", "v3", "v5"]
    assert list(zip(star.steps["before"], star.steps["after"])) == [("v2", "v3"), ("v2", "v5")]
    cli = write_report(["v3", "v5"], runs=EXAMPLES, out=None, markdown="-", baseline="v2",
                       generated="x")
    assert [r.speedup for r in star.context.verdict.rows] == [r.speedup for r in cli.context.verdict.rows]
    assert list(star.steps["cause"]) == [s.cause for s in cli.comparison.steps]
    assert star.context.title == "paprof: v3, v5 against v2"
    # the chain of the same variants differs in its second step
    assert list(zip(report.steps["before"], report.steps["after"]))[1] == ("v3", "v5")
    from paprof.errors import UserError

    with pytest.raises(UserError, match="v9"):  # a baseline the store lacks, as the CLI says
        paprof.compare(["v3", "v5"], runs=EXAMPLES, baseline="v9")
    with pytest.raises(TypeError):
        paprof.compare(["v3", "v5"], runs=EXAMPLES, baseline=2)
