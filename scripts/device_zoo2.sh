#!/usr/bin/env bash
# The zoo's cases with expected words (examples/zoo/expected.toml: case14..case23 of the
# `zoo` family, lib1..lib4 of `zoo_lib`) on the GPU machine, in ONE call. From the
# repository root:
#   bash scripts/device_zoo2.sh
# For each case: paprof run (default preset, ncu --clock-control none) of slow and fast at
# the pair's default shape into examples/zoo/runs, paprof compare (markdown in logs/, its
# first cause line checked against the case's regex), paprof bench (CUDA events). A
# failing case is logged and skipped. At the END: a table (case, slow us, fast us,
# verified, regex). CASES="case14 lib1" limits it to those cases; the thirteen original pairs
# (expected.toml too) run when named, e.g. CASES="uncoalesced fp64".
# Everything is logged to $OUT/zoo2.log and packed with the runs into ONE tar,
# $OUT/zoo2.tar.gz (split into 15 MiB parts .00, .01 ... if larger).
# Sized for well under 1 ms a kernel; estimate ~25 s a CUDA case, ~55 s a library case
# (14 cases: ~8 min). No step starts past DEADLINE (540 s) and each step's timeout ends
# by it, so the tar and the table are made inside the device tool's 10-minute limit;
# the cases skipped are logged (run them again with CASES=...).
set -u
OUT=${OUT:-/tmp/paprof-out}
ROOT=$PWD
LOGS=${ZOO_LOGS:-/tmp/zoo2-logs}
mkdir -p "$OUT" "$LOGS"
LOG=$OUT/zoo2.log
exec > >(tee -a "$LOG") 2>&1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
[ -n "$NCU" ] && export PATH="$(dirname "$NCU"):$PATH"
ALL_CASES="case14 case15 case16 case17 case18 case19 case20 case21 case22 case23 lib1 lib2 lib3 lib4"
CASES=${CASES:-$ALL_CASES}
PAPROF="python3 -m paprof"
t0=$(date +%s)

DEADLINE=${DEADLINE:-540}  # seconds from the start: past it no step starts, so the tar is always made
stamp() { echo; echo "=== $* ($(date -u +%H:%M:%S), +$(( $(date +%s) - t0 )) s)"; }
# cap N: N, or the seconds left to the deadline when fewer (at least 1: timeout 0 means none)
cap() { local left=$(( DEADLINE - ($(date +%s) - t0) )); [ "$left" -lt 1 ] && left=1; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
family() { case $1 in lib*) echo zoo_lib ;; *) echo zoo ;; esac; }

stamp "device_zoo2.sh: $CASES"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
echo "ncu: ${NCU:-none} $("${NCU:-ncu}" --version 2>/dev/null | tail -1)"
python3 -c "import cupy; print('cupy', cupy.__version__)" 2>&1 | tail -1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1
( cd examples/zoo && $PAPROF list --verbose > "$LOGS/zoo2-list.txt" 2>&1; echo "paprof list rc $?" )

for case in $CASES; do
  fam=$(family "$case")
  stamp "$case ($fam)"
  if [ "$(cap 30)" -lt 30 ]; then echo "$case: skipped, past the deadline (${DEADLINE} s)"; continue; fi
  start=$(date +%s)
  ( cd examples/zoo && timeout "$(cap 150)" $PAPROF run --family "$fam" --variant "${case}_slow" --variant "${case}_fast" \
      --shape "pair=$case" --runs runs --replace ) > "$LOGS/run-$case.log" 2>&1
  echo "run $case: rc $?, $(( $(date +%s) - start )) s"; tail -8 "$LOGS/run-$case.log"
  ( cd examples/zoo && timeout "$(cap 60)" $PAPROF compare "${case}_slow" "${case}_fast" --runs runs \
      --markdown "$LOGS/compare-$case.md" --out "$LOGS/compare-$case.html" --force ) > "$LOGS/compare-$case.log" 2>&1
  echo "compare $case: rc $?"; head -4 "$LOGS/compare-$case.log"
  ( cd examples/zoo && timeout "$(cap 90)" $PAPROF bench --family "$fam" --variant "${case}_slow" --variant "${case}_fast" \
      --shape "pair=$case" --json ) > "$LOGS/bench-$case.json" 2> "$LOGS/bench-$case.log"
  echo "bench $case: rc $?"; tail -3 "$LOGS/bench-$case.log"
done

stamp "pack"
cp "$LOG" "$LOGS/zoo2.log" 2>/dev/null
TAR="$OUT/zoo2.tar.gz"
paths=""
[ -d examples/zoo/runs ] && paths="examples/zoo/runs"
tar czf "$TAR" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" ${paths:+-C "$ROOT" $paths}; echo "tar rc $?"
if [ "$(stat -c %s "$TAR")" -gt $((15 * 1024 * 1024)) ]; then  # at most 16 MiB a file comes back
  split -b 15m -d "$TAR" "$TAR." && rm -f "$TAR"
fi
ls -la "$OUT"

stamp "summary (first cause line: the second line of paprof compare's output)"
python3 - "$LOGS" $CASES <<'EOF'
import json, re, sys, tomllib
from pathlib import Path
logs, cases = Path(sys.argv[1]), sys.argv[2:]
expected = {c["name"]: c for c in tomllib.loads(Path("examples/zoo/expected.toml").read_text())["case"]}
rows = []
for case in cases:
    try:
        data = json.loads((logs / f"bench-{case}.json").read_text())
        bench = {r["variant"]: r for r in data.get("rows", [])}
    except Exception:
        bench = {}
    slow, fast = bench.get(f"{case}_slow", {}), bench.get(f"{case}_fast", {})
    try:
        lines = (logs / f"compare-{case}.log").read_text().splitlines()
        first = lines[1].strip() if len(lines) > 1 else ""
    except OSError:
        first = ""
    match = bool(first) and bool(re.search(expected[case]["first_line"], first, re.I))
    s, f = slow.get("median_us"), fast.get("median_us")
    rows.append((case, s, f, f"{s / f:.2f}x" if s and f else "?",
                 slow.get("passed") is True and fast.get("passed") is True, match, first))
for r in rows:
    print(f"first line {r[0]}: {r[6][:400]}")
print()
print(f"{'case':8} {'slow us':>10} {'fast us':>10} {'ratio':>8} {'verified':>9} {'regex':>6}")
for case, s, f, ratio, ok, match, _ in rows:
    print(f"{case:8} {s if s is not None else '-':>10} {f if f is not None else '-':>10} {ratio:>8} {str(ok):>9} {str(match):>6}")
EOF
echo "done: +$(( $(date +%s) - t0 )) s"
