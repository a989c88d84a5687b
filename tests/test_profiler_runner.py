"""Running ncu (a fake one on PATH): progress, passes, and each kind of failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from paprof.errors import UserError, VerificationError
from paprof import registry
from paprof.measure.argv import NcuSettings, ncu_argv
from paprof.read.locate import find_ncu
from paprof.measure.ncu_log import NcuLog, parse_profiling
from paprof.measure.runner import run_ncu

from helpers import gone as _ended, lab_shape



def test_parse_profiling_lines():
    done = parse_profiling('==PROF== Profiling "paged_decode_v3" - 4: 0%....50%....100% - 20 passes')
    assert (done.kernel, done.launch, done.percent, done.passes) == ("paged_decode_v3", 4, 100, 20)
    growing = parse_profiling('==PROF== Profiling "paged_decode_v4_partial" - 0: 0%....50%')
    assert (growing.percent, growing.passes) == (50, None)
    one = parse_profiling('==PROF== Profiling "k" - 0: 0%....50%....100% - 1 pass')
    assert one.passes == 1
    old = parse_profiling('==PROF== Profiling "add_kernel": 0%....50%....100% - 18 passes')
    assert (old.kernel, old.launch, old.passes) == ("add_kernel", None, 18)
    assert parse_profiling("==PROF== Connected to process 1 (python)") is None


def test_log_sorts_lines_and_keeps_program_text_glued_to_progress():
    log = NcuLog()
    for line in [
        "==PROF== Connected to process 1 (python)",
        '==PROF== Profiling "a" - 0: 0%....50%....100% - 8 passes',
        '==PROF== Profiling "b" - 1: 0%....50%....100%timing: 3.3 ms',
        "==WARNING== something",
        "==ERROR== boom",
        "",
    ]:
        log.add_line(line)
    assert [k.kernel for k in log.kernels] == ["a", "b"]
    assert log.replay_passes == 8
    assert log.program == ["timing: 3.3 ms"]
    assert log.errors == ["==ERROR== boom"] and log.warnings == ["==WARNING== something"]


@pytest.fixture
def ncu_setup(lab, fake_bin, tmp_path):
    """argv for the fake ncu, plus where its report and log go."""
    report = tmp_path / "runs" / ".x.tmp-1.ncu-rep"
    report.parent.mkdir()
    settings = NcuSettings(ncu=find_ncu(), launches=2)
    argv = ncu_argv(settings, registry.get("v3"), lab_shape(None), report, tmp_path / "r.json")
    return argv, report, tmp_path / "runs" / "x.ncu.log"


def test_ok_run_streams_progress_and_parses_passes(ncu_setup, monkeypatch, tmp_path):
    argv, report, log_path = ncu_setup
    monkeypatch.setenv("FAKE_NCU_PASSES", "17")
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    seen = []
    run = run_ncu(argv, log_path, report, on_kernel=seen.append)
    assert json.loads((tmp_path / "argv.json").read_text()) == argv
    assert report.read_bytes() == b"fake ncu report\n"
    assert run.replay_passes == 17
    assert [(k.kernel, k.launch, k.passes) for k in run.log.kernels] == [
        ("paged_decode_v3", 0, 17),
        ("paged_decode_v3", 1, 17),
    ]
    # progress arrives while a launch is replayed, before its line ends
    assert any(k.percent == 50 and k.passes is None for k in seen)
    assert seen[-1].passes == 17
    text = log_path.read_text()
    assert text.startswith("$ ") and "==PROF== Report:" in text


@pytest.mark.parametrize(
    "mode, error, pattern",
    [
        ("perm", UserError, r"ERR_NVGPUCTRPERM.*NVreg_RestrictProfilingToAdminUsers=0.*ncu log: "),
        ("nodevice", UserError, r"no usable CUDA GPU.*nvidia-smi.*ncu log: "),
        ("verify_fail", VerificationError, r"verification failed under ncu: .*rel_error 3.1e-01.*ncu log: "),
        ("app_error", UserError, r"ncu failed: .*error code \(2\).*shared memory request.*ncu log: "),
        ("error", UserError, r"ncu failed: ==ERROR== An error was reported.*Failed to profile.*ncu log: "),
        ("nokernels", UserError, r"profiled no kernel.*ncu log: "),
        ("noreport", UserError, r"wrote no report.*ncu log: "),
    ],
)
def test_failures_become_one_line_errors_with_the_log_path(ncu_setup, monkeypatch, mode, error, pattern):
    argv, report, log_path = ncu_setup
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    with pytest.raises(error, match=pattern) as caught:
        run_ncu(argv, log_path, report)
    message = str(caught.value)
    assert "\n" not in message and str(log_path) in message
    assert log_path.exists()


def test_missing_ncu_executable(tmp_path):
    with pytest.raises(UserError, match="ncu not found at .*NCU="):
        run_ncu([str(tmp_path / "no-ncu"), "--version"], tmp_path / "l.log", tmp_path / "r.ncu-rep")


def test_interrupt_stops_ncu(ncu_setup, monkeypatch, tmp_path):
    argv, report, log_path = ncu_setup
    monkeypatch.setenv("FAKE_NCU_MODE", "slow")

    def interrupt(kernel):
        raise KeyboardInterrupt

    pid = tmp_path / "ncu.pid"
    monkeypatch.setenv("FAKE_NCU_PID", str(pid))
    with pytest.raises(KeyboardInterrupt):
        run_ncu(argv, log_path, report, on_kernel=interrupt)
    with pytest.raises(ProcessLookupError):  # stopped and reaped, not left running
        os.kill(int(pid.read_text()), 0)
    assert not report.exists()  # the fake writes it when it has run its course


_RUN_NCU = """
import json, sys
from pathlib import Path
from paprof.measure.runner import run_ncu
argv, log, report = json.loads(sys.argv[1])
run_ncu(argv, Path(log), Path(report))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ncu_and_its_program_die_when_paprof_is_killed(ncu_setup, monkeypatch, tmp_path):
    """kill -9 of the paprof that runs ncu: ncu and the program it profiles (one session)
    end too, instead of profiling on under pid 1."""
    argv, report, log_path = ncu_setup
    pids = {"ncu": tmp_path / "ncu.pid", "app": tmp_path / "app.pid"}
    monkeypatch.setenv("FAKE_NCU_MODE", "slow")
    monkeypatch.setenv("FAKE_NCU_PID", str(pids["ncu"]))
    monkeypatch.setenv("FAKE_NCU_APP_PID", str(pids["app"]))
    argv = [*argv[:1], "--launch-count", "100", *argv[1:]]
    paprof = subprocess.Popen([sys.executable, "-c", _RUN_NCU,
                               json.dumps([argv, str(log_path), str(report)])])
    started = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(p.is_file() and p.read_text() for p in pids.values()):
            time.sleep(0.05)
        started = [int(p.read_text()) for p in pids.values()]
        time.sleep(0.3)  # the watcher is up
        paprof.kill()
        paprof.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(map(_ended, started)):
            time.sleep(0.05)
        assert [p for p in started if not _ended(p)] == []
    finally:
        paprof.kill()
        for pid in started:
            if not _ended(pid):
                os.kill(pid, signal.SIGKILL)


_RUN_LAUNCHER = """
import os, sys
from paprof.measure.profile import run_launcher
run_launcher([sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write(str(__import__('os').getpid())); time.sleep(600)", sys.argv[1]], dict(os.environ))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_launcher_dies_when_paprof_is_killed(tmp_path):
    """kill -9 of paprof while its launcher verifies a variant (no ncu yet): the launcher
    ends too."""
    pid_file = tmp_path / "launcher.pid"
    paprof = subprocess.Popen([sys.executable, "-c", _RUN_LAUNCHER, str(pid_file)])
    pid = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (pid_file.is_file() and pid_file.read_text()):
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        paprof.kill()
        paprof.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not _ended(pid):
            time.sleep(0.05)
        assert _ended(pid)
    finally:
        paprof.kill()
        if pid is not None and not _ended(pid):
            os.kill(pid, signal.SIGKILL)


def test_an_ncu_without_per_launch_config_filtering_says_what_to_do():
    from paprof.measure.ncu_log import diagnose

    log = NcuLog()
    log.errors.append("==ERROR== unrecognised option '--filter-mode'. Use --help for further details.")
    err = diagnose(log, 1, "x.ncu.log", report_written=False)
    assert "--profile-every-launch" in str(err) and "\n" not in str(err)
    log = NcuLog()
    log.errors.append("==ERROR== something else")
    assert "--profile-every-launch" not in str(diagnose(log, 1, "x.ncu.log", report_written=False))
