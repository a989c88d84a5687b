"""``paprof run --cmd`` by its top kernels: a timing pass (ncu, duration only), then the
full pass on the kernels that make up ``--cover`` of the range's time, chosen by name; the
run record says what was skipped. The two-pass flow runs against the fake ncu, with the
shipped MLP program's eager report (examples/mlp: 3 steps of 14 launches) as what the
timing pass "measured"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import unpacked
from paprof.family import CommandVariant
from paprof.measure.argv import NcuSettings, names_regex, ncu_argv
from paprof.measure.top_kernels import TIME_METRIC, TIMING_METRICS, choose, chosen_names, read_launches

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "runs.tar.xz"
needs_mlp = pytest.mark.skipif(not MLP.is_file(), reason="examples/mlp/runs.tar.xz is not there")

LAUNCHES = [("gemm", 500.0), ("gemm", 500.0), ("attn", 300.0), ("norm", 60.0), ("add", 30.0),
            ("add", 30.0), ("copy", 5.0)]  # 1425 us in all


def test_choose_takes_the_fewest_names_that_cover_the_fraction():
    picked = choose(LAUNCHES, steps=1, cover=0.9)
    assert chosen_names(picked) == ("gemm", "attn")  # 1300 of 1425 us = 91.2 %
    assert picked["profiled"] == {"kernels": 2, "launches": 3, "time_us": 1300.0,
                                  "share": pytest.approx(1300 / 1425)}
    assert picked["skipped"]["kernels"] == 3 and picked["skipped"]["launches"] == 4
    assert picked["skipped"]["time_us"] == pytest.approx(125.0)
    assert [k["kernel"] for k in picked["kernels"]] == ["gemm", "attn", "add", "norm", "copy"]
    assert sum(k["share"] for k in picked["kernels"]) == pytest.approx(1.0)
    assert [k["profiled"] for k in picked["kernels"]] == [True, True, False, False, False]


def test_top_caps_the_count_and_cover_one_takes_everything():
    assert chosen_names(choose(LAUNCHES, cover=0.9, top=1)) == ("gemm",)
    assert chosen_names(choose(LAUNCHES, cover=0.99)) == ("gemm", "attn", "add", "norm")
    every = choose(LAUNCHES, cover=1.0)
    assert every["skipped"]["kernels"] == 0 and chosen_names(every) is None  # no -k at all
    with pytest.raises(ValueError):
        choose(LAUNCHES, cover=0)


def test_the_timing_pass_collects_the_duration_alone_and_the_full_pass_the_chosen_names():
    program = CommandVariant(id="eager", idea="a program", command=("python3", "step.py"),
                             range_name="step")
    timing = ncu_argv(NcuSettings(ncu="ncu", metrics=(TIME_METRIC,)), program, None, "t.ncu-rep", None)
    assert timing[timing.index("--metrics") + 1] == TIME_METRIC and "--section" not in timing
    assert timing[timing.index("--nvtx-include") + 1] == "step/"
    full = ncu_argv(NcuSettings(ncu="ncu", kernel_names=("gemm<4>", "a.b")), program, None,
                    "f.ncu-rep", None)
    assert "--section" in full  # the preset (its sections, and its metrics beside them)
    assert full[full.index("--kernel-name-base") + 1] == "function"  # the name the reports give
    pattern = full[full.index("-k") + 1]
    assert pattern == r"regex:^(gemm<4>|a\.b)$"
    compiled = re.compile(pattern[len("regex:"):])
    assert compiled.match("a.b") and not compiled.match("axb") and not compiled.match("gemm<4>x")
    assert names_regex(["f(int)[2]"]) == r"^(f\(int\)\[2\])$"


@needs_mlp
def test_the_timing_report_is_read_by_kernel_and_step():
    report = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    launches, steps = read_launches(report, "step")
    assert steps == 3 and len(launches) == 3 * 14
    # each launch's grid and block dimensions, whose products are its sizes
    for _name, _us, (grid, block), _step, _mangled, dims in launches:
        assert dims[0] * dims[1] * dims[2] == grid and dims[3] * dims[4] * dims[5] == block
    picked = choose(launches, steps)
    names = chosen_names(picked)
    assert names[0].startswith("nvjet") and picked["profiled"]["share"] >= 0.9
    assert "reduce_kernel" in {k["kernel"] for k in picked["kernels"] if not k["profiled"]}


def _run(paprof_cli, *args):
    return CliRunner().invoke(paprof_cli, ["run", *args], catch_exceptions=False)


@needs_mlp
def test_run_cmd_times_first_then_profiles_the_top_kernels(paprof_cli, fake_bin, tmp_path, monkeypatch):
    eager = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_TIMING_REPORT", str(eager))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(eager))
    monkeypatch.setenv("FAKE_NCU_ARGVS", str(tmp_path / "argvs.jsonl"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    result = _run(paprof_cli, "--cmd", "python3 mlp.py eager", "--nvtx-range", "step", "--name",
                  "eager", "--runs", str(runs))
    assert result.exit_code == 0, result.output
    timing, full = [json.loads(line) for line in (tmp_path / "argvs.jsonl").read_text().splitlines()]
    assert timing[timing.index("--metrics") + 1] == ",".join(TIMING_METRICS) and "--section" not in timing
    assert "-k" not in timing and full[-3:] == ["python3", "mlp.py", "eager"]
    # the first K launches of each configuration of the chosen kernels
    side = json.loads(next(runs.rglob("*.json")).read_text())
    chosen = side["selection"]
    assert full[full.index("--filter-mode") + 1] == "per-launch-config" and "--filter-mode" not in timing
    assert full[full.index("--launch-count") + 1] == str(chosen["per_config"]) == "1"
    names = [k["kernel"] for k in chosen["kernels"] if k["profiled"]]
    # a configuration is a function: the full pass names each by its mangled name
    functions = list(dict.fromkeys(c["function"] for k in chosen["kernels"] if k["profiled"]
                                   for c in k["configs"]))
    assert full[full.index("--kernel-name-base") + 1] == "mangled"
    pattern = full[full.index("-k") + 1]
    assert pattern.startswith("regex:^(") and pattern.endswith(")$")
    assert sorted(pattern[len("regex:^("):-2].split("|")) == sorted(names_regex([f])[2:-2] for f in functions)
    assert all(f.startswith("_Z") or f.startswith("nvjet") for f in functions) and len(functions) > len(names)
    assert chosen["steps"] == 3 and chosen["launches"] == 42 and chosen["cover"] == 0.9
    assert chosen["profiled"]["share"] >= 0.9 > chosen["profiled"]["share"] - chosen["kernels"][
        len(names) - 1]["share"]  # the fewest names: without the last one it would fall short
    assert chosen["skipped"]["kernels"] == len(chosen["kernels"]) - len(names) > 0
    assert "eager: profiled 3 of 6 kernels" in result.output and "skipped 3 kernels" in result.output
    # every profiled kernel's launches of the first step told apart by (grid, block)
    assert chosen["represented"] is True and chosen["profiled"]["launches"] == 30
    configs = [c for k in chosen["kernels"] if k["profiled"] for c in k["configs"]]
    assert sum(sum(c["weights"]) for c in configs) == sum(c["launches"] for c in configs) == 10
    planned = sum(c["profiled"] for c in configs)
    assert planned == len(chosen["sequence"])
    assert f"{planned} launches standing for the other" in result.output
    # the fake ncu prints --launch-count launches (1) where the plan was more: said, and kept
    assert chosen["launches_profiled"] == 1 < planned
    assert f"Warning: ncu profiled 1 launch where the timing pass planned {planned}" in result.output
    assert not [p for p in runs.rglob("*") if "timing" in p.name]  # the timing report is scratch
    # the timing pass's own phases (its start is where a compiling program pays its
    # compilation), after the provenance and before the full pass's
    order = [p["phase"] for p in side["phases"]]
    assert order[order.index("provenance"):] == ["provenance", "timing pass start", "timing pass",
                                                 "timing pass end", "ncu start", "replay", "ncu end"]
    timing_phase = side["phases"][order.index("timing pass")]
    assert timing_phase["kernels"] == 42  # every launch of the three steps
    # the program's own process held the launches: both passes profile it alone
    assert timing[timing.index("--target-processes") + 1] == "application-only"
    assert full[full.index("--target-processes") + 1] == "application-only"
    assert chosen["processes"] == "application-only"

    each = _run(paprof_cli, "--cmd", "python3 mlp.py eager", "--nvtx-range", "step", "--name",
                "eager", "--runs", str(runs), "--profile-every-launch", "--force")
    assert each.exit_code == 0, each.output
    full = json.loads((tmp_path / "argvs.jsonl").read_text().splitlines()[-1])
    assert "--filter-mode" not in full and "--launch-count" not in full and "-k" in full
    assert json.loads(next(runs.rglob("*.json")).read_text())["selection"]["represented"] is False
    assert "launch configurations" not in each.output

    again = _run(paprof_cli, "--cmd", "python3 mlp.py eager", "--nvtx-range", "step", "--name",
                 "eager", "--runs", str(runs), "--all", "--force")
    assert again.exit_code == 0, again.output
    last = json.loads((tmp_path / "argvs.jsonl").read_text().splitlines()[-1])
    assert "--section" in last and "-k" not in last and len(
        (tmp_path / "argvs.jsonl").read_text().splitlines()) == 5  # --all: one pass, no timing
    assert last[last.index("--target-processes") + 1] == "application-only"  # it held them
    assert "selection" not in json.loads(next(runs.rglob("*.json")).read_text())


def _argvs(tmp_path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "argvs.jsonl").read_text().splitlines()]


def _processes(argv) -> str:
    return argv[argv.index("--target-processes") + 1]


@needs_mlp
@needs_mlp
def test_a_program_whose_replay_passes_were_most_of_its_run_is_told_what_basic_saves(
        paprof_cli, fake_bin, tmp_path, monkeypatch):
    eager = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_TIMING_REPORT", str(eager))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(eager))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    args = ["--cmd", "python3 mlp.py eager", "--nvtx-range", "step", "--name", "eager",
            "--runs", str(tmp_path / "runs")]
    quick = _run(paprof_cli, *args)  # the fake's replay passes take no time: nothing said
    assert quick.exit_code == 0, quick.output
    assert "--preset basic" not in quick.output and "phases" not in quick.output
    monkeypatch.setenv("FAKE_NCU_MODE", "slow")  # they take most of it: said, without --timings
    slow = _run(paprof_cli, *args, "--force")
    assert slow.exit_code == 0, slow.output
    assert "of this run: --preset basic replays fewer" in slow.output and "phases" not in slow.output
    basic = _run(paprof_cli, *args, "--force", "--preset", "basic")  # nothing fewer to offer
    assert basic.exit_code == 0 and "--preset basic replays fewer" not in basic.output


def test_a_program_whose_kernels_run_in_a_child_is_timed_again_with_its_children(
        paprof_cli, fake_bin, tmp_path, monkeypatch):
    """auto: the program's own process first; where it launched nothing in the range (a
    launcher script, torchrun), the timing pass again with its child processes, and the
    full pass with them too."""
    eager = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    for var, value in (("FAKE_NCU_TIMING_REPORT", str(eager)), ("FAKE_NCU_REPORT", str(eager)),
                       ("FAKE_NCU_ARGVS", str(tmp_path / "argvs.jsonl")), ("FAKE_NCU_CHILDREN", "1"),
                       ("COLUMNS", "200")):
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    result = _run(paprof_cli, "--cmd", "bash train.sh", "--nvtx-range", "step", "--name", "eager",
                  "--runs", str(runs), "--timings")
    assert result.exit_code == 0, result.output
    alone, timing, full = _argvs(tmp_path)
    assert [_processes(a) for a in (alone, timing, full)] == ["application-only", "all", "all"]
    assert "--section" not in alone and "--section" not in timing and "--section" in full  # timing: metrics alone
    assert "trying the program's own process alone: its kernels ran in child processes" in result.output
    side = json.loads(next(runs.rglob("*.json")).read_text())
    assert side["selection"]["processes"] == "all"
    order = [p["phase"] for p in side["phases"]]
    assert order[order.index("provenance") + 1:order.index("ncu start")] == [
        "timing pass (own process)", "timing pass start", "timing pass", "timing pass end"]
    assert "timing pass (own process)" in result.output  # --timings shows the first try


@needs_mlp
def test_every_kernel_of_a_program_whose_kernels_run_in_a_child(paprof_cli, fake_bin, tmp_path, monkeypatch):
    """--all (no timing pass): the one pass tries the program's own process first too."""
    eager = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_REPORT", str(eager))
    monkeypatch.setenv("FAKE_NCU_ARGVS", str(tmp_path / "argvs.jsonl"))
    monkeypatch.setenv("FAKE_NCU_CHILDREN", "1")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    result = _run(paprof_cli, "--cmd", "bash train.sh", "--nvtx-range", "step", "--name", "eager",
                  "--runs", str(runs), "--all", "--timings")
    assert result.exit_code == 0, result.output
    alone, full = _argvs(tmp_path)
    assert [_processes(a) for a in (alone, full)] == ["application-only", "all"]
    assert "--section" in alone and "--section" in full  # no timing pass: the preset both times
    side = json.loads(next(runs.rglob("*.json")).read_text())
    order = [p["phase"] for p in side["phases"]]
    assert order[order.index("provenance") + 1:] == ["ncu (own process)", "ncu start", "replay", "ncu end"]
    assert side["command"][side["command"].index("--target-processes") + 1] == "all"


@needs_mlp
@pytest.mark.parametrize("asked", ["all", "application-only"])
def test_target_processes_asked_for_is_what_both_passes_use(paprof_cli, fake_bin, tmp_path, monkeypatch, asked):
    eager = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager" / "command.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_REPORT", str(eager))
    monkeypatch.setenv("FAKE_NCU_ARGVS", str(tmp_path / "argvs.jsonl"))
    monkeypatch.setenv("FAKE_NCU_CHILDREN", "1")  # asked for: never tried another way
    monkeypatch.chdir(tmp_path)
    result = _run(paprof_cli, "--cmd", "python3 mlp.py eager", "--nvtx-range", "step", "--name",
                  "eager", "--runs", str(tmp_path / "runs"), "--target-processes", asked)
    if asked == "all":
        assert result.exit_code == 0, result.output
        assert [_processes(a) for a in _argvs(tmp_path)] == ["all", "all"]
    else:  # its own process launched nothing: said in one line, nothing stored
        assert result.exit_code == 2 and "ncu profiled no kernel" in result.output
        assert [_processes(a) for a in _argvs(tmp_path)] == ["application-only"]
        assert not list((tmp_path / "runs").rglob("*.json"))


def test_own_process_first_retries_only_where_nothing_was_profiled():
    from paprof.errors import UserError
    from paprof.measure.ncu_log import NothingProfiled
    from paprof.measure.top_kernels import own_process_first

    asked, said = [], []

    def run(attempt):
        asked.append(attempt.target_processes)
        if attempt.target_processes == "application-only":
            raise NothingProfiled("ncu profiled no kernel")
        return "report"

    result, target, spent = own_process_first(NcuSettings(target_processes="auto"), run, said.append, "ncu")
    assert (result, target, asked, len(spent)) == ("report", "all", ["application-only", "all"], 1)
    assert said == ["the program's own process launched nothing in the range: ncu again with its child processes"]
    asked.clear()
    assert own_process_first(NcuSettings(), run, said.append, "ncu")[1:] == ("all", [])  # one try
    assert asked == ["all"]

    def broken(attempt):  # any other failure is not a reason to try again
        asked.append(attempt.target_processes)
        raise UserError("ncu failed: an error was reported by the driver")

    asked.clear()
    with pytest.raises(UserError, match="driver"):
        own_process_first(NcuSettings(target_processes="auto"), broken, said.append, "ncu")
    assert asked == ["application-only"]
    with pytest.raises(NothingProfiled):  # nothing either way: the last try's error
        own_process_first(NcuSettings(target_processes="application-only"), run, said.append, "ncu")


@pytest.mark.parametrize("args, message", [
    (("--variant", "v3", "--top", "3"), "--cover, --top, --all and --profile-every-launch go with --cmd"),
    (("--variant", "v3", "--profile-every-launch"), "--cover, --top, --all and --profile-every-launch go with --cmd"),
    (("--cmd", "python3 x.py", "--nvtx-range", "r", "--name", "a", "--all", "--top", "2"),
     "--all profiles every kernel"),
    (("--variant", "v3", "--target-processes", "all"), "--target-processes goes with --cmd"),
])
def test_top_kernel_options_are_refused_where_they_mean_nothing(paprof_cli, args, message):
    result = _run(paprof_cli, *args)
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1


def test_the_gpt_block_program_says_so_without_a_gpu():
    """examples/programs/gpt_block.py (the device script's program) parses its options and
    ends with one line where there is no GPU (or no PyTorch)."""
    import subprocess
    import sys

    program = Path(__file__).resolve().parents[1] / "examples" / "programs" / "gpt_block.py"
    helped = subprocess.run([sys.executable, str(program), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "{eager,compiled,both}" in helped.stdout
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # else it would run on a GPU, if there is one
        ran = subprocess.run([sys.executable, str(program), "eager", "--steps", "1"],
                             capture_output=True, text=True)
        assert ran.returncode == 2 and ran.stderr.strip() == "gpt_block.py: no CUDA GPU"
