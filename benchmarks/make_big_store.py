"""A run store of N runs for timing paprof at the scale a sweep makes.

    python3 benchmarks/make_big_store.py DEST [--runs 10000] [--no-summaries]

Each run is a hard link to one shipped H200 report (v5 fp32, one kernel) with its own
sidecar naming a distinct variant and shape, so the store is N real runs on disk for the
price of one report. Each run is stored as ``paprof run`` stores one: the sidecar records
its report's size, and the report's parsed summary is written beside it by paprof's own
writer (``paprof.read.summary.write``; made once, the runs sharing one report).
``--no-summaries`` leaves them out: a store made before paprof wrote them. Times are
whole-process, e.g. ``/usr/bin/time -v paprof compare v0 v1 --runs DEST``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "examples" / "h200" / "nvidia-h200" /
          "paged_decode" / "v5" / "b64_ctx4096_h32x8_d128_p16_fp32")


def make(dest: Path, runs: int, variants: int = 32, summaries: bool = True) -> Path:
    sys.path.insert(0, str(ROOT))
    from paprof.read import store, summary

    side = json.loads(SOURCE.with_suffix(".json").read_text())
    report = SOURCE.with_suffix(".ncu-rep")
    side[store.REPORT_BYTES] = report.stat().st_size
    made = None
    for i in range(runs):
        variant, point = f"v{i % variants}", i // variants
        slug = f"b64_ctx{4096 + 16 * point}_h32x8_d128_p16_fp32"
        paths = store.run_paths(dest, "nvidia-h200", "paged_decode", variant, slug)
        paths.folder.mkdir(parents=True, exist_ok=True)
        if not paths.report.exists():
            os.link(report, paths.report)
        side.update(variant=variant, shape_slug=slug, report=paths.report.name,
                    shape=f"batch=64,context={4096 + 16 * point}")
        store.write_sidecar(paths.sidecar, side)
        if summaries:
            made = made or summary.make(paths.report)  # the same report: read once
            if not summary.write(paths.report, dest, made):
                raise SystemExit(f"no summary written for {paths.report}")
    return dest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--no-summaries", action="store_true",
                        help="store no summaries (a store made before paprof wrote them)")
    args = parser.parse_args()
    print(make(args.dest, args.runs, summaries=not args.no_summaries))
