"""Issue 38's left-overs: ncu's files, a folder swapped while a run is written, and what a
writer killed with SIGKILL leaves behind.

ncu writes its report (and paprof its log) by path, so they go into a private folder
(mode 0700, where no one else can rename it) and are moved into the run's folder by
descriptor: a run folder or store folder swapped for a link after its check, or while
ncu runs, receives nothing, and a link planted at a final name is refused. Temporary
files and private folders of a writer killed with SIGKILL are never read as data and
are removed by the next writer when their process is gone and they are this user's.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.errors import UserError
from paprof.measure import profile
from paprof.measure.argv import NcuSettings
from paprof.read import store, store_files
from paprof.sweep.merge import merge_stores

from helpers import shipped
from test_hostile_store import _every_file, _run, merge_stopped_mid_copy

posix = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "getuid"),
                           reason="POSIX links, owners and signals")
GPU = "nvidia-h200"  # the fake nvidia-smi's


def _profile(runs: Path, name: str = "mine"):
    """``paprof run --cmd true --all`` under the fake ncu (no GPU, no launcher)."""
    variant = registry.command_variant(["true"], "step", name)
    return profile.profile_variant(variant, None, NcuSettings(), runs)


def _folder(runs: Path, name: str = "mine") -> Path:
    return store.run_paths(runs, GPU, registry.COMMAND_FAMILY, name, store.COMMAND_SLUG).folder


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


# -- (a) ncu writes into a private folder ----------------------------------------------------

@posix
def test_ncu_writes_its_report_and_log_into_a_private_folder_then_they_are_moved(fake_bin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.json"))
    modes = []
    real = profile.run_ncu

    def watching(argv, log, report, **kw):  # while ncu runs: where it writes
        private = Path(report).parent
        modes.append((private, private.stat().st_mode & 0o777, private.stat().st_uid, Path(log).parent))
        return real(argv, log, report, **kw)

    monkeypatch.setattr(profile, "run_ncu", watching)
    runs = tmp_path / "runs"
    run = _profile(runs)
    ((private, mode, uid, log_folder),) = modes
    assert mode == 0o700 and uid == os.getuid() and log_folder == private
    assert private.parent == runs and private != _folder(runs) and not private.exists()
    ran = json.loads((tmp_path / "argv.json").read_text())
    assert Path(ran[ran.index("-o") + 1]).parent == private  # ncu was handed the private path
    assert sorted(p.name for p in _folder(runs).iterdir()) == [
        "command.json", "command.ncu-rep", "command.ncu.log"]
    assert run.report.read_bytes() == b"fake ncu report\n" and "==PROF==" in store.run_paths(
        runs, GPU, "command", "mine", "command").log.read_text()
    assert [p for p in _every_file(runs) if store.TEMP_MARK in p.name] == []


@posix
def test_a_failed_ncu_still_leaves_its_log_in_the_run_folder(fake_bin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    runs = tmp_path / "runs"
    with pytest.raises(UserError, match="ERR_NVGPUCTRPERM") as err:
        _profile(runs)
    log = _folder(runs) / "command.ncu.log"
    assert str(log) in str(err.value)  # the error names where the log is, and it is there
    assert [p.relative_to(runs) for p in _every_file(runs)] == [log.relative_to(runs)]


@posix
@pytest.mark.parametrize("when", ["after its check", "while ncu runs"])
@pytest.mark.parametrize("level", ["run folder", "store folder"])
def test_a_folder_swapped_for_a_link_receives_nothing_of_the_run(fake_bin, tmp_path, monkeypatch, when, level):
    """(a) and (b): the attacker moves the run's folder (or a folder above it) aside and puts
    a link to a folder of theirs in its place, just after paprof checked and opened it, or
    while ncu runs; ncu's report, the log, the sidecar: none lands there."""
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = _folder(runs) if level == "run folder" else runs / GPU
    folder.mkdir(parents=True)
    swapped = []

    def swap():
        if not swapped:
            folder.rename(folder.with_name(folder.name + ".moved"))
            folder.symlink_to(elsewhere)
            swapped.append(True)

    if when == "after its check":
        real_open = store_files.open_folder

        def opened(root, target):
            fd = real_open(root, target)
            swap()
            return fd

        monkeypatch.setattr(store_files, "open_folder", opened)
    else:
        real_run = profile.run_ncu

        def running(*args, **kw):
            swap()
            return real_run(*args, **kw)

        monkeypatch.setattr(profile, "run_ncu", running)
    with pytest.raises(UserError, match="was moved or replaced while the run was written") as err:
        _profile(runs)
    assert "\n" not in str(err.value)
    assert swapped and _every_file(elsewhere) == []
    moved = folder.with_name(folder.name + ".moved")
    assert sorted(p.name for p in _every_file(moved)) == ["command.json", "command.ncu-rep", "command.ncu.log"]


@posix
@pytest.mark.parametrize("name", ["command.ncu.log", "command.json", "command.ncu-rep"])
def test_a_link_planted_at_a_final_name_is_refused_and_not_written_through(fake_bin, tmp_path, monkeypatch, name):
    runs, victim = tmp_path / "runs", tmp_path / "victim"
    victim.write_text("keep me")
    real_run = profile.run_ncu

    def planting(*args, **kw):  # while ncu runs, the attacker plants a link at the final name
        got = real_run(*args, **kw)
        (_folder(runs) / name).symlink_to(victim)
        return got

    monkeypatch.setattr(profile, "run_ncu", planting)
    with pytest.raises(UserError) as err:
        _profile(runs)
    text = str(err.value)
    assert "\n" not in text and name in text and "symbolic link" in text, text
    assert victim.read_text() == "keep me" and (_folder(runs) / name).is_symlink()
    assert not store.is_stored(store.run_paths(runs, GPU, "command", "mine", "command"))
    assert [p for p in _every_file(runs) if store.TEMP_MARK in p.name] == []


@posix
def test_where_others_may_rename_in_the_store_ncu_writes_in_the_temporary_folder(fake_bin, tmp_path, monkeypatch):
    """A store folder others may write (no sticky bit) could see the private folder renamed
    and replaced: the system's temporary folder is used, and the files are copied across
    (a rename fails between file systems)."""
    runs, tmp = tmp_path / "runs", tmp_path / "tmp"
    runs.mkdir()
    runs.chmod(0o777)
    tmp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    seen = []
    real_run = profile.run_ncu
    monkeypatch.setattr(profile, "run_ncu",
                        lambda argv, log, report, **kw: seen.append(Path(report).parent) or real_run(argv, log, report, **kw))

    real_replace = os.replace

    def across(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        if src_dir_fd != dst_dir_fd:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(store_files.os, "replace", across)
    run = _profile(runs)
    assert seen[0].parent == tmp and list(tmp.iterdir()) == []
    assert run.report.read_bytes() == b"fake ncu report\n" and store.is_stored(
        store.run_paths(runs, GPU, "command", "mine", "command"))
    assert [p for p in _every_file(runs) if store.TEMP_MARK in p.name] == []


@posix
def test_with_no_safe_place_for_ncu_s_report_the_run_is_refused_in_one_line(fake_bin, tmp_path, monkeypatch):
    runs, tmp = tmp_path / "runs", tmp_path / "tmp"
    runs.mkdir()
    tmp.mkdir()
    for folder in (runs, tmp):
        folder.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with pytest.raises(UserError, match="no safe place for ncu's report") as err:
        _profile(runs)
    assert "\n" not in str(err.value) and str(runs) in str(err.value)
    assert _every_file(runs) == [] and list(tmp.iterdir()) == []


# -- (c) what a writer killed with SIGKILL leaves ----------------------------------------------

def _stale_name(name: str, pid: int, host: str | None = None) -> str:
    return f".{name}{store.TEMP_MARK}{pid}@{host or store_files.host()}-{'ab' * 8}.0123abcd"


@posix
def test_merge_removes_the_stale_temporary_files_of_dead_writers_and_only_those(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    _run(src, "v1")
    folder = out / "g" / "fam" / "v0"
    folder.mkdir(parents=True)
    dead, alive = _dead_pid(), os.getppid()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    stale = [folder / _stale_name("s.ncu-rep", dead), folder / _stale_name("s.json", dead),
             out / _stale_name("s.bench.json", dead)]
    kept = [folder / _stale_name("t.ncu-rep", alive),                    # its writer is alive
            folder / _stale_name("u.ncu-rep", dead, host="0badc0de"),    # another machine's
            folder / f".w.ncu-rep{store.TEMP_MARK}{dead}-{'cd' * 8}.0123abcd",  # no machine named
            folder / "plain.ncu-rep.tmp-x"]                                # no token
    for path in stale + kept:
        path.write_bytes(b"NVR\x00half")
    private = out / f".paprof-run{store.TEMP_MARK}{dead}@{store_files.host()}-{'ab' * 8}.x1y2z3"
    private.mkdir(mode=0o700)
    (private / ".s.tmp-1.ncu-rep").write_bytes(b"half")
    link = folder / _stale_name("v.ncu-rep", dead)
    link.symlink_to(victim)  # a link with a stale name: not followed, not taken for ours
    if os.geteuid() == 0:  # another user's, as CI runs as root
        other = folder / _stale_name("o.ncu-rep", dead)
        other.write_bytes(b"theirs")
        os.chown(other, 4243, -1)
        kept.append(other)
    merge_stores([src], out)
    assert [p for p in stale if os.path.lexists(p)] == [] and not private.exists()
    assert [p for p in kept if not p.exists()] == []
    assert link.is_symlink() and victim.read_text() == "keep me"


@posix
def test_a_stale_private_folder_in_the_store_is_removed_by_the_next_run(fake_bin, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    dead = _dead_pid()
    left = runs / f".paprof-run{store.TEMP_MARK}{dead}@{store_files.host()}-{'ab' * 8}.k9j8h7"
    left.mkdir(mode=0o700)
    (left / f".command{store.TEMP_MARK}x.ncu-rep").write_bytes(b"NVR\x00half")
    _profile(runs)
    assert not left.exists()
    assert [p for p in _every_file(runs) if store.TEMP_MARK in p.name] == []


@posix
def test_after_kill_9_of_merge_the_next_merge_and_table_read_no_leftover_as_data(tmp_path, paprof_cli):
    src, out = tmp_path / "src", tmp_path / "out"
    for i in range(8):
        _run(src, f"v{i}", body=bytes(50_000))
    returncode, _ = merge_stopped_mid_copy(tmp_path, src, out, signal.SIGKILL)
    assert returncode == -signal.SIGKILL
    left = [p for p in _every_file(out) if store.TEMP_MARK in p.name]
    assert left  # kill -9 leaves them: nothing can remove them in that process
    assert store.find_runs(out) == store.find_runs(out)  # readable
    assert not [r for r in store.find_runs(out) if store.TEMP_MARK in str(r.report)]
    result = CliRunner().invoke(paprof_cli, ["merge", str(src), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [p for p in _every_file(out) if store.TEMP_MARK in p.name] == []
    reports = sorted(out.rglob("*.ncu-rep"))
    assert len(reports) == 8 and all(store.sidecar_path(r).is_file() for r in reports)


@posix
def test_table_reads_no_leftover_of_a_killed_writer_as_data(tmp_path, paprof_cli):
    """Copies of a real run at the names a killed merge or run leaves (hidden, with the
    temporary mark, in the run's folder or in a private folder): ``paprof table`` shows the
    one run, as it does without them."""
    report = shipped("v3")
    runs = tmp_path / "runs"
    folder = runs / "nvidia-h200" / "paged_decode" / "v3"
    folder.mkdir(parents=True)
    for src in (report, report.with_suffix(".json")):
        shutil.copy(src, folder / src.name)
    clean = CliRunner().invoke(paprof_cli, ["table", str(runs), "--format", "csv"])
    assert clean.exit_code == 0, clean.output
    dead = _dead_pid()
    private = runs / f".paprof-run{store.TEMP_MARK}{dead}@{store_files.host()}-{'ab' * 8}.x1y2z3"
    private.mkdir(mode=0o700)
    stem = f".{report.stem}{store.TEMP_MARK}{dead}@{store_files.host()}-{'ab' * 8}"
    for where, name in ((folder, _stale_name(report.name, dead)),
                        (folder, _stale_name(report.with_suffix(".json").name, dead)),
                        (private, stem + ".ncu-rep"), (private, stem + ".json")):
        shutil.copy(report if name.endswith(".ncu-rep") or ".ncu-rep." in name else report.with_suffix(".json"),
                    where / name)
    with_leftovers = CliRunner().invoke(paprof_cli, ["table", str(runs), "--format", "csv"])
    assert with_leftovers.exit_code == 0, with_leftovers.output
    assert with_leftovers.stdout == clean.stdout and store.TEMP_MARK not in with_leftovers.stdout


# -- beyond the list: the code paprof.profile generates lives in the store -------------------

@posix
@pytest.mark.parametrize("hostile", ["world-writable code folder", "linked code folder",
                                     "store others may rename in", "another user's code folder"])
def test_a_notebook_s_generated_code_goes_only_where_no_one_else_may_change_it(tmp_path, hostile):
    """``paprof.profile`` writes the cell's code into ``<runs>/.paprof-code/`` and a child
    process imports it: in a store where another user could change it first (or through a
    link out of it), it is refused in one line and nothing is written."""
    from paprof import profile_api

    runs, elsewhere = tmp_path / "shared" / "runs", tmp_path / "elsewhere"
    runs.mkdir(parents=True)
    elsewhere.mkdir()
    code = runs / profile_api.CODE_FOLDER
    if hostile == "world-writable code folder":
        code.mkdir(mode=0o777)
        code.chmod(0o777)  # whatever the umask
    elif hostile == "linked code folder":
        code.symlink_to(elsewhere)
    elif hostile == "store others may rename in":
        runs.parent.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root (CI runs as root)")
        code.mkdir()
        os.chown(code, 4243, -1)
    with pytest.raises(UserError) as err:
        profile_api._write_module(runs, "family = None\n")
    assert "\n" not in str(err.value)
    assert _every_file(elsewhere) == [] and [p for p in _every_file(runs) if p.suffix == ".py"] == []
    if hostile == "store others may rename in":
        runs.parent.chmod(0o755)
        module, folder = profile_api._write_module(runs, "family = None\n")  # its own store: written
        assert (folder / f"{module}.py").read_text() == "family = None\n"


@posix
def test_a_bench_record_writer_removes_the_stale_temporary_files_of_its_folder(tmp_path):
    """A sweep's bench records and manifests (``write_json_atomic``) clean their folder too."""
    runs = tmp_path / "runs"
    folder = runs / "g" / "fam" / "v1"
    folder.mkdir(parents=True)
    stale = folder / _stale_name("s.bench.json", _dead_pid())
    stale.write_text("{")
    store.write_json_atomic(folder / "s.bench.json", {"a": 1}, root=runs)
    assert not stale.exists() and json.loads((folder / "s.bench.json").read_text()) == {"a": 1}
