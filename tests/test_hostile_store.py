"""Issue 38, items 2, 3 and 7: a store others wrote never makes paprof read or write
outside it, and no paprof process leaves workers or temporary files behind.

Links inside a store are skipped with a warning by every reader and by merge; merge's
temporary files cannot be pre-planted; a sparse report stays sparse; the lock and a
linked store folder never write outside the store; workers die with their parent, even
one killed with SIGKILL; SIGTERM ends a writer like Ctrl-C (exit 143, no temporary file).
"""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.errors import UserError
from paprof.read import store
from paprof.sweep import manifest as M
from paprof.sweep import results
from paprof.sweep.merge import merge_stores

from helpers import gone as _gone, recorded, shipped

REPO = Path(__file__).resolve().parents[1]
SECRET = "PAPROF_TEST_SECRET=hunter2"
posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and signals")


def _run(root: Path, variant: str, shape: str = "s", body: bytes = b"report",
         gpu: str = "g", family: str = "fam") -> store.RunPaths:
    """A whole run (report, sidecar, ncu log) written the way paprof writes one."""
    paths = store.run_paths(root, gpu, family, variant, shape)
    with store.writing(paths) as pending:
        pending.report.write_bytes(b"NVR\x00" + body)
        store.write_sidecar(pending.sidecar, {"variant": variant, "family": family,
                                              "shape_slug": shape, "gpu_slug": gpu})
    paths.log.write_text("ncu said\n")
    return paths


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET)
    return path


def _every_file(root: Path) -> list[Path]:
    return [Path(d) / f for d, _dirs, files in os.walk(root) for f in files]


def _holds_no_secret(root: Path) -> None:
    for path in _every_file(root):
        assert not path.is_symlink(), path
        assert SECRET.encode() not in path.read_bytes(), path


# -- item 2: merge never reads through a link ------------------------------------------------

@posix
def test_merge_skips_links_in_a_source_with_a_warning(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    secret = _secret(tmp_path)
    kept = _run(src, "v1")
    linked_log = _run(src, "v2")
    linked_log.log.unlink()
    linked_log.log.symlink_to(secret)  # x.ncu.log -> a file of secrets
    environ = _run(src, "v3")
    environ.log.unlink()
    environ.log.symlink_to("/proc/self/environ")
    outside = _run(tmp_path / "elsewhere", "v4")  # a whole run outside the source
    folder = store.run_paths(src, "g", "fam", "v4", "s").folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(outside.folder)  # a linked folder
    (src / "g" / "fam" / "v5").mkdir()
    (src / "g" / "fam" / "v5" / "s.ncu-rep").symlink_to(outside.report)  # a linked report
    os.environ["PAPROF_TEST_SECRET"] = "hunter2"
    try:
        res = merge_stores([src], out)
    finally:
        del os.environ["PAPROF_TEST_SECRET"]
    err = capsys.readouterr().err
    assert res.copied == 3  # v1, v2 and v3, without their linked logs
    names = sorted(str(p.relative_to(out)) for p in _every_file(out))
    assert names == sorted(str(p.relative_to(src)) for p in
                           (kept.report, kept.sidecar, kept.log, linked_log.report,
                            linked_log.sidecar, environ.report, environ.sidecar)), names
    _holds_no_secret(out)
    for link in (linked_log.log, environ.log, folder, src / "g" / "fam" / "v5" / "s.ncu-rep"):
        (line,) = [l for l in err.splitlines() if str(link) in l]
        assert line.startswith("paprof: warning: skipped ") and "symbolic link" in line


@posix
def test_merge_never_follows_a_link_planted_at_a_temporary_name(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    paths = _run(src, "v1")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = store.run_paths(out, "g", "fam", "v1", "s")
    target.folder.mkdir(parents=True)
    for p in (target.report, target.sidecar, target.log):  # every name merge used to use
        (p.parent / f".{p.name}{store.TEMP_MARK}{os.getpid()}").symlink_to(victim)
    merge_stores([src], out)
    assert victim.read_text() == "keep me"
    assert target.report.read_bytes() == paths.report.read_bytes() and not target.report.is_symlink()


@posix
def test_a_sparse_report_stays_sparse(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    paths = _run(src, "v1")
    size = 64 << 20
    with open(paths.report, "r+b") as fh:  # a 64 MiB report with a few bytes in it
        fh.truncate(size)
        fh.seek(size // 2)
        fh.write(b"data in the middle")
    side = json.loads(paths.sidecar.read_text())
    side[store.REPORT_BYTES] = size
    paths.sidecar.write_text(json.dumps(side))
    if os.stat(paths.report).st_blocks * 512 >= 1 << 20:
        pytest.skip("this file system does not keep holes")
    merge_stores([src], out)
    copy = store.run_paths(out, "g", "fam", "v1", "s").report
    assert copy.stat().st_size == size and copy.read_bytes() == paths.report.read_bytes()
    assert copy.stat().st_blocks * 512 < 1 << 20, copy.stat().st_blocks


# -- item 3: nothing written outside the store -----------------------------------------------

@posix
def test_a_linked_lock_file_is_refused_and_its_target_never_made(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    target = tmp_path / "outside" / "made-by-the-lock"
    target.parent.mkdir()
    (runs / store.LOCK_NAME).symlink_to(target)
    with pytest.raises(UserError, match=r"\.paprof\.lock: it is a symbolic link") as err:
        with store.locked(runs):
            pass
    assert "\n" not in str(err.value) and not target.exists()
    existing = tmp_path / "outside" / "kept"
    existing.write_text("keep me")
    (runs / store.LOCK_NAME).unlink()
    (runs / store.LOCK_NAME).symlink_to(existing)
    with pytest.raises(UserError):
        with store.locked(runs):
            pass
    assert existing.read_text() == "keep me"


@posix
@pytest.mark.parametrize("linked", ["g", "g/fam", "g/fam/v1"])
def test_a_linked_store_folder_receives_no_run(tmp_path, linked):
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runs / linked).parent.mkdir(parents=True, exist_ok=True)
    (runs / linked).symlink_to(elsewhere)
    with pytest.raises(UserError, match="is a symbolic link") as err:
        _run(runs, "v1")
    assert str(runs / linked) in str(err.value) and "\n" not in str(err.value)
    assert _every_file(elsewhere) == []


@posix
def test_a_linked_store_folder_receives_no_merged_record_nor_manifest(tmp_path, paprof_cli):
    src, out, elsewhere = tmp_path / "src", tmp_path / "out", tmp_path / "elsewhere"
    _run(src, "v1")
    elsewhere.mkdir()
    out.mkdir()
    (out / "g").symlink_to(elsewhere)
    result = CliRunner().invoke(paprof_cli, ["merge", str(src), "--out", str(out)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert f"{out / 'g'} is a symbolic link" in result.stderr
    assert _every_file(elsewhere) == []
    (out / "g").unlink()
    (out / M.FOLDER).symlink_to(elsewhere)  # a sweep's manifest is no more written there
    with pytest.raises(UserError, match="is a symbolic link"):
        M.save(out, {"name": "n", "kind": M.KIND})
    (out / "g").mkdir()
    (out / "g" / "fam").symlink_to(elsewhere)
    with pytest.raises(UserError, match="is a symbolic link"):  # nor a sweep's bench record
        store.write_json_atomic(out / "g" / "fam" / "v1" / "s.bench.json", {}, root=out)
    assert _every_file(elsewhere) == []


def _swapped_once_checked(monkeypatch, folder: Path, elsewhere: Path) -> None:
    """The attacker's move, at the worst moment: just after paprof checked (or opened) the
    store folder ``folder``, it is moved aside and a link to ``elsewhere`` put in its place."""
    from paprof.read import store_files

    def swap():
        if folder.is_dir() and not folder.is_symlink():
            folder.rename(folder.with_name(folder.name + ".moved"))
            folder.symlink_to(elsewhere)

    for name in ("folder", "open_folder"):
        real = getattr(store_files, name, None)
        if real is None:
            continue

        def checked(root, target, real=real):
            got = real(root, target)
            if Path(target) == folder:
                swap()
            return got

        monkeypatch.setattr(store_files, name, checked)


@posix
@pytest.mark.parametrize("writer", ["merge", "bench record", "manifest"])
def test_a_store_folder_swapped_for_a_link_after_its_check_receives_nothing(tmp_path, monkeypatch, writer):
    """Issue 38's check-then-use window: the folders are opened without following a link
    and used by descriptor, so the link put there after the check leads nowhere."""
    src, out, elsewhere = tmp_path / "src", tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    if writer == "merge":  # one bench record: one file to copy
        from types import SimpleNamespace

        from helpers import record, write_record

        params = SimpleNamespace(batch=1, context=16, spec=lambda: "batch=1", slug=lambda: "b1",
                                 to_dict=lambda: {"batch": 1})
        copied = write_record(src, record("fam", "v1", params, 10.0, gpu="g"))
        _swapped_once_checked(monkeypatch, out / copied.parent.relative_to(src), elsewhere)
        merge_stores([src], out)
    elif writer == "bench record":
        _swapped_once_checked(monkeypatch, out / "g" / "fam" / "v1", elsewhere)
        store.write_json_atomic(out / "g" / "fam" / "v1" / "s.bench.json", {"a": 1}, root=out)
    else:
        _swapped_once_checked(monkeypatch, out / M.FOLDER, elsewhere)
        M.save(out, {"name": "n", "kind": M.KIND})
    assert _every_file(elsewhere) == []


@posix
def test_a_log_planted_as_a_link_is_not_written_through(tmp_path):
    from paprof.measure import runner

    victim = tmp_path / "victim"
    victim.write_text("keep me")
    log = tmp_path / "runs" / "x.ncu.log"
    log.parent.mkdir()
    log.symlink_to(victim)
    with pytest.raises(UserError):
        runner.run_ncu([sys.executable, "-c", "print('==PROF== done')"], log, tmp_path / "r.ncu-rep")
    assert victim.read_text() == "keep me"
    assert log.is_file() and not log.is_symlink() and "$ " in log.read_text()


# -- item 3: every reader skips links inside a store, with a warning --------------------------

@posix
def test_the_readers_skip_links_inside_a_store(tmp_path, capsys):
    runs = tmp_path / "runs"
    kept = _run(runs, "v1")
    outside = _run(tmp_path / "elsewhere", "v2")
    (runs / "g" / "fam" / "v2").mkdir()
    (runs / "g" / "fam" / "v2" / "s.ncu-rep").symlink_to(outside.report)
    (runs / "h").symlink_to(tmp_path / "elsewhere" / "g")  # a linked GPU folder
    sidecar_link = _run(runs, "v3")
    sidecar_link.sidecar.unlink()
    sidecar_link.sidecar.symlink_to(outside.sidecar)
    bench = tmp_path / "elsewhere" / "g" / "fam" / "v2" / "s.bench.json"
    bench.write_text(json.dumps({"kind": results.BENCH_KIND, "variant": "v2"}))
    (runs / "g" / "fam" / "v1" / "t.bench.json").symlink_to(bench)

    assert [r.report for r in store.find_runs(runs)] == [kept.report, sidecar_link.report]
    assert store.find_runs(runs)[1].sidecar is None  # its linked sidecar is not read
    assert [r.path for r in results.find_records(runs)] == [kept.report, sidecar_link.report]
    assert results.stored(runs, None, "fam", "v2", "s", "profile") is None  # not via h/
    assert results.stored(runs, None, "fam", "v2", "s", "bench") is None
    assert results.stored(runs, "g", "fam", "v1", "t", "bench") is None
    assert not store.is_stored(sidecar_link)
    err = capsys.readouterr().err
    for link in ("g/fam/v2/s.ncu-rep", "h", "g/fam/v3/s.json", "g/fam/v1/t.bench.json"):
        assert any(l.startswith(f"paprof: warning: skipped {runs / link}: ")
                   for l in err.splitlines()), (link, err)


@posix
def test_a_linked_sweeps_folder_or_manifest_is_skipped(tmp_path, capsys):
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    (elsewhere / M.FOLDER).mkdir(parents=True)
    (elsewhere / M.FOLDER / "s.json").write_text("{}")
    runs.mkdir()
    (runs / M.FOLDER).symlink_to(elsewhere / M.FOLDER)
    with pytest.raises(UserError, match="holds no sweep"):
        M.find(runs)
    (runs / M.FOLDER).unlink()
    (runs / M.FOLDER).mkdir()
    (runs / M.FOLDER / "s.json").symlink_to(elsewhere / M.FOLDER / "s.json")
    with pytest.raises(UserError, match="holds no sweep"):
        M.find(runs)
    assert "paprof: warning: skipped" in capsys.readouterr().err


@posix
def test_table_and_compare_skip_a_linked_report(tmp_path, paprof_cli):
    runs = tmp_path / "runs"
    for variant in ("v3", "v5"):
        report = shipped(variant)
        folder = runs / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True)
        shutil.copy(report, folder)
        shutil.copy(report.with_suffix(".json"), folder)
    linked = runs / "nvidia-h200" / "paged_decode" / "v2"
    linked.mkdir()
    (linked / shipped("v2").name).symlink_to(shipped("v2"))
    result = CliRunner().invoke(paprof_cli, ["table", str(runs), "--format", "csv"])
    assert result.exit_code == 0, result.output
    variants = {line.split(",")[0] for line in result.stdout.splitlines()[1:]}
    assert variants == {"v3", "v5"}, variants
    assert f"paprof: warning: skipped {linked / shipped('v2').name}" in result.stderr
    result = CliRunner().invoke(paprof_cli, ["compare", "v2", "v3", "--runs", str(runs),
                                             "--markdown", "-"])
    assert result.exit_code == 2 and "no run of v2" in result.stderr, result.output


def test_a_fifo_as_a_sidecar_does_not_block(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs")
    paths = _run(tmp_path, "v1")
    paths.sidecar.unlink()
    os.mkfifo(paths.sidecar)
    (run,) = store.find_runs(tmp_path)
    assert run.sidecar is None


def test_the_walk_finds_what_rglob_found(tmp_path):
    from paprof.read import store_files

    for variant in ("v1", "v2", "v10"):
        _run(tmp_path, variant, shape="b-1")
        _run(tmp_path, variant, shape="b1")
    found = store_files.files(tmp_path, ".ncu-rep")
    assert found == sorted(tmp_path.rglob("*.ncu-rep"))


# -- item 7: workers die with their parent; SIGTERM ends a writer like Ctrl-C ----------------

POOL = r'''
import os, sys, time
from paprof import parallel
fallback = sys.argv[1] == "no-pdeathsig"
if fallback:  # the portable way alone: a waiting worker sees that it is orphaned
    parallel._die_with = lambda parent: None

def busy(x):
    time.sleep(600)

pool = parallel.ordered_map(busy, iter([] if fallback else [1]), 2)
with pool as results:  # with pdeathsig one worker is busy, one waits; else both wait
    print(" ".join(str(w.process.pid) for w in pool.workers), flush=True)
    for r in results:
        pass
    time.sleep(600)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["pdeathsig", "no-pdeathsig"])
def test_workers_die_when_their_parent_is_killed(tmp_path, how):
    proc = subprocess.Popen([sys.executable, "-c", POOL, how], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    pids = [int(p) for p in proc.stdout.readline().split()]
    try:
        assert len(pids) == 2
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10  # pdeathsig: at once; else at the next look (1 s)
        while time.monotonic() < deadline and not all(_gone(p) for p in pids):
            time.sleep(0.05)
        assert [p for p in pids if not _gone(p)] == []
    finally:
        proc.stdout.close()
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


_TERM_SHIM = """
import os, sys, time

_SRC = os.environ["PAPROF_TEST_SRC"]
_FD = int(os.environ["PAPROF_TEST_STOP_FD"])
_seen = []


def _opens(event, args):
    if event != "open" or _seen is None or not isinstance(args[0], (str, os.PathLike)):
        return
    path = os.fspath(args[0])
    if path.startswith(_SRC) and path.endswith(".ncu-rep"):
        _seen.append(path)
        if len(_seen) == 5:  # the fifth report copied: its sidecar's temporary file is made
            os.write(_FD, b"copying\\n")
            time.sleep(300)  # the test's signal ends this


sys.addaudithook(_opens)
"""


def merge_stopped_mid_copy(tmp_path: Path, src: Path, out: Path, stop: int) -> tuple[int, str]:
    """``paprof merge SRC --out OUT`` in a process held at its fifth report, its temporary
    files made; sent ``stop`` there: its exit status and stderr."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_TERM_SHIM)
    read, write = os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(REPO)]),
           "PAPROF_TEST_SRC": str(src), "PAPROF_TEST_STOP_FD": str(write)}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "paprof", "merge", str(src), "--out", str(out)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                pass_fds=(write,), cwd=tmp_path)
        os.close(write)
        ready, _, _ = select.select([read], [], [], 120)
        assert ready and os.read(read, 100) == b"copying\n", proc.communicate(timeout=60)
        assert [p for p in _every_file(out) if store.TEMP_MARK in p.name]  # caught mid-copy
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(read)
    return proc.returncode, err


@posix
def test_sigterm_during_merge_leaves_no_temporary_file_and_exits_143(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    for i in range(12):
        _run(src, f"v{i}", body=bytes(200_000))
    returncode, err = merge_stopped_mid_copy(tmp_path, src, out, signal.SIGTERM)
    assert returncode == 143, err
    assert err.strip().splitlines() == ["paprof: terminated"], err
    assert [p for p in _every_file(out) if store.TEMP_MARK in p.name or p.name.startswith(".")
            and p.name != store.LOCK_NAME] == []
    for report in out.rglob("*.ncu-rep"):  # what was copied is whole
        assert report.read_bytes() == (src / report.relative_to(out)).read_bytes()
        assert store.sidecar_path(report).is_file()


# -- beyond the list: the NVRTC cubin cache in a shared temporary folder ----------------------

@posix
@pytest.mark.parametrize("planted", ["world-writable", "link", "mine"])
def test_the_cubin_cache_in_the_temporary_folder_is_this_users_alone(tmp_path, monkeypatch, planted):
    """Without a writable home the cubins (run on the GPU) went to /tmp/paprof-cubin, which
    another user could make first and fill."""
    import tempfile

    from paprof.measure.kernels import gpu

    (tmp_path / "home-is-a-file").write_text("")
    monkeypatch.setenv("PAPROF_CUBIN_CACHE", str(tmp_path / "home-is-a-file" / "cubin"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / f"paprof-cubin-{os.geteuid()}"
    if planted == "link":
        (tmp_path / "theirs").mkdir()
        shared.symlink_to(tmp_path / "theirs")
    else:
        shared.mkdir(mode=0o700)
        if planted == "world-writable":
            shared.chmod(0o777)
    folder = gpu.cubin_folder()
    assert (folder == shared) == (planted == "mine"), folder
    assert folder.is_dir() and not folder.is_symlink() and not folder.stat().st_mode & 0o077


# -- beyond the list: the workers of sweep --gpus end with it ----------------------------------

SPAWNER = r'''
import sys, time
from pathlib import Path
from paprof.sweep import gpus
child = gpus.spawn([sys.executable, "-c", "import time; time.sleep(600)"], None, Path(sys.argv[1]))
print(child.pid, flush=True)
time.sleep(600)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_a_sweep_gpu_worker_ends_when_its_parent_is_killed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SPAWNER, str(tmp_path / "shard-1.log")],
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    child = int(proc.stdout.readline())
    try:
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _gone(child):
            time.sleep(0.05)
        assert _gone(child)
    finally:
        proc.stdout.close()
        if not _gone(child):
            os.kill(child, signal.SIGKILL)


@posix
def test_sigterm_while_sweep_gpu_workers_run_stops_them(tmp_path, monkeypatch):
    from rich.console import Console

    from paprof.interrupts import Terminated
    from paprof.sweep import gpus

    def stop(*_a, **_k):
        raise Terminated()

    monkeypatch.setattr(gpus, "_progress", stop)
    started = []

    def spawner(argv, env, log):
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
        return started[-1]

    with pytest.raises(Terminated):
        gpus.run_on_gpus([], ["0", "1"], tmp_path / "runs", spawner=spawner,
                         console=Console(file=io.StringIO()), poll_s=0)
    assert [p.returncode for p in started] == [-signal.SIGTERM] * 2


@posix
def test_a_sweep_gpu_worker_log_planted_as_a_link_is_refused(tmp_path):
    from paprof.sweep import gpus

    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "shard-1.log").symlink_to(victim)
    with pytest.raises(UserError, match="cannot write the worker's log"):
        gpus.spawn([sys.executable, "-c", "print('x')"], None, tmp_path / "shard-1.log")
    assert victim.read_text() == "keep me"


@pytest.mark.lab
def test_sigterm_during_a_sweep_is_one_line_143_and_keeps_the_manifest(paprof_cli, tmp_path, monkeypatch):
    from helpers import FakeRunner

    from paprof.interrupts import Terminated
    from paprof.sweep import run as run_module

    class TermRunner(FakeRunner):
        def __call__(self, *args, **kwargs):
            if len(self.calls) == 1:
                self.calls.append(None)
                raise Terminated()
            return super().__call__(*args, **kwargs)

    monkeypatch.setitem(run_module.RUNNERS, "bench", TermRunner())
    runs = tmp_path / "r"
    result = CliRunner().invoke(paprof_cli, ["sweep", "--variant", "v5", "--grid", "batch=1,2",
                                             "--shape", "dtype=fp16", "--runs", str(runs)])
    assert result.exit_code == 143, result.output
    lines = [l for l in result.stderr.strip().splitlines() if not l.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("paprof: terminated (stopped at batch 2"), lines
    assert M.status_counts(M.find(runs))["done"] == 1


@pytest.mark.parametrize("command", ["check --json", "check --junit", "table --out", "table --json",
                                     "calibrate --out"])
def test_an_output_inside_the_store_s_folders_is_refused(tmp_path, paprof_cli, command):
    """Like compare, sweep-report and baseline: check's, table's and calibrate's outputs
    never land in the store's folders (a file in ``sweeps/`` made every later sweep-report
    and merge of the store fail; one in a run's folder is read back as a record)."""
    store_dir = tmp_path / "runs"
    for variant in ("v2", "v3"):
        report = shipped(variant)
        folder = store_dir / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True)
        for path in (report, report.with_suffix(".json")):
            shutil.copy(path, folder / path.name)
    (store_dir / M.FOLDER).mkdir()
    inside = store_dir / M.FOLDER / "out.json"
    name, option = command.split()
    args = {"check": ["check", "--baseline", str(tmp_path / "b.json"), "--runs", str(store_dir)],
            "table": ["table", str(store_dir)],
            "calibrate": ["calibrate", "--runs", str(store_dir), "--runs", str(store_dir)]}[name]
    if name == "check":
        made = CliRunner().invoke(paprof_cli, ["baseline", "update", "--runs", str(store_dir),
                                               "--out", str(tmp_path / "b.json")])
        assert made.exit_code == 0, made.output
    result = CliRunner().invoke(paprof_cli, [*args, option, str(inside)])
    assert result.exit_code == 2, result.output
    assert "inside the run store" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not inside.exists()
