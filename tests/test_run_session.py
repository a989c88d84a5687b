"""One ncu session for several variants of one shape (issue 40, point 2): ``paprof run
--variant a,b,c`` profiles them under one ncu and splits its report into one run each
(``paprof.measure.session``, ``paprof.read.ncu_split``). With the fake ncu emitting a report
joined from recorded runs (``tests/fake_ncu/join_reports.py``) and the fake launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import FAKE_DIR, lab_shape, recorded
from paprof import phases as ph
from paprof import registry
from paprof.measure.argv import NcuSettings
from paprof.measure.profile import profile_variants
from paprof.read import ncu_fastread

sys.path.insert(0, str(FAKE_DIR))
from join_reports import join  # noqa: E402  (the fake ncu's helper)

pytestmark = pytest.mark.lab  # the lab's paged_decode, as a user's plugin
SHAPE = "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
VARIANTS = ("v2", "v3", "v4")


def _recorded(variant: str) -> Path:
    return recorded("h200") / "nvidia-h200" / "paged_decode" / variant / SHAPE


def _view(path: Path) -> list[tuple]:
    return [(r.kernel, sorted(r.values.items()), r.nvtx)
            for r in ncu_fastread.read_report(path, ("gpu__time_duration.sum", "dram__bytes.sum"))]


@pytest.fixture
def session(fake_bin, fake_launcher, tmp_path, monkeypatch):
    """The fake ncu writes v2, v3 and v4's recorded results as one session's report; the
    fake launcher lists v4's two kernels a launch (partial, merge)."""
    from paprof.measure import sass_hash

    monkeypatch.setattr(sass_hash, "hash_sass", lambda v, p, arch=None: sass_hash.not_taken("test"))
    joined = tmp_path / "session.ncu-rep"
    joined.write_bytes(join([_recorded(v) for v in VARIANTS]))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(joined))
    monkeypatch.setenv("FAKE_NCU_ARGVS", str(tmp_path / "argvs.jsonl"))
    fake_launcher.variants = {"v4": {"kernels": ["paged_decode_v4_partial", "paged_decode_v4_merge"]}}
    return tmp_path


def _argvs(where: Path) -> list[list[str]]:
    return [json.loads(line) for line in (where / "argvs.jsonl").read_text().splitlines()]


def _run(where: Path, **settings):
    return profile_variants([registry.get(v) for v in VARIANTS], lab_shape("batch=64,context=4096"),
                            NcuSettings(**settings), where / "runs")


def test_several_variants_share_one_ncu_session_and_each_keeps_its_own_report(session):
    outcomes = _run(session)
    (argv,) = _argvs(session)  # one ncu, not three
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--nvtx-include"] == [
        "paged_decode.v2/", "paged_decode.v3/", "paged_decode.v4/"]
    assert argv[argv.index("--launch-count") + 1] == "4"  # 1 + 1 + 2 kernels
    assert argv[argv.index("-m") + 1] == "paprof.measure.kernels.batch"
    assert argv[argv.index("--profile-launches") + 1] == "1" and "--no-check" in argv
    assert "--clock-control" in argv and argv[argv.index("--clock-control") + 1] == "none"
    for o in outcomes:
        assert _view(o.run.report) == _view(_recorded(o.variant.id))  # its results, none other
        shared = o.run.sidecar["ncu_session"]
        assert shared["variants"] == list(VARIANTS) and shared["of"] == 4
        assert len(o.run.sidecar["profiled_kernels"]) == (2 if o.variant.id == "v4" else 1)
        phases = {p.name: p for p in o.run.sidecar.phases}
        assert phases["ncu start"].shared == 3 and phases["ncu end"].shared == 3
        assert phases["split"].shared == 3
        assert phases["replay"].kernels == len(shared["results"]) and phases["replay"].shared == 1
        assert "ncu setup" in phases
        assert "one ncu session for v2, v3, v4" in o.run.report.with_name(
            o.run.report.name.replace(".ncu-rep", ".ncu.log")).read_text()
    assert [o.run.sidecar["ncu_session"]["results"] for o in outcomes] == [[0], [1], [2, 3]]
    sums = ph.totals([o.run.sidecar.phases for o in outcomes])
    start = {p.name: p for p in outcomes[0].run.sidecar.phases}["ncu start"]
    assert sums["ncu start"] == pytest.approx(start.seconds)  # once, not three times
    assert not list(Path(session).glob("paprof-session-*"))


def test_a_variant_that_fails_in_the_session_is_profiled_alone_and_the_others_keep_their_runs(
        session, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_SESSION_FAIL", "v3")
    outcomes = _run(session)
    first, alone = _argvs(session)
    assert "--profile-launches" in first
    assert [alone[i + 1] for i, a in enumerate(alone) if a == "--nvtx-include"] == ["paged_decode.v3/"]
    stored = {o.variant.id: o.run for o in outcomes}
    assert sorted(stored) == list(VARIANTS)
    assert "ncu_session" not in stored["v3"].sidecar
    for v in ("v2", "v4"):
        assert _view(stored[v].report) == _view(_recorded(v))


def test_results_that_do_not_number_the_launch_count_send_their_variant_alone(session, fake_launcher):
    fake_launcher.variants = {}  # v4 said to run one kernel a launch: its two results do not fit
    outcomes = _run(session)
    assert len(_argvs(session)) == 2
    stored = {o.variant.id: o.run for o in outcomes}
    assert "ncu_session" not in stored["v4"].sidecar and "ncu_session" in stored["v2"].sidecar


def test_per_variant_is_kept_behind_a_switch(session, monkeypatch):
    monkeypatch.setenv("PAPROF_NCU_PER_VARIANT", "1")
    _run(session)
    argvs = _argvs(session)
    assert len(argvs) == 3 and all("--profile-launches" not in a[:a.index("-m")] for a in argvs)
    assert all(a[a.index("-m") + 1] == "paprof.measure.kernels.launch" for a in argvs)


def test_run_timings_says_the_session_was_shared(paprof_cli, session, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    args = ["run", "--variant", "v2", "--variant", "v3", "--variant", "v4", "--runs",
            str(session / "runs"), "--timings"]
    result = CliRunner().invoke(paprof_cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "ncu setup" in result.output and "split" in result.output
    assert len(_argvs(session)) == 1


# ncu's progress in a shared session, as the H100 printed it (2026-12-06): no launch ids under
# the NVTX filter, the first kernel's passes on a line of their own after a warning, and v6 and
# v7 launching a kernel of the same name one after the other.
PRINTED = [
    '==PROF== Connected to process 1578 (/usr/bin/python3.12)\n',
    '==PROF== Profiling "paged_decode_baseline": 0%.',
    '\n==WARNING== Launching the workload is taking more time than expected.\n',
    '...50%....100% - 35 passes\n',
    '==PROF== Profiling "paged_decode_v6_nosplit": 0%....50%....100% - 35 passes\n',
    '==PROF== Profiling "paged_decode_v6_nosplit": 0%....',
    '50%....100% - 35 passes\n',
    '==PROF== Disconnected from process 1578\n',
]


def test_each_kernels_replay_is_timed_from_ncus_progress_as_it_prints_it(tmp_path):
    from paprof.measure import session as sess
    from paprof.measure.runner import run_ncu

    script = ("import sys, time\n"
              f"for i, chunk in enumerate({PRINTED!r}):\n"
              "    sys.stdout.write(chunk); sys.stdout.flush(); time.sleep(0.3 if i == 2 else 0.05)\n")
    report = tmp_path / "r.ncu-rep"
    report.write_bytes(b"x")
    owners = [registry.get(v) for v in ("baseline", "v6", "v7")]
    shown = []
    clock = sess._Clock(owners, lambda variant, kernel: shown.append(variant.id))
    ncu = run_ncu([sys.executable, "-c", script], tmp_path / "log", report, on_kernel=clock)
    end = clock.start + 10.0
    spans = clock.spans(end)
    assert len(spans) == len(ncu.log.kernels) == 3
    assert spans[0][1] - spans[0][0] >= 0.3  # the baseline's passes came late: it ends when v6 starts
    assert shown[0] == "baseline" and shown[-1] == "v7" and "v6" in shown
    phases = [sess._phases(clock.start, end, spans, [i], ncu.log.kernels, 3) for i in range(3)]
    by_name = [{p.name: p for p in one} for one in phases]
    assert by_name[0]["replay"].seconds >= 0.3 and by_name[1]["ncu setup"].seconds < 0.3
    assert [b["replay"].passes for b in by_name] == [35, 35, 35]
    assert by_name[2]["ncu end"].shared == 3
