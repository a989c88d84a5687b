"""One CLI vocabulary: every command spells each idea the same way (issue 29).

The chosen spellings: ``--force`` overwrites what exists; ``--timed-launches N`` are
CUDA-event-timed launches and ``--profiled-launches N`` launches profiled under ncu;
``--json`` alone (or ``--json -``) prints JSON on stdout and ``--json FILE`` writes it;
``--variant`` picks variants. The older spellings are hidden options that still work for
one version and say so in one line on stderr.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from paprof.cli import COMMANDS, main
from paprof.commands import DEPRECATED, STDOUT, renamed
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
H200 = recorded("h200")

RENAMED = {
    "--replace": "--force",
    "--launches": None,  # timed in bench and sweep, profiled in run: checked per command
    "--profile-launches": "--profiled-launches",
    "--repeat": "--profiled-launches",
    "--timed": "--timed-launches",
}
"""Old spelling -> the one that replaced it."""

LAUNCHES = {"--timed-launches", "--profiled-launches", "--profile-every-launch"}


def _commands():
    """(path, click command) of every command and subcommand ``paprof`` has."""
    ctx = click.Context(main)
    out = []
    for name in COMMANDS:
        cmd = main.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
        else:
            out.append((name, cmd))
    return out


ALL = _commands()
IDS = [path for path, _ in ALL]


def _options(cmd, hidden: bool):
    return [p for p in cmd.params if isinstance(p, click.Option) and p.hidden == hidden]


def _names(option) -> list[str]:
    return [n for n in option.opts + option.secondary_opts if n.startswith("--")]


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_every_command_is_walked():
    assert {"list", "run", "bench", "table", "compare", "check", "baseline update",
            "calibrate", "sweep", "sweep-report", "merge"} <= set(IDS)


@pytest.mark.parametrize("path, cmd", ALL, ids=IDS)
def test_one_word_for_overwrite(path, cmd):
    for option in _options(cmd, hidden=False):
        words = (option.help or "").split()
        if option.is_flag and words and words[0] in ("Replace", "Overwrite"):
            assert _names(option) == ["--force"], (path, option.opts)
        assert "--replace" not in _names(option) and "--overwrite" not in _names(option)


@pytest.mark.parametrize("path, cmd", ALL, ids=IDS)
def test_launches_say_which_kind(path, cmd):
    for option in _options(cmd, hidden=False):
        for name in _names(option):
            if "launch" in name:
                assert name in LAUNCHES, (path, name)


@pytest.mark.parametrize("path, cmd", ALL, ids=IDS)
def test_json_is_one_option_that_takes_a_file(path, cmd):
    for option in _options(cmd, hidden=False):
        for name in _names(option):
            if "json" in name:
                assert name == "--json" and not option.is_flag, (path, name)
                assert option.flag_value == STDOUT and option.metavar == "[FILE|-]", path


@pytest.mark.parametrize("path, cmd", ALL, ids=IDS)
def test_old_spellings_are_hidden_and_point_at_a_shown_one(path, cmd):
    shown = {n for o in _options(cmd, hidden=False) for n in _names(o)}
    for option in _options(cmd, hidden=True):
        (old,) = _names(option)
        assert old in RENAMED, (path, old)
        assert old not in shown
        new = RENAMED[old] or ({"run": "--profiled-launches"}.get(path, "--timed-launches"))
        assert new in shown, (path, old, new)
    assert not shown & set(RENAMED), (path, shown & set(RENAMED))


@pytest.mark.parametrize("path, cmd", ALL, ids=IDS)
def test_help_describes_and_shows_an_example(path, cmd):
    text = _invoke(*path.split(), "--help").output
    assert _invoke(*path.split(), "--help").exit_code == 0
    assert cmd.help and len(cmd.help.split()) >= 8, path  # a description, not a stub
    assert re.search(r"^\s+Examples?\b", text, re.M), f"{path}: no Example(s) section"
    for old in RENAMED:
        assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text), (path, old)


@pytest.mark.parametrize("path", ["run", "bench", "sweep", "check", "baseline update",
                                  "calibrate"])
def test_every_command_that_picks_variants_says_variant(path):
    cmd = dict(ALL)[path]
    assert any("--variant" in o.opts for o in _options(cmd, hidden=False)), path


# -- the old spellings still work, and warn -----------------------------------------------------
def _warned(result, old, new):
    return DEPRECATED.format(old=old, new=new) in result.stderr


def test_renamed_hands_its_value_over_and_warns():
    @click.command()
    @click.option("--profiled-launches", "launches", type=int, default=1)
    @renamed("--launches", "--profiled-launches", "launches", type=int)
    @click.option("--force", is_flag=True)
    @renamed("--replace", "--force", "force", is_flag=True)
    def toy(launches, force):
        click.echo(f"{launches} {force}")

    runner = CliRunner()
    old = runner.invoke(toy, ["--launches", "4", "--replace"])
    assert old.stdout == "4 True\n"
    assert _warned(old, "--launches", "--profiled-launches") and _warned(old, "--replace", "--force")
    new = runner.invoke(toy, ["--profiled-launches", "3", "--force"])
    assert new.stdout == "3 True\n" and new.stderr == ""
    assert runner.invoke(toy, []).stdout == "1 False\n"
    both = runner.invoke(toy, ["--launches", "4", "--profiled-launches", "3"])
    assert both.exit_code == 2 and "give --profiled-launches only" in both.output


@pytest.mark.lab
def test_run_takes_its_old_spellings(tmp_path):
    result = _invoke("run", "--variant", "v3", "--replace", "--launches", "2",
                     "--shape", "batch=zz", "--runs", tmp_path)
    assert result.exit_code == 2  # the shape is refused before any GPU is looked for
    assert _warned(result, "--replace", "--force")
    assert _warned(result, "--launches", "--profiled-launches")
    assert result.stderr.splitlines()[-1] == "paprof: error: batch must be an integer, got 'zz'"


@pytest.mark.lab
def test_sweep_takes_its_old_spellings(tmp_path):
    result = _invoke("sweep", "--variant", "v3", "--grid", "batch=1,2", "--list", "--runs",
                     tmp_path, "--launches", "7", "--profile-launches", "2")
    assert result.exit_code == 0, result.output
    assert _warned(result, "--launches", "--timed-launches")
    assert _warned(result, "--profile-launches", "--profiled-launches")
    assert "sweep " in result.stdout and "2 points" in result.stdout


def test_bench_takes_launches_as_timed():
    result = _invoke("bench", "--variant", "v3", "--launches", "50", "--shape", "batch=zz")
    assert result.exit_code == 2 and _warned(result, "--launches", "--timed-launches")


def test_check_takes_repeat_and_timed(tmp_path):
    result = _invoke("check", "--baseline", tmp_path / "b.json", "--repeat", "3")
    assert result.exit_code == 2 and _warned(result, "--repeat", "--profiled-launches")
    assert "--profiled-launches needs --profile" in result.stderr
    result = _invoke("check", "--baseline", tmp_path / "b.json", "--timed", "6")
    assert result.exit_code == 2 and _warned(result, "--timed", "--timed-launches")
    assert "does not exist" in result.stderr  # the value reached the command


# -- JSON: alone on stdout, with FILE into the file ---------------------------------------------
@pytest.mark.lab
def test_list_json_on_stdout_or_into_a_file(tmp_path):
    bare = _invoke("list", "--json")
    dash = _invoke("list", "--json", "-")
    assert bare.exit_code == 0 and bare.stdout == dash.stdout
    assert "paged_decode" in {f["family"] for f in json.loads(bare.stdout)}
    out = tmp_path / "families.json"
    wrote = _invoke("list", "--json", out)
    assert wrote.exit_code == 0 and wrote.stdout == ""
    assert json.loads(out.read_text()) == json.loads(bare.stdout)
    again = _invoke("list", "--json", out)
    assert again.exit_code == 2 and "pass --force" in again.stderr
    assert _invoke("list", "--json", out, "--force").exit_code == 0


def test_table_json_is_format_json(tmp_path):
    v3 = H200 / "nvidia-h200" / "paged_decode" / "v3"
    bare = _invoke("table", v3, "--json")
    fmt = _invoke("table", v3, "--format", "json")
    assert bare.exit_code == 0, bare.output
    assert json.loads(bare.stdout) == json.loads(fmt.stdout)
    both = _invoke("table", H200, "--json", tmp_path / "t.json", "--format", "csv")
    assert both.exit_code == 2 and "--format json" in both.stderr


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    path = tmp_path_factory.mktemp("gate") / "b.json"
    made = _invoke("baseline", "update", "--runs", H200, "--out", path)
    assert made.exit_code == 0, made.output
    return path


def test_check_json_on_stdout_keeps_stdout_clean(baseline):
    result = _invoke("check", "--baseline", baseline, "--runs", H200, "--variant", "v3",
                     "--json", "--no-cause")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "paprof.check/1"
    assert {r["variant"] for r in data["results"]} == {"v3"}
    assert "PASS" in result.stderr


# -- check --variant ---------------------------------------------------------------------------
def test_check_gates_only_the_variants_named(baseline):
    result = _invoke("check", "--baseline", baseline, "--runs", H200, "--variant", "v3",
                     "--variant", "paged_decode/v4", "--no-cause")
    assert result.exit_code == 0, result.output
    assert "2 variant/shape pairs" in result.stdout
    assert "paged_decode/v5" not in result.stdout
    unknown = _invoke("check", "--baseline", baseline, "--runs", H200, "--variant", "v9")
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith(f"paprof: error: baseline {baseline} holds no v9; it holds: ")


# -- one label, one missing-store message, one story for --variant all --------------------------
def test_compare_spells_the_bottleneck_as_table_does(tmp_path):
    table = _invoke("table", H200, "--per-variant", "--json")
    labels = {row["bottleneck"] for row in json.loads(table.stdout)}
    assert "dram-bound" in labels
    md = _invoke("compare", "v4", "v6", "--runs", H200, "--markdown", "-",
                 "--out", tmp_path / "r.html")
    assert md.exit_code == 0, md.output
    assert "dram-bound" in md.stdout and "DRAM-bound" not in md.stdout


@pytest.mark.parametrize("args", [
    ["table", "{missing}"],
    ["compare", "v2", "v3", "--runs", "{missing}"],
    ["check", "--baseline", "{baseline}", "--runs", "{missing}"],
    ["baseline", "update", "--runs", "{missing}", "--out", "{tmp}/b.json"],
    ["sweep-report", "--runs", "{missing}", "--out", "{tmp}/s.html"],
    ["merge", "{missing}", "--out", "{tmp}/merged"],
])
def test_a_missing_store_reads_the_same_in_every_command(args, tmp_path, baseline):
    missing = tmp_path / "no-such-runs"
    filled = [a.format(missing=missing, baseline=baseline, tmp=tmp_path) for a in args]
    result = _invoke(*filled)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"paprof: error: no such run store or report: {missing}\n"


def test_variant_all_says_what_the_docs_say():
    from paprof import registry

    docs = (ROOT / "docs" / "kernels.md").read_text()
    assert "with several families visible, `--variant all` needs `--family`" in " ".join(docs.split())
    assert "needs one family and several are visible" in registry.ALL_NEEDS_A_FAMILY


def test_sweep_report_json_on_stdout_is_the_regime_map(tmp_path, monkeypatch):
    from paprof.sweep import report

    monkeypatch.setattr(report, "MAX_CHARTS", 1)  # the charts are the cost, not the point
    store = recorded("sweeps/h200-bench")
    result = _invoke("sweep-report", "--runs", store, "--out", tmp_path / "s.html", "--json")
    assert result.exit_code == 0, result.output
    shipped = json.loads(recorded("sweeps/h200-bench.regime.json").read_text())
    assert json.loads(result.stdout) == shipped
    assert f"wrote {tmp_path / 's.html'}" in result.stderr
    assert not (tmp_path / "s.regime.json").exists()  # printed, not written beside the HTML
    both = _invoke("sweep-report", "--runs", store, "--out", tmp_path / "t.html", "--json", "-",
                   "--markdown", "-")
    assert both.exit_code == 2 and "cannot both print" in both.stderr
