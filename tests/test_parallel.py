"""Worker processes (``paprof.parallel``): the reports of a store read by a pool give the
same table as read in one process, rows in the same order; errors and Ctrl-C end the
workers; ``PAPROF_JOBS`` chooses; the sweep report's charts drawn by workers are the same.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from paprof import parallel
from paprof.model import load
from paprof.errors import UserError
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]


def _store(tmp_path: Path, copies: int = 4) -> Path:
    """Copies (hard links) of the recorded H200 and flash_fwd runs, one report without its
    sidecar (named by the folder layout): runs of one and of two kernels, two families."""
    store = tmp_path / "store"
    for k in range(copies):
        for source in ("h200", "h200-flash_fwd"):
            shutil.copytree(recorded(source), store / f"c{k}" / source, copy_function=os.link)
    lone = sorted((store / f"c{copies - 1}" / "h200").rglob("*.json"))[-1]
    lone.unlink()
    return store


def _text(df) -> list:
    """Everything a frame holds, as text (NaN compares equal), in order."""
    return [list(df.columns), [str(t) for t in df.dtypes], repr(df.attrs),
            [repr(df[c].tolist()) for c in df.columns]]


@pytest.fixture
def small_pool(monkeypatch):
    """The pool used from 2 runs on, 3 runs a task: several tasks for a small store."""
    monkeypatch.setattr(load, "PARALLEL_RUNS", 2)
    monkeypatch.setattr(load, "CHUNK_RUNS", 3)


def _no_pool(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a pool was made")

    monkeypatch.setattr(parallel, "_pool", refuse)


def test_parallel_load_is_the_serial_load(tmp_path, small_pool):
    store = _store(tmp_path)
    serial = load.load_reports([store], jobs=1)
    pooled = load.load_reports([store], jobs=2)
    assert len(pooled) == len(serial) > 40
    assert _text(pooled) == _text(serial)
    paths = pooled["report_path"].tolist()
    assert paths == sorted(paths, key=Path)  # the store's order
    assert pooled.attrs["missing"] == serial.attrs["missing"]
    # each row holds its run's own sidecar dict, as the serial path does
    sides = pooled["sidecar"].tolist()
    v4 = [i for i, k in enumerate(pooled["kernel"]) if "v4" in k]
    assert len(v4) >= 2 and sides[v4[0]] is sides[v4[1]]
    assert sum(s is None for s in sides) == sum(s is None for s in serial["sidecar"]) > 0
    assert multiprocessing.active_children() == []


def test_variant_rows_of_a_parallel_load(tmp_path, small_pool):
    store = _store(tmp_path, copies=2)
    assert (_text(load.variant_rows(load.load_reports([store], jobs=2)))
            == _text(load.variant_rows(load.load_reports([store], jobs=1))))


def test_the_first_bad_report_in_order_is_the_error(tmp_path, small_pool):
    store = _store(tmp_path)
    reports = sorted(store.rglob("*.ncu-rep"))
    for bad in (reports[7], reports[20]):
        bad.unlink()
        bad.write_bytes(b"NVR\x00" + b"\x07" * 40)
    with pytest.raises(UserError) as serial:
        load.load_reports([store], jobs=1)
    with pytest.raises(UserError) as pooled:
        load.load_reports([store], jobs=2)
    assert str(pooled.value) == str(serial.value)
    assert str(reports[7]) in str(pooled.value)
    assert multiprocessing.active_children() == []


def _break_sidecar(report: Path) -> None:
    sidecar = report.with_suffix(".json")
    sidecar.unlink()  # (a hard link: the shipped file stays whole)
    sidecar.write_text("{not json")


@pytest.mark.parametrize("bad_report", [None, 2, 7, 20, 30])
def test_a_bad_sidecar_is_the_error_wherever_the_first_bad_report_is(
        tmp_path, small_pool, bad_report):
    """The pool reads the sidecars piece by piece as it hands the pieces out, the serial
    load all of them first: a sidecar that cannot be read is the error either way, even
    when a report before it (in an earlier piece, the same one or a later one) is bad."""
    store = _store(tmp_path)
    reports = sorted(store.rglob("*.ncu-rep"))
    assert reports[25].with_suffix(".json").is_file()
    _break_sidecar(reports[25])
    if bad_report is not None:
        reports[bad_report].unlink()
        reports[bad_report].write_bytes(b"NVR\x00" + b"\x07" * 40)
    with pytest.raises(UserError) as serial:
        load.load_reports([store], jobs=1)
    with pytest.raises(UserError) as pooled:
        load.load_reports([store], jobs=2)
    assert "cannot read the run sidecar" in str(serial.value)
    assert str(pooled.value) == str(serial.value)
    assert multiprocessing.active_children() == []


def test_a_bad_sidecar_comes_before_a_later_path_s_error(tmp_path):
    store = _store(tmp_path, copies=1)
    _break_sidecar(sorted(store.rglob("*.ncu-rep"))[3])
    with pytest.raises(UserError, match="cannot read the run sidecar"):
        load.load_reports([store, tmp_path / "nothing here"], jobs=2)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="cannot read the run sidecar"):
        load.load_reports([store, tmp_path / "empty"], jobs=2)


def test_paprof_jobs_1_and_small_stores_stay_in_process(tmp_path, monkeypatch):
    store = _store(tmp_path, copies=1)
    expected = _text(load.load_reports([store], jobs=1))
    _no_pool(monkeypatch)
    monkeypatch.setenv("PAPROF_JOBS", "1")
    monkeypatch.setattr(load, "PARALLEL_RUNS", 2)
    assert _text(load.load_reports([store])) == expected
    monkeypatch.setenv("PAPROF_JOBS", "2")
    monkeypatch.setattr(load, "PARALLEL_RUNS", 1000)  # a small store: no pool
    assert _text(load.load_reports([store])) == expected


@pytest.mark.parametrize("given, expected", [("1", 1), (" 3 ", 3), ("16", 16)])
def test_jobs_from_the_environment(given, expected):
    assert parallel.jobs({"PAPROF_JOBS": given}) == expected


@pytest.mark.parametrize("given", ["0", "-2", "two", "1.5"])
def test_bad_jobs_is_one_line_of_user_error(given):
    with pytest.raises(UserError, match="PAPROF_JOBS must be a whole number"):
        parallel.jobs({"PAPROF_JOBS": given})


def test_default_jobs_follow_the_processors_capped():
    count = parallel.jobs({})
    assert 1 <= count <= parallel.MAX_JOBS
    assert count <= (os.cpu_count() or 1)


def test_ordered_map_keeps_the_order_and_reaps_its_workers():
    tasks = [9, -4, 16, -1, 25, 0, -36]
    with parallel.ordered_map(abs, tasks, 3) as results:
        assert list(results) == [abs(t) for t in tasks]
    assert multiprocessing.active_children() == []
    with pytest.raises(ValueError, match="'x'") as raised:
        with parallel.ordered_map(int, ["1", "2", "x", "y"], 2) as results:
            list(results)
    assert "Traceback" in str(raised.value.__cause__)  # the worker's, as its cause
    assert multiprocessing.active_children() == []
    with parallel.ordered_map(abs, tasks, 2) as results:  # left early
        assert next(iter(results)) == 9
    assert multiprocessing.active_children() == []


def test_tasks_are_taken_as_workers_need_them():
    taken = []

    def tasks():
        for k in range(100):
            taken.append(k)
            yield k

    with parallel.ordered_map(abs, tasks(), 2) as results:
        assert taken == []  # none before the results are asked for
        assert list(results) == list(range(100))
    assert taken == list(range(100))
    assert multiprocessing.active_children() == []


def _exit_at_2(task: int) -> int:
    if task == 2:
        os._exit(3)
    return task


def test_a_worker_that_dies_is_an_error_not_a_wait():
    with pytest.raises(UserError, match=r"worker process ended .*\(exit code 3\)"):
        with parallel.ordered_map(_exit_at_2, range(6), 2) as results:
            list(results)
    assert multiprocessing.active_children() == []


def test_drain_cuts_in_order_and_lets_go():
    items = list(range(23))
    given = []
    for piece in parallel.drain(items, 5):
        given.append(piece)
        assert len(items) == 23 - 5 * len(given) or not items  # taken out as given
    assert [x for piece in given for x in piece] == list(range(23))
    assert list(map(len, given)) == [5, 5, 5, 5, 3]
    assert parallel.chunk_size(10_000, 2, 100) == 100
    assert parallel.chunk_size(24, 2, 100) == 3
    assert parallel.chunk_size(1, 8, 100) == 1


def test_labelled_ticks_first_last_and_spread():
    from paprof.render.sweep_charts import MAX_LABELS, labelled

    assert labelled([0.0, 1.0, 2.0], False) == [0, 1, 2]
    for positions, log_x in ((list(range(50)), False), (list(range(1, 51)), True),
                             ([2.0 ** k for k in range(20)], True)):
        kept = labelled(positions, log_x)
        assert kept[0] == 0 and kept[-1] == len(positions) - 1
        assert kept == sorted(set(kept)) and 3 <= len(kept) <= MAX_LABELS
        place = [math.log10(positions[i]) if log_x else positions[i] for i in kept]
        gaps = [b - a for a, b in zip(place, place[1:])]
        span = place[-1] - place[0]
        assert min(gaps) >= span / (MAX_LABELS - 1) / 2 - 1e-9


def test_ctrl_c_while_workers_read_ends_them(tmp_path):
    """SIGINT to paprof while its workers read: exit 130, one line, no worker left."""
    store = _store(tmp_path, copies=1)
    pids = tmp_path / "pids"
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)  # not ignored if the suite's runner was
        from paprof.model import load
        load.PARALLEL_RUNS, load.CHUNK_RUNS = 2, 2
        def stuck(task):
            with open({str(pids)!r}, "a") as out:
                out.write(f"{{os.getpid()}}\\n")
            try:  # the first worker to start presses Ctrl-C
                os.close(os.open({str(pids)!r} + ".first", os.O_CREAT | os.O_EXCL))
                os.kill(os.getppid(), signal.SIGINT)
            except FileExistsError:
                pass
            time.sleep(60)
            with open({str(pids)!r} + ".woke", "a") as out:  # the parent waited it out
                out.write(f"{{os.getpid()}}\\n")
        stuck.__module__, stuck.__qualname__ = load.__name__, "_load_chunk"
        load._load_chunk = stuck
        from paprof.entry import main
        sys.exit(main(sys.argv[1:]))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PAPROF_JOBS": "2"}
    done = subprocess.run([sys.executable, "-c", code, "table", str(store)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)
    assert (done.returncode, done.stderr) == (130, "paprof: interrupted\n"), done.stderr
    assert not Path(f"{pids}.woke").exists()  # ended, not waited for (60 s of sleep)
    workers = [int(p) for p in pids.read_text().split()]
    assert workers
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


WAKE_SCRIPT = r'''
import multiprocessing, os, signal, sys, threading, time
from paprof import parallel

def work(task):
    fifo, woke = task
    with open(fifo, "w") as busy:  # the parent's thread below waits for this
        busy.write(f"{os.getpid()}")
    time.sleep(60)
    with open(woke, "w"):  # the parent waited it out
        pass

def press(fifo):
    """Ctrl-C to this thread, not to the one that waits for the results."""
    with open(fifo) as busy:
        print(busy.read(), flush=True)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

if __name__ == "__main__":
    multiprocessing.set_start_method(sys.argv[1])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fifo, woke = sys.argv[2:]
    os.mkfifo(fifo)
    threading.Thread(target=press, args=(fifo,), daemon=True).start()
    try:  # one task for two workers: one busy, the other waiting for a task
        with parallel.ordered_map(work, [(fifo, woke)], 2) as results:
            list(results)
    except KeyboardInterrupt:
        print("interrupted", len(multiprocessing.active_children()), flush=True)
'''


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_ctrl_c_that_does_not_interrupt_the_wait_still_ends_the_workers(tmp_path, method):
    """A Ctrl-C handled by another thread does not interrupt the wait for the busy
    worker's result, and neither does one that comes just before that wait blocks (the
    race a loaded machine loses): the wait wakes all the same, and the workers are ended
    at once, the busy one too, not waited for."""
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    script, woke = tmp_path / "wake.py", tmp_path / "woke"
    script.write_text(WAKE_SCRIPT)
    done = subprocess.run([sys.executable, str(script), method, str(tmp_path / "busy"),
                           str(woke)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=240)
    worker, said = done.stdout.splitlines()
    assert (done.returncode, said, done.stderr) == (0, "interrupted 0", "")
    assert not woke.exists()  # ended, not waited for (60 s of sleep)
    with pytest.raises(ProcessLookupError):
        os.kill(int(worker), 0)


@pytest.mark.parametrize("jobs", [1, 2])
def test_loading_peaks_under_the_table_plus_two_reports(tmp_path, small_pool, jobs):
    """Issue 14's memory bound on a small store: the table, and at most twice the largest
    report besides (the numbers are not copied into pandas' block at the end)."""
    import tracemalloc

    store = _store(tmp_path)
    load.load_reports([store], jobs=jobs)  # caches, patterns: not the loading
    largest = max(p.stat().st_size for p in store.rglob("*.ncu-rep"))
    tracemalloc.start()
    try:
        df = load.load_reports([store], jobs=jobs)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(df) > 40
    assert peak - held < 2 * largest, (peak - held, largest)


def test_the_frame_is_made_on_the_block_not_a_copy(tmp_path, monkeypatch):
    import numpy as np

    blocks = []
    real = load._Columns.frame

    def frame(self, missing):
        blocks.append(self.block)
        return real(self, missing)

    monkeypatch.setattr(load._Columns, "frame", frame)
    df = load.load_reports([_store(tmp_path, copies=1)], jobs=1)
    for column in ("duration_us", "dram_bytes", "work_tbs"):
        assert np.shares_memory(df[column].to_numpy(), blocks[0])
    assert df["launch"].dtype == "int64" and df["rules"].dtype == object
