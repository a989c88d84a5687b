"""A run store of N runs for timing paprof at the scale a sweep makes.

    python3 benchmarks/make_big_store.py DEST [--runs 10000]

Each run is a hard link to one shipped H200 report (v5 fp32, one kernel) with its own
schema-1 sidecar naming a distinct variant and shape, so the store is N real runs on
disk for the price of one report. Times are whole-process, e.g.
``/usr/bin/time -v paprof compare v0 v1 --runs DEST``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

SOURCE = (Path(__file__).resolve().parents[1] / "examples" / "h200" / "nvidia-h200" /
          "paged_decode" / "v5" / "b64_ctx4096_h32x8_d128_p16_fp32")


def make(dest: Path, runs: int, variants: int = 32) -> Path:
    side = json.loads(SOURCE.with_suffix(".json").read_text())
    report = SOURCE.with_suffix(".ncu-rep")
    for i in range(runs):
        variant, point = f"v{i % variants}", i // variants
        slug = f"b64_ctx{4096 + 16 * point}_h32x8_d128_p16_fp32"
        folder = dest / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{slug}.ncu-rep"
        if not target.exists():
            os.link(report, target)
        side.update(variant=variant, shape_slug=slug, report=target.name,
                    shape=f"batch=64,context={4096 + 16 * point}")
        (folder / f"{slug}.json").write_text(json.dumps(side))
    return dest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    print(make(args.dest, args.runs))
