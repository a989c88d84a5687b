"""Every command fits a terminal of 80 columns (issue 39): each command of ``paprof
--help`` (and its ``--help``) run on the shipped runs, or through the fake ncu and
launcher where it needs a GPU, on a simulated terminal of 80 columns: no line is longer
than 80, and the rows a wide terminal (``--wide``, or a pipe) tells apart still differ."""

from __future__ import annotations

import json
import re
import shutil
import statistics

import pytest
from click.testing import CliRunner

from paprof import commands
from paprof.cli import COMMANDS, main

from helpers import real_report, recorded, relabelled, shipped

WIDTH = 80
SHAPE = "batch=64,q_heads=32,kv_heads=8,head_dim=128,page=16,context=4096,dtype=fp32"
SLUG = "b64_ctx4096_h32x8_d128_p16_fp32"


def _invoke(monkeypatch, args, width=WIDTH):
    """``paprof ARGS`` as on a terminal of ``width`` columns (None: a pipe); stdout and
    stderr together (both are the terminal)."""
    monkeypatch.setattr(commands, "_tty_columns", lambda stream: width)
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result


def _too_long(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def _fits(monkeypatch, args, codes=(0,)):
    result = _invoke(monkeypatch, args)
    assert result.exit_code in codes, result.output
    assert not _too_long(result.output), "\n".join(_too_long(result.output))
    return result.output


# -- help --------------------------------------------------------------------------------
HELPS = [[], *([name] for name in sorted(COMMANDS)), ["baseline", "update"]]


@pytest.mark.parametrize("words", HELPS, ids=lambda w: " ".join(w) or "paprof")
def test_every_help_fits(monkeypatch, words):
    _fits(monkeypatch, [*words, "--help"])


def test_the_walk_covers_every_command():
    """A new command joins the walk below (each of these names one test)."""
    walked = {"list", "bench", "run", "table", "compare", "check", "baseline", "calibrate",
              "sweep", "sweep-report", "merge", "mcp"}
    assert set(COMMANDS) == walked


# -- the commands, on the shipped runs --------------------------------------------------
@pytest.mark.lab
@pytest.mark.parametrize("args", [[], ["--family", "paged_decode"], ["--verbose"]])
def test_list_fits(monkeypatch, args):
    _fits(monkeypatch, ["list", *args])


@pytest.mark.parametrize("args", [[], ["--traffic"], ["--per-variant"]])
def test_table_fits(monkeypatch, args):
    _fits(monkeypatch, ["table", recorded("h200"), *args])


def test_compare_fits(monkeypatch, tmp_path):
    _fits(monkeypatch, ["compare", "v2", "v3", "v4", "--runs", recorded("h200"), "--markdown",
                        tmp_path / "r.md"])
    _fits(monkeypatch, ["compare", "--baseline", "v2", "v3", "v5", "--runs", recorded("h200"),
                        "--markdown", tmp_path / "b.md"])


@pytest.mark.lab
def test_baseline_update_and_check_fit(monkeypatch, tmp_path):
    base = tmp_path / "b.json"
    _fits(monkeypatch, ["baseline", "update", "--runs", recorded("h200"), "--out", base])
    _fits(monkeypatch, ["check", "--baseline", base, "--runs", recorded("h200")])
    now = relabelled(shipped("v2"), tmp_path / "now", "v3")
    _fits(monkeypatch, ["check", "--baseline", base, "--runs", now, "--variant", "v3"], codes=(1,))


def test_sweep_report_fits(monkeypatch, tmp_path):
    said = _fits(monkeypatch, ["sweep-report", "--runs", recorded("sweeps/h200-bench"),
                               "--markdown", tmp_path / "s.md"])
    assert "crossover:" in said  # the long lines this walk is for


def test_merge_fits(monkeypatch, tmp_path):
    _fits(monkeypatch, ["merge", recorded("sweeps/h200-bench"), recorded("sweeps/h200-profile"),
                        "--out", tmp_path / "merged"])


def _aa_run(root, variant, scale):
    """A copy of a recorded run whose CUDA-event samples are ``scale`` times its own."""
    source = recorded("h200") / "nvidia-h200" / "paged_decode" / variant
    folder = root / "nvidia-h200" / "paged_decode" / variant
    folder.mkdir(parents=True)
    shutil.copy(source / f"{SLUG}.ncu-rep", folder)
    side = json.loads((source / f"{SLUG}.json").read_text())
    side["duration_us_event_all"] = [v * scale for v in side["duration_us_event_all"]]
    side["duration_us_event"] = statistics.median(side["duration_us_event_all"])
    (folder / f"{SLUG}.json").write_text(json.dumps(side))
    return root


def test_calibrate_fits(monkeypatch, tmp_path):
    stores = [_aa_run(tmp_path / name, "v3", s) for name, s in (("a", 1.0), ("b", 1.01))]
    _fits(monkeypatch, ["calibrate", *[x for r in stores for x in ("--runs", r)], "--out",
                        tmp_path / "noise.json"])


# -- the GPU commands, through the fake ncu and launcher -----------------------------------
@pytest.mark.lab
def test_run_fits(monkeypatch, fake_bin, fake_launcher, tmp_path):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(real_report()))
    monkeypatch.chdir(tmp_path)  # the report paths as a user's: runs/nvidia-h200/...
    _fits(monkeypatch, ["run", "--variant", "v2", "--variant", "v3", "--runs", "runs"])


@pytest.mark.lab
def test_sweep_fits(monkeypatch, fake_bin, fake_launcher, tmp_path):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(real_report()))
    _fits(monkeypatch, ["sweep", "--variant", "v3", "--grid", "batch=8,16", "--grid",
                        "context=1024,4096", "--list"])
    _fits(monkeypatch, ["sweep", "--variant", "v3", "--grid", "batch=8", "--shape",
                        "context=1024", "--profile", "--runs", tmp_path / "sweep"])


@pytest.mark.lab
def test_bench_fits(monkeypatch):
    from paprof import registry
    from paprof.family import Work
    from paprof.measure.kernels import bench

    def fake_run_bench(family, chosen, p, launches, rounds, seed, progress=None):
        rows = [bench.BenchRow(v.id, "cuda", [f"paged_decode_{v.id}_kernel_with_a_long_name"],
                               {"splits": 8}, [200.0 + i, 202.0 + i], 1e-4, True,
                               words={"said": ["split each sequence 8 ways", "merged at the end"]})
                for i, v in enumerate(chosen)]
        return bench.BenchResult(family.name, p, Work(536870912, 0), "NVIDIA H200", 4.5,
                                 launches, 1, rows)

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)
    narrow = _fits(monkeypatch, ["bench", "--variant", "all", "--family", "paged_decode"])
    wide = _invoke(monkeypatch, ["bench", "--variant", "all", "--family", "paged_decode", "--wide"])
    assert len(wide.output.splitlines()) < len(narrow.splitlines())  # whole lines
    assert max(map(len, wide.output.splitlines())) > WIDTH


# -- what tells rows apart stays ----------------------------------------------------------
def _rows(text: str, first: str) -> list[str]:
    """The rows of rich's table whose header holds ``first``, up to a blank line: its
    rules and folded continuations (their first cell blank) left out."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if first in line) + 1
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        if set(line.strip()) <= set("─━┡┩╇┃│ ") or line.startswith("  "):
            continue
        rows.append(" ".join(line.split()))
    return rows


def _wide_and_narrow(monkeypatch, args, codes=(0,)):
    wide = _invoke(monkeypatch, args, width=None)  # a pipe: the whole table
    narrow = _invoke(monkeypatch, args)
    assert wide.exit_code in codes and narrow.exit_code in codes, narrow.output
    assert not _too_long(narrow.output), "\n".join(_too_long(narrow.output))
    return wide.output, narrow.output


@pytest.mark.parametrize("args", [[], ["--traffic"], ["--per-variant"]])
def test_table_rows_that_differ_wide_differ_narrow(monkeypatch, args):
    wide, narrow = _wide_and_narrow(monkeypatch, ["table", recorded("h200"), *args])
    def rows(text):  # the header, then a row a line up to the blank line
        lines = text.splitlines()
        return lines[1:lines.index("")] if "" in lines else lines[1:]

    wide_rows, narrow_rows = rows(wide), rows(narrow)
    assert len(narrow_rows) == len(wide_rows) >= 8
    assert len(set(narrow_rows)) == len(set(wide_rows)) == len(wide_rows)
    assert len({r.split()[1] for r in narrow_rows}) == len(narrow_rows)  # the kernel alone


@pytest.mark.lab
def test_check_rows_that_differ_wide_differ_narrow(monkeypatch, tmp_path):
    """The complaint of issue 39: at 80 columns every row read "paged_de..."."""
    base = tmp_path / "b.json"
    assert _invoke(monkeypatch, ["baseline", "update", "--runs", recorded("h200"), "--out",
                                 base]).exit_code == 0
    wide, narrow = _wide_and_narrow(monkeypatch, ["check", "--baseline", base, "--runs",
                                                  recorded("h200")])
    cells = [row.split()[:2] for row in _rows(narrow, "variant")]  # variant, metric
    wide_rows = [line for line in wide.splitlines()
                 if line.startswith("│") and line.split("│")[1].strip()]
    assert len(cells) == len(wide_rows) == 24
    assert len({tuple(c) for c in cells}) == 24
    assert {c[0] for c in cells} == {"baseline", "handbook", "v1", "v2", "v3", "v4", "v5", "v6"}
    assert "paprof check of paged_decode" in narrow
    assert max(map(len, wide.splitlines())) > 80  # a pipe still gets the whole table
    # --wide: the whole table on the terminal too
    assert _invoke(monkeypatch, ["check", "--baseline", base, "--runs", recorded("h200"),
                                 "--wide"]).output.splitlines()[3:] == wide.splitlines()[3:]
