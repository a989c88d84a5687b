"""paprof at the scale a sweep makes (issue 14): every target, each a fresh process.

    python3 benchmarks/bench_scale.py [--dest DIR] [--runs 10000] [--repeat 3] [--json]
                                      [--only NAME ...] [--many 1000] [--slack 1]
                                      [--no-warm]

Builds (in ``--dest``, reused when it is there; else a temporary folder) a store of
``--runs`` runs (``make_big_store.py``: stored as ``paprof run`` stores them, each with its
report's parsed summary; and the same store without summaries, as made before paprof
wrote them), a profiled sweep of as many runs
(``make_big_sweep.py``: needs the kernel lab's paged_decode) and a report of ``--many``
copies of one result (1,000: 155 MB, the reader's memory case), then times each command
as a user runs it, ``--repeat`` times after one warm-up run, and prints the minimum,
median and maximum wall time, the median CPU time (user + system of the process and the
workers it waited for, from ``wait4``: steadier than the wall time on a shared machine),
the load average while it ran, and the peak memory (the child's own maximum resident set)
against its budget (for 10,000 runs; at fewer, scaled down with the runs
but never below half, the commands' start-up and charts being most of it):

- ``paprof --help``, ``paprof list``: 0.25 s (not scaled);
- ``paprof compare`` of two of the store's variants, ``baseline update`` and ``check`` on
  the whole store, ``sweep-report`` of the sweep: 10 s;
- loading the store's kernel results (``load_reports``, timed inside the process, after
  the imports; worker processes read the runs unless ``PAPROF_JOBS=1``): 4 s; and,
  traced (``tracemalloc``, a second pass), the peak memory under the table it makes (all
  that is still held after) plus twice the largest report; the largest worker's
  resident peak is printed beside it; the same of the store without summaries (every
  report read), without a budget;
- ``baseline update`` and ``check``, each within 3x the process that loads the store
  (``RATIO``: the gate costs about what reading the runs costs);
- the fast reader on the ``--many``-result report: its peak over the process before
  reading under four messages plus the results it returns (the file is never held whole).

``--slack F`` multiplies every time budget by F (the CI test runs a tiny store with room
for a loaded machine). Exit 1 when a median is over its budget or a memory bound is not
met.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # make_big_store, make_big_sweep

SHAPE = "b64_ctx4096_h32x8_d128_p16_fp32"
FULL = 10_000
"""The runs the budgets are set for."""
RATIO = 3.0
"""``baseline update`` and ``check`` within this many times the loading process."""

LOAD = """
import json, sys, time
from paprof.model.load import load_reports
load_reports([sys.argv[2]])  # imports done, patterns compiled: not the loading
start = time.perf_counter()
df = load_reports([sys.argv[1]])
seconds = time.perf_counter() - start
held = peak = None
if sys.argv[3] == "memory":  # a second pass, traced (tracemalloc slows it): the memory
    import tracemalloc
    del df
    tracemalloc.start()
    df = load_reports([sys.argv[1]])
    held, peak = tracemalloc.get_traced_memory()
import resource  # the largest worker's resident set (the pool's, when there was one)
workers_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "rows": len(df), "held": held, "peak": peak,
                  "workers_maxrss_kb": workers_kb}))
"""

READ = """
import json, resource, sys
from paprof.read import ncu_fastread, ncu_reader
numeric, text = ncu_reader.catalogue_metrics()
ncu_fastread.read_report(sys.argv[2], numeric, text)  # compile the patterns, fill caches
reads = []
class Handle:
    def __init__(self, path, mode):
        self.file = open(path, mode)
    def read(self, size=-1):
        data = self.file.read(size)
        reads.append(len(data))
        return data
    def __getattr__(self, name):
        return getattr(self.file, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.file.close()
ncu_fastread.open = Handle
import tracemalloc
tracemalloc.start()
results = ncu_fastread.read_report(sys.argv[1], numeric, text)
held, peak = tracemalloc.get_traced_memory()
print(json.dumps({"results": len(results), "held": held, "peak": peak, "largest_read": max(reads),
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(argv: list[str], cwd: Path) -> tuple[float, int, str]:
    """(wall seconds, peak resident KB, stdout) of one fresh process; its CPU seconds
    (its own and its workers') in ``CPU``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=_env(), stdout=out,
                                 stderr=err)
        _pid, status, usage = os.wait4(child.pid, 0)  # reaped here: its own rusage
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        text, said = out.read().decode(), err.read().decode()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({child.returncode}): {said[-2000:]}")
    CPU.append(usage.ru_utime + usage.ru_stime)  # Linux counts the children it reaped
    return seconds, usage.ru_maxrss, text


CPU: list[float] = []
"""The CPU seconds of each process ``run`` ran, in turn."""


def build(dest: Path, runs: int, many: int = 1000) -> dict:
    """The stores and reports under ``dest`` (made once, in a child process: this one
    stays small, since a child's peak memory counts the parent's at the fork)."""
    paths = {"store": dest / "store", "bare": dest / "store-bare", "sweep": dest / "sweep",
             "many": dest / "many.ncu-rep", "one": dest / "one.ncu-rep", "out": dest / "out"}
    if not all(paths[k].exists() for k in ("store", "bare", "sweep", "many", "one")):
        run([sys.executable, __file__, "--build", dest, "--runs", runs, "--many", many], ROOT)
    paths["out"].mkdir(exist_ok=True)
    return paths


def _build(dest: Path, runs: int, many: int) -> None:
    import make_big_store
    import make_big_sweep

    source = make_big_store.SOURCE.with_suffix(".ncu-rep")
    if not (dest / "store").is_dir():
        make_big_store.make(dest / "store", runs)
    if not (dest / "store-bare").is_dir():
        make_big_store.make(dest / "store-bare", runs, summaries=False)
    if not (dest / "sweep").is_dir():
        make_big_sweep.make(dest / "sweep", runs // 2)
    if not (dest / "many.ncu-rep").is_file():
        _many_results(source, dest / "many.ncu-rep", many)
    if not (dest / "one.ncu-rep").exists():
        os.link(source, dest / "one.ncu-rep")


def _many_results(source: Path, target: Path, count: int) -> None:
    """``source`` with its result block repeated ``count`` times, the copies without a
    string table (their ids index the first block's, as ncu writes many kernels)."""
    import struct

    from paprof.read import ncu_fastread

    data = source.read_bytes()
    header_len = struct.unpack_from("<I", data, 4)[0]
    pos, out = 8 + header_len, [data[: 8 + header_len]]
    while pos < len(data):
        block_len = struct.unpack_from("<I", data, pos)[0]
        head = data[pos + 4: pos + 4 + block_len]
        counts, table = ncu_fastread._block_header(head)
        end = pos + 4 + block_len + counts[ncu_fastread._B_PAYLOAD]
        out.append(data[pos:end])
        if counts[ncu_fastread._B_RESULTS]:
            bare = head.replace(_string_field(table), b"") if table else head
            copy = struct.pack("<I", len(bare)) + bare + data[pos + 4 + block_len: end]
            out.append(copy * (count - 1))
        pos = end
    target.write_bytes(b"".join(out))


def _string_field(table: bytes) -> bytes:
    """The block header's field 4 (the string table) as serialised."""
    length, value = len(table), bytearray()
    while True:
        value.append((length & 0x7F) | (0x80 if length > 0x7F else 0))
        length >>= 7
        if not length:
            return b"\x22" + bytes(value) + table


def cases(paths: dict, runs: int = FULL, many: int = 1000,
          slack: float = 1.0) -> list[tuple[str, list, float]]:
    """(name, argv, budget in seconds) of each case, the budgets scaled to ``runs``."""
    py, cli = sys.executable, [sys.executable, "-m", "paprof.cli"]
    out = paths["out"]
    scaled = max(runs / FULL, 0.5) * slack  # a command's start-up and charts cost the same
    return [
        ("paprof --help", cli + ["--help"], 0.25 * slack),
        ("paprof list", cli + ["list"], 0.25 * slack),
        (f"compare 2 of {runs:,} runs", cli + ["compare", "v0", "v1", "--runs", paths["store"],
                                               "--shape", SHAPE, "--out", out / "c.html"],
         10.0 * scaled),
        (f"baseline update, {runs:,} runs", cli + ["baseline", "update", "--runs",
                                                   paths["store"], "--out", out / "base.json",
                                                   "--force"], 10.0 * scaled),
        (f"check, {runs:,} runs", cli + ["check", "--baseline", out / "base.json",
                                         "--runs", paths["store"]], 10.0 * scaled),
        (f"sweep-report, {runs:,} runs", cli + ["sweep-report", "--runs", paths["sweep"],
                                                "--out", out / "s.html", "--force"],
         10.0 * scaled),
        (f"load {runs:,} results", [py, "-c", LOAD, paths["store"], paths["one"], "time"],
         4.0 * scaled),
        (f"load {runs:,} results, no summaries",
         [py, "-c", LOAD, paths["bare"], paths["one"], "time"], None),
        (f"fast reader, {many:,} results", [py, "-c", READ, paths["many"], paths["one"]], None),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, help="where the stores are made (kept); default a "
                    "temporary folder")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="cases whose name starts with one of these")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--many", type=int, default=1000,
                    help="results in the fast reader's report (default 1000)")
    ap.add_argument("--slack", type=float, default=1.0,
                    help="multiply every time budget by this (default 1)")
    ap.add_argument("--no-warm", action="store_true",
                    help="no warm-up run before the timed ones (a quick check that it runs)")
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build:
        sys.path.insert(0, str(ROOT))
        _build(args.build, args.runs, args.many)
        return 0
    with tempfile.TemporaryDirectory(prefix="paprof-scale-") as tmp:
        dest = args.dest or Path(tmp)
        dest.mkdir(parents=True, exist_ok=True)
        paths = build(dest, args.runs, args.many)
        results, failed = [], False
        every = cases(paths, args.runs, args.many, args.slack)
        for name, argv_, budget in every:
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            if name.startswith("check") and not (paths["out"] / "base.json").is_file():
                run(every[3][1], ROOT)  # check needs the baseline
            if not args.no_warm:
                run(argv_, ROOT)  # warm: the file cache, .pyc files
            walls, peaks, outs, cpus, loads = [], [], [], [], []
            for _ in range(args.repeat):
                wall, peak, out = run(argv_, ROOT)
                walls.append(wall), peaks.append(peak), outs.append(out)
                cpus.append(CPU[-1]), loads.append(os.getloadavg()[0])
            row = {"case": name, "budget_s": budget, "min_s": round(min(walls), 3),
                   "median_s": round(statistics.median(walls), 3),
                   "max_s": round(max(walls), 3), "peak_mb": round(max(peaks) / 1024, 1),
                   "cpu_median_s": round(statistics.median(cpus), 3),
                   "load_average": [round(min(loads), 1), round(max(loads), 1)]}
            if name.startswith("load"):
                seconds = [json.loads(o)["seconds"] for o in outs]
                traced = json.loads(run(argv_[:-1] + ["memory"], ROOT)[2])
                largest = max(p.stat().st_size for p in paths["store"].rglob("*.ncu-rep"))
                over = traced["peak"] - traced["held"]  # held: the table (and caches)
                workers = max(json.loads(o)["workers_maxrss_kb"] for o in outs)
                row.update(workers_peak_mb=round(workers / 1024, 1))
                row.update(in_process_median_s=round(statistics.median(seconds), 3),
                           in_process_min_s=round(min(seconds), 3),
                           in_process_max_s=round(max(seconds), 3), rows=traced["rows"],
                           table_mb=round(traced["held"] / 2**20, 1),
                           over_table_mb=round(over / 2**20, 2),
                           largest_report_mb=round(largest / 2**20, 2),
                           memory_ok=over < 2 * largest)
                failed |= not row["memory_ok"]
            if name.startswith("fast reader"):
                inner = json.loads(outs[0])
                size, message = paths["many"].stat().st_size, inner["largest_read"]
                row.update(file_mb=round(size / 2**20, 1), message_kb=round(message / 1024),
                           held_mb=round(inner["held"] / 2**20, 2),
                           transient_kb=round((inner["peak"] - inner["held"]) / 1024),
                           memory_ok=inner["peak"] - inner["held"] < 4 * message)
                failed |= not row["memory_ok"]
            timed = row.get("in_process_median_s", row["median_s"])  # load: the loading
            if budget is not None and timed > budget:
                failed = True
                row["over_budget"] = True
            results.append(row)
            if not args.json:
                print(_line(row), flush=True)
        for row in _ratios(results):
            failed |= row["over_budget"]
            results.append(row)
            if not args.json:
                print(f"{row['case']:<30} {row['ratio']:.2f}x the loading process "
                      f"(budget {RATIO:g}x): {'OVER' if row['over_budget'] else 'ok'}",
                      flush=True)
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "repeat": args.repeat, "results": results},
                         indent=2))
    return 1 if failed else 0


def _ratios(results: list[dict]) -> list[dict]:
    """``baseline update`` and ``check`` against the process that loads the store (both
    medians of whole processes), where both were timed."""
    load = next((r for r in results if r["case"].startswith("load")
                 and r["budget_s"] is not None), None)  # not the store without summaries
    if load is None:
        return []
    out = []
    for r in results:
        if r["case"].startswith(("baseline update", "check")):
            ratio = r["median_s"] / load["median_s"]
            out.append({"case": f"{r['case'].split(',')[0]} / load", "ratio": round(ratio, 2),
                        "budget_ratio": RATIO, "over_budget": ratio > RATIO})
    return out


def _line(row: dict) -> str:
    low, high = row["load_average"]
    text = (f"{row['case']:<30} median {row['median_s']:.2f} s (min {row['min_s']:.2f}, "
            f"max {row['max_s']:.2f}), CPU {row['cpu_median_s']:.2f} s, load average "
            f"{low:g}-{high:g}, peak {row['peak_mb']:.0f} MB")
    if row.get("budget_s") is not None:
        what = "the loading's " if "in_process_median_s" in row else ""
        text += (f"; {what}budget {row['budget_s']:g} s: "
                 f"{'OVER' if row.get('over_budget') else 'ok'}")
    if "over_table_mb" in row:
        text += (f"; the loading in process {row['in_process_median_s']:.2f} s (min "
                 f"{row['in_process_min_s']:.2f}, max {row['in_process_max_s']:.2f}), "
                 f"{row['rows']} rows; peak (traced) "
                 f"{row['over_table_mb']} MB over the {row['table_mb']} MB table, bound twice "
                 f"the largest report, {2 * row['largest_report_mb']:.2f} MB: "
                 f"{'ok' if row['memory_ok'] else 'OVER'}; the largest worker's peak "
                 f"{row['workers_peak_mb']:.0f} MB resident")
    if "transient_kb" in row:
        text += (f"; {row['file_mb']} MB file: results {row['held_mb']} MB, reading "
                 f"+{row['transient_kb']} KB over them (largest message {row['message_kb']} "
                 f"KB: {'ok' if row['memory_ok'] else 'OVER'})")
    return text


if __name__ == "__main__":
    sys.exit(main())
