"""One sweep over several GPUs of one host: a worker process per GPU, then a merge.

``run_on_gpus`` starts ``python -m paprof sweep ARGS --shard I/N --runs
<runs>-shards/shard-I`` for the I-th of N GPUs, each with ``CUDA_VISIBLE_DEVICES`` set
to that GPU and the rest of the environment as it is (NCCL variables included; the
workers never talk to each other). Each worker's output goes to
``<runs>-shards/shard-I.log``. When all have ended, the shard stores are merged into
``<runs>`` (``paprof.sweep.merge``). The shard stores sit beside ``<runs>``, not inside
it, so that a store never holds a second copy of its own runs. Run again after an
interrupt: each worker resumes its own shard. Within a ``--shard K/N`` of a larger
matrix, GPU I of G runs shard ``K + (I-1)*N`` of ``N*G``: exactly shard K's points.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console

from paprof.errors import UsageError, UserError
from paprof.parallel import death_signal
from paprof.sweep import manifest as manifests
from paprof.sweep import merge


def parse_gpus(text: str | None) -> list[str]:
    """``"0,1,2,3"`` -> ``["0", "1", "2", "3"]`` (indices or GPU UUIDs); repeats refused."""
    ids = [s.strip() for s in (text or "").split(",")]
    if not text or not all(ids):
        raise UsageError(f"--gpus {text!r} is not a comma-separated list of GPU ids (e.g. 0,1,2,3)")
    if len(set(ids)) != len(ids):
        raise UsageError(f"--gpus {text}: a GPU is named twice")
    return ids


def shards_folder(runs) -> Path:
    runs = Path(runs)
    return runs.parent / f"{runs.resolve().name}-shards"


def child_shard(shard: tuple[int, int], i: int, n_gpus: int) -> tuple[int, int]:
    """The shard GPU ``i`` (1-based) of ``n_gpus`` runs within ``shard`` (K, N)."""
    k, n = shard
    return k + (i - 1) * n, n * n_gpus


@dataclass
class Worker:
    shard: tuple[int, int]
    gpu: str
    runs: Path
    log: Path
    process: object
    returncode: int | None = None


def spawn(argv: list[str], env: dict, log: Path):
    """Start one worker (the real spawner; tests pass their own). It gets SIGTERM when
    this process ends, even killed (Linux), and then stops as after Ctrl-C: its
    manifest saved, nothing half-written. Its log is appended to, never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(log, flags, 0o666)
    except OSError as err:
        raise UserError(f"cannot write the worker's log {log}: {err.strerror or err}") from None
    with os.fdopen(fd, "ab") as fh:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                preexec_fn=death_signal(signal.SIGTERM))


def _progress(workers: list[Worker], name: str | None) -> tuple[int, int]:
    """(variant-points settled, all) over the workers' manifests."""
    settled = total = 0
    for w in workers:
        file = manifests.path(w.runs, name) if name else None
        if file is None or not file.is_file():
            continue
        try:
            data = manifests.load(file)
        except UserError:  # being replaced right now
            continue
        counts = manifests.status_counts(data)
        total += sum(counts.values())
        settled += sum(counts.values()) - counts["pending"]
    return settled, total


def run_on_gpus(sweep_args: list[str], gpus: list[str], runs, *, shard: tuple[int, int] = (1, 1),
                name: str | None = None, spawner: Callable = spawn, console: Console | None = None,
                poll_s: float = 2.0) -> tuple[list[Worker], merge.MergeResult]:
    """Run a worker per GPU, wait for all, merge their stores into ``runs``.

    ``sweep_args``: the ``paprof sweep`` options without ``--runs``, ``--shard`` and
    ``--gpus``. ``name``: the sweep's manifest name (for the progress count).
    """
    console = console or Console(stderr=True)
    runs = Path(runs)
    folder = shards_folder(runs)
    folder.mkdir(parents=True, exist_ok=True)
    workers = []
    try:
        for i, gpu in enumerate(gpus, 1):
            k, n = child_shard(shard, i, len(gpus))
            store = folder / f"shard-{k}"
            log = folder / f"shard-{k}.log"
            argv = [sys.executable, "-m", "paprof", "sweep", *sweep_args, "--shard", f"{k}/{n}",
                    "--runs", str(store)]
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
            workers.append(Worker((k, n), gpu, store, log, spawner(argv, env, log)))
            console.print(f"paprof sweep: shard {k}/{n} on GPU {gpu} -> {store} (log {log})",
                          highlight=False, soft_wrap=True)
        _wait(workers, name, console, poll_s)
    except BaseException as err:
        if type(err) is not KeyboardInterrupt:  # (a Ctrl-C reached them too): SIGTERM, an error
            _stop(workers)
        raise
    stores = [w.runs for w in workers if w.runs.is_dir()]
    merged = merge.merge_stores(stores, runs) if stores else merge.MergeResult()
    return workers, merged


def _stop(workers: list[Worker]) -> None:
    """SIGTERM to each worker still running (it stops as after Ctrl-C), each waited for."""
    for w in workers:
        if w.returncode is None:
            try:
                w.process.terminate()
            except OSError:
                pass
    for w in workers:
        if w.returncode is None:
            try:
                w.returncode = w.process.wait()
            except OSError:
                pass


def _wait(workers: list[Worker], name: str | None, console: Console, poll_s: float) -> None:
    """Until every worker has ended, saying so and how far they got."""
    last = None
    while any(w.returncode is None for w in workers):
        for w in workers:
            if w.returncode is None:
                w.returncode = w.process.poll()
                if w.returncode is not None:
                    console.print(f"paprof sweep: shard {w.shard[0]}/{w.shard[1]} on GPU {w.gpu} "
                                  f"ended (exit {w.returncode})", highlight=False, soft_wrap=True)
        if any(w.returncode is None for w in workers):
            now = _progress(workers, name)
            if now != last and now[1]:
                console.print(f"paprof sweep: {now[0]} of {now[1]} variant-points settled",
                              highlight=False)
                last = now
            time.sleep(poll_s)
