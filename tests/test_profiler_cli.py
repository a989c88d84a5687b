"""``paprof run`` wiring: options, summary, exit codes 0/1/2, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.measure import profile



def invoke(cli, *args):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


def test_help(paprof_cli):
    result = invoke(paprof_cli, "--help")
    assert result.exit_code == 0
    for option in ("--variant", "--family", "--shape", "--preset", "--runs", "--clock-control",
                   "--profiled-launches", "--force", "--seed"):  # fmt: skip
        assert option in result.output
    assert "default|tables|source|basic|memory|full" in result.output.replace(" ", "")


@pytest.mark.lab
def test_run_two_variants(paprof_cli, fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("COLUMNS", "200")
    result = invoke(paprof_cli, "--variant", "v2", "--variant", "v3", "--shape", "batch=8,context=1024",
                    "--runs", str(tmp_path / "runs"), "--preset", "memory", "--clock-control", "base",
                    "--profiled-launches", "2", "--seed", "9")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "paged_decode/v2" in result.output and "paged_decode/v3" in result.output
    assert "3350.0" in result.output and "ok (1.2e-07)" in result.output
    sidecars = sorted((tmp_path / "runs").rglob("*.json"))
    assert [json.loads(p.read_text())["variant"] for p in sidecars] == ["v2", "v3"]
    side = json.loads(sidecars[1].read_text())
    assert (side["preset"], side["clock_control"], side["launches"], side["seed"]) == ("memory", "base", 2, 9)
    assert side["params"]["batch"] == 8
    ran = json.loads((tmp_path / "argv.json").read_text())
    assert ran[ran.index("--clock-control") + 1] == "base"


@pytest.mark.lab
def test_existing_run_exits_2_until_replace(paprof_cli, fake_bin, fake_launcher, tmp_path):
    args = ("--variant", "v3", "--runs", str(tmp_path / "runs"))
    assert invoke(paprof_cli, *args).exit_code == 0
    again = invoke(paprof_cli, *args)
    assert again.exit_code == 2
    assert again.output.startswith("paprof: error: a run already exists") and "--force" in again.output
    assert "Traceback" not in again.output
    assert invoke(paprof_cli, *args, "--force").exit_code == 0


@pytest.mark.lab
def test_failed_verification_exits_1_after_the_summary(paprof_cli, fake_bin, fake_launcher, tmp_path):
    fake_launcher.variants = {"v2": {"check": {"passed": False, "rel_error": 0.3, "max_abs_error": 1.0,
                                               "tolerance": 1e-5}}}
    result = invoke(paprof_cli, "--variant", "v2", "--variant", "v3", "--runs", str(tmp_path / "runs"))
    assert result.exit_code == 1
    assert "FAILED" in result.output
    assert result.output.rstrip().splitlines()[-1] == (
        "paprof: error: 1 of 2 variants failed verification: paged_decode/v2"
    )
    assert [p.parent.name for p in (tmp_path / "runs").rglob("*.ncu-rep")] == ["v3"]


@pytest.mark.lab
def test_bad_input_exits_2_with_one_line(paprof_cli, fake_bin, fake_launcher, tmp_path):
    for args, message in (
        (("--variant", "v99"), "paprof: error: unknown variant 'v99'"),
        (("--variant", "v3", "--shape", "batch=0"), "paprof: error: batch must be at least 1, got 0"),
        (("--variant", "v3", "--shape", "dtype=fp16"), "paprof: error: v3 reads fp32 K/V only"),
    ):
        result = invoke(paprof_cli, *args, "--runs", str(tmp_path / "runs"))
        assert result.exit_code == 2, args
        assert result.output.startswith(message) and result.output.count("\n") == 1, result.output
    bad_preset = invoke(paprof_cli, "--variant", "v3", "--preset", "fast")
    assert bad_preset.exit_code == 2 and "Invalid value for '--preset'" in bad_preset.output
    assert invoke(paprof_cli).exit_code == 2  # --variant is required
    assert fake_launcher.calls == []


@pytest.mark.lab
def test_environment_errors_exit_2(paprof_cli, fake_bin, fake_launcher, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    result = invoke(paprof_cli, "--variant", "v3", "--runs", str(tmp_path / "runs"))
    assert result.exit_code == 2
    assert result.output.startswith("paprof: error: ncu may not read the GPU performance counters")
    assert result.output.count("\n") == 1 and "ncu log: " in result.output


def test_run_cmd_profiles_an_external_program_unverified(paprof_cli, fake_bin, fake_launcher, tmp_path, monkeypatch):
    """The command kind end to end with the fake ncu: stored under family 'command', the
    launcher never runs, the sidecar and every report say 'not verified'."""
    from helpers import real_report

    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(real_report()))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)  # whatever compare writes by default stays in tmp_path
    runs = tmp_path / "runs"
    result = invoke(paprof_cli, "--cmd", "python3 train.py --steps '3 4'", "--nvtx-range", "step",
                    "--name", "mine", "--runs", str(runs))
    assert result.exit_code == 0, result.output
    assert "command/mine" in result.output and "not verified" in result.output
    assert fake_launcher.calls == []  # no reference check: nothing runs outside ncu
    ran = json.loads((tmp_path / "argv.json").read_text())
    assert ran[-4:] == ["python3", "train.py", "--steps", "3 4"]
    assert ran[ran.index("--nvtx-include") + 1] == "step/"
    assert "-k" not in ran and "--launch-count" not in ran
    (sidecar,) = runs.rglob("*.json")
    assert sidecar.relative_to(runs).as_posix() == "nvidia-h200/command/mine/command.json"
    side = json.loads(sidecar.read_text())
    assert (side["kind"], side["verified"], side["verification"], side["params"]) == ("command", False, None, {})
    assert side["nvtx_range"] == "step" and side["source"]["path"] == str(Path.cwd().resolve())

    other = invoke(paprof_cli, "--cmd", "python3 other.py", "--nvtx-range", "step", "--name", "theirs",
                   "--runs", str(runs))
    assert other.exit_code == 0, other.output
    compare = CliRunner().invoke(paprof_cli, ["compare", "mine", "theirs", "--runs", str(runs),
                                              "--markdown", str(tmp_path / "r.md")])
    assert compare.exit_code == 0, compare.output
    assert not (tmp_path / "paprof-report.html").exists()  # asked for Markdown only
    text = (tmp_path / "r.md").read_text()
    assert "mine is not verified: an external command was profiled without a reference check" in text
    assert "not verified" in text


@pytest.mark.parametrize("args, message", [
    (("--cmd", "python3 x.py", "--name", "a"), "--cmd needs --nvtx-range NAME"),
    (("--cmd", "python3 x.py", "--nvtx-range", "r"), "--cmd needs --nvtx-range NAME"),
    (("--cmd", "'unclosed", "--nvtx-range", "r", "--name", "a"), "--cmd is not a valid command line"),
    (("--cmd", "python3", "--nvtx-range", "r", "--name", "a b"), "--name 'a b'"),
    (("--cmd", "python3", "--nvtx-range", "r", "--name", "a", "--variant", "v3"), "give neither --variant"),
    (("--variant", "v3", "--nvtx-range", "r"), "--nvtx-range, --name and --kernel-regex go with --cmd"),
    ((), "name a variant (--variant v3, or --variant all), or a program (--cmd)"),
])
def test_run_cmd_option_errors_are_one_line(paprof_cli, args, message):
    result = invoke(paprof_cli, *args)
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith("paprof: error: ") and message in line


@pytest.mark.lab
def test_run_summary_fits_80_columns_with_whole_report_paths():
    """In a CI log (80 columns) each report path is on one line, copyable whole."""
    import io

    from rich.console import Console

    from paprof.commands.run import report_lines, summary_table
    from paprof import registry
    from paprof.measure.profile import Outcome
    from paprof.read.store import Run

    outcomes = []
    for vid in ("v3", "v5", "handbook"):
        report = Path(f"runs/nvidia-h200/paged_decode/{vid}/b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep")
        side = {"verification": {"rel_error": 6.4e-7}, "duration_us_event": 485.3,
                "bandwidth_tbs": 4.42, "replay_passes": 20}
        outcomes.append(Outcome(registry.get(vid, "paged_decode"), run=Run(report, side, {})))
    out = io.StringIO()
    Console(file=out, width=80).print(summary_table(outcomes))
    assert max(map(len, out.getvalue().splitlines())) <= 80  # the table does not wrap
    text = out.getvalue() + "\n".join(report_lines(outcomes))
    for o in outcomes:
        assert f"{o.variant.name}: {o.run.report}" in text.splitlines()
    assert "485.3" in text and "4.42" in text
