"""How long ``paprof compare`` takes, as a user runs it: a fresh process each time.

    python benchmarks/bench_compare.py [--runs examples/h200] [--repeat 5] [--json]
                                       [--slack 1] [--no-warm]

Times ``paprof compare v2 v3`` and ``paprof compare <every shipped variant>`` end to end
(interpreter start, imports, loading the .ncu-rep files, charts, HTML and Markdown) and
checks them against the budgets (3 s and 6 s on the 2-core machine). Then one in-process
run of each prints where the time goes (``write_report``'s stage timings). Exit 1 when a
median is over its budget (``--slack F`` multiplies the budgets by F: the CI test's room
for a loaded machine).
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
ALL = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"]
CASES = (("2 variants", ["v2", "v3"], 3.0), ("all shipped variants", ALL, 6.0))


def _cli(variants: list[str], runs: Path, out: Path) -> float:
    argv = [sys.executable, "-m", "paprof.cli", "compare", *variants, "--runs", str(runs),
            "--out", str(out / "r.html"), "--markdown", str(out / "r.md")]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=env)
    return time.perf_counter() - start


def _stages(variants: list[str], runs: Path, out: Path) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from paprof.api import write_report

    result = write_report(variants, runs=runs, out=out / "s.html", markdown=out / "s.md")
    return {k: round(v, 3) for k, v in result.timings.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=ROOT / "examples" / "h200")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--slack", type=float, default=1.0,
                    help="multiply the budgets by this (default 1)")
    ap.add_argument("--no-warm", action="store_true", help="no warm-up run first")
    args = ap.parse_args(argv)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if not args.no_warm:
            _cli(["v2", "v3"], args.runs, out)  # warm the OS file cache and .pyc files once
        for name, variants, budget in CASES:
            budget *= args.slack
            times = [_cli(variants, args.runs, out) for _ in range(args.repeat)]
            results.append({
                "case": name, "variants": len(variants), "budget_s": budget,
                "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
                "max_s": round(max(times), 3), "repeat": len(times),
                "stages_in_process_s": _stages(variants, args.runs, out),
            })
    over = [r for r in results if r["median_s"] > r["budget_s"]]
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2))
    else:
        print(f"paprof compare, fresh process each run, {os.cpu_count()} CPUs, {args.repeat} runs")
        for r in results:
            verdict = "OK" if r not in over else "OVER BUDGET"
            print(f"  {r['case']:<22} median {r['median_s']:.2f} s (min {r['min_s']:.2f}, "
                  f"max {r['max_s']:.2f}); budget {r['budget_s']:.0f} s: {verdict}")
            print(f"    in process: {r['stages_in_process_s']}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
