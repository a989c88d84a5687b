"""A profiled sweep of N variant-points in a run store, for timing ``paprof sweep-report``
at the scale a sweep makes.

    python3 benchmarks/make_big_sweep.py DEST [--points 5000] [--batches 50] [--no-summaries]

The sweep is paged_decode v5 and v6, fp16, over BATCHES batch sizes (1, 2, ...) and
POINTS / BATCHES context lengths (4096, 4112, ...): 2 x POINTS runs. Each run is a hard link to the shipped H200 report of
its variant (``examples/sweeps/h200-profile``, batch 1, context 4096) with its own sidecar
naming the point's shape and its report's parsed summary, written by paprof's own
writer as ``paprof sweep`` stores a run (``paprof.read.summary``; ``--no-summaries``: a
sweep made before), and the manifest is the one ``paprof sweep`` writes (every point
done), so the store is read as a real sweep of that size is, for the price of two
reports. Times are whole-process, e.g.
``/usr/bin/time -v paprof sweep-report --runs DEST --out sweep.html``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "sweeps" / "h200-profile" / "nvidia-h200" / "paged_decode"
SLUG = "b1_ctx4096_h32x8_d128_p16_fp16"
VARIANTS = ("v5", "v6")


def make(dest: Path, points: int, batches: int = 50, summaries: bool = True) -> Path:
    sys.path.insert(0, str(ROOT))
    from paprof import registry
    from paprof.read import store, summary
    from paprof.sweep import grid as grids
    from paprof.sweep import manifest as manifests

    family = registry.family("paged_decode")
    batch = ",".join(str(1 + i) for i in range(batches))
    contexts = ",".join(str(4096 + 16 * i) for i in range(max(1, points // batches)))
    grid = grids.make_grid(family.params, [f"batch={batch}", f"context={contexts}"],
                           "dtype=fp16")
    defn = manifests.definition(family.name, VARIANTS, grid, "profile")
    data = manifests.new(manifests.default_name(defn), defn, grid, (1, 1))
    sidecars = {v: json.loads((SOURCE / v / f"{SLUG}.json").read_text()) for v in VARIANTS}
    for vid in VARIANTS:
        sidecars[vid][store.REPORT_BYTES] = (SOURCE / vid / f"{SLUG}.ncu-rep").stat().st_size
    made: dict = {}
    for point, entry in zip(grid.points, data["points"]):
        for vid in VARIANTS:
            folder = dest / "nvidia-h200" / "paged_decode" / vid
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{point.slug}.ncu-rep"
            if not target.exists():
                os.link(SOURCE / vid / f"{SLUG}.ncu-rep", target)
            side = dict(sidecars[vid], shape=point.spec, shape_slug=point.slug,
                        params=point.params.to_dict(), report=target.name)
            (folder / f"{point.slug}.json").write_text(json.dumps(side))
            if summaries:
                made[vid] = made.get(vid) or summary.make(target)  # one report each: read once
                if not summary.write(target, dest, made[vid]):
                    raise SystemExit(f"no summary written for {target}")
            entry["variants"][vid] = {"status": "done", "reason": None,
                                      "result": str(target.relative_to(dest)),
                                      "resumed": False}
    data["gpus"] = ["nvidia-h200"]
    manifests.save(dest, data)
    return dest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--points", type=int, default=5000,
                        help="grid points (each run for v5 and v6; default 5000)")
    parser.add_argument("--batches", type=int, default=50,
                        help="batch sizes, the first axis (default 50; the charts have a "
                             "tick per value of their axis)")
    parser.add_argument("--no-summaries", action="store_true",
                        help="store no summaries (a sweep made before paprof wrote them)")
    args = parser.parse_args()
    print(make(args.dest, args.points, args.batches, summaries=not args.no_summaries))
