"""How fast paprof's loader turns Nsight Compute kernel results into table rows.

Two measurements, both printed with the share of time spent reading the report (the
fast reader of :mod:`paprof.read.ncu_fastread` decoding the file, or ``ncu_report``
opening it and materialising each result) versus paprof's own work (looking up the
catalogue metrics, rules, derived columns, bottleneck, the DataFrame):

1. one report holding ``--results`` kernel results, made in a temporary folder by
   repeating the kernel-result block of a shipped report (a report with many kernels,
   as ``ncu`` writes for a whole application);
2. the shipped reports (default ``examples/h200``, one or two kernels each), loaded
   over and over in one ``load_reports`` call through hard links, until ``--results``.

The target is 1,000 results within ``--budget`` seconds (2 s) on a 2-core machine; the
exit status is 1 when measurement 1 misses it.

    python benchmarks/bench_load.py [REPORT_OR_DIR ...] [--results 1000] [--budget 2.0]
                                    [--ncu-report]

``--ncu-report`` turns the fast reader off (``ncu_report`` reads every file), to compare.
Both are read in this process (``jobs=1``), so that the reading can be timed apart;
``bench_scale.py`` times the loading as commands do it (worker processes for large stores).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paprof.model import load
from paprof.read import ncu_fastread, ncu_reader  # noqa: E402
from paprof.errors import UserError  # noqa: E402


def repeat_results(source: Path, target: Path, count: int) -> int:
    """Write ``target``: ``source`` with its first kernel-result block repeated so that
    the report holds ``count`` results. Returns the number of results written."""
    data = source.read_bytes()
    header_len = struct.unpack_from("<I", data, 4)[0]
    pos = 8 + header_len
    blocks = []
    while pos < len(data):
        block_len = struct.unpack_from("<I", data, pos)[0]
        fields = ncu_fastread.varint_fields(data[pos + 4: pos + 4 + block_len])
        end = pos + 4 + block_len + fields.get(ncu_fastread.BLOCK_PAYLOAD, 0)
        blocks.append((fields.get(ncu_fastread.BLOCK_RESULTS, 0), data[pos:end]))
        pos = end
    results = [b for n, b in blocks if n == 1]
    if not results:
        raise UserError(f"{source}: no single-result block to repeat")
    out = [data[: 8 + header_len]]
    written = 0
    for n, block in blocks:
        if n == 0:
            out.append(block)
        elif block is results[0]:
            out.append(block * (count - len(results) + 1))
            written += count - len(results) + 1
        else:
            out.append(block)
            written += n
    target.write_bytes(b"".join(out))
    return written


class Timer:
    """Wraps ``load.open_report`` to add up the time spent reading reports (opening,
    and making or decoding each result)."""

    def __init__(self):
        self.seconds = 0.0
        self.real = load.open_report

    def __enter__(self):
        def timed(path):
            start = time.perf_counter()
            try:
                context, actions = self.real(path)
            finally:
                self.seconds += time.perf_counter() - start
            return context, self.each(actions)

        load.open_report = timed
        return self

    def each(self, actions):
        iterator = iter(actions)
        while True:
            start = time.perf_counter()
            try:
                action = next(iterator)
            except StopIteration:
                return
            finally:
                self.seconds += time.perf_counter() - start
            yield action

    def __exit__(self, *exc):
        load.open_report = self.real


def measure(label: str, paths: list[Path]) -> float:
    with Timer() as timer:
        start = time.perf_counter()
        df = load.load_reports(paths, jobs=1)  # in this process: the reading is timed here
        elapsed = time.perf_counter() - start
    n = len(df)
    print(f"{label}: {n} kernel results in {elapsed:.2f} s ({elapsed / n * 1e3:.2f} ms each)")
    reader = "fast reader" if ncu_reader.FAST_READER else "ncu_report"
    print(f"    reading ({reader}; open + each result): {timer.seconds:.2f} s "
          f"({timer.seconds / n * 1e3:.2f} ms each); paprof: {elapsed - timer.seconds:.2f} s "
          f"({(elapsed - timer.seconds) / n * 1e3:.2f} ms each)")
    return elapsed * 1000 / n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "examples" / "h200"])
    parser.add_argument("--results", type=int, default=1000,
                        help="kernel results per measurement (default 1000)")
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds allowed per 1,000 results (default 2.0)")
    parser.add_argument("--ncu-report", action="store_true",
                        help="read through ncu_report only (the fast reader off)")
    args = parser.parse_args(argv)
    if args.ncu_report:
        ncu_reader.FAST_READER = False

    try:
        reports = [report for report, _, _ in load._runs_of(load._found(args.paths))]
    except UserError as err:
        print(f"bench_load: {err}", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs; {len(reports)} shipped reports")
    load.load_reports(reports[:1])  # one-time start-up (imports), not per result

    with tempfile.TemporaryDirectory(prefix="paprof-bench-") as tmp:
        big = Path(tmp) / "many.ncu-rep"
        repeat_results(reports[0], big, args.results)
        per_thousand = measure(f"1 report x {args.results} results", [big])

        links, counted = [], 0
        folder = Path(tmp) / "links"
        folder.mkdir()
        while counted < args.results:
            for report in reports:
                link = folder / f"{len(links)}.ncu-rep"
                try:
                    os.link(report, link)
                except OSError:
                    link.write_bytes(report.read_bytes())
                links.append(link)
                counted += 2 if "v4" in report.parts else 1
                if counted >= args.results:
                    break
        measure(f"{len(links)} shipped reports", links)

    print(f"1,000 results in one report: {per_thousand:.2f} s (budget {args.budget:g} s)")
    return 0 if per_thousand <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
