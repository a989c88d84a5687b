#!/usr/bin/env bash
# The ground-truth zoo (examples/zoo) and the MLP whole program (examples/mlp) on the GPU
# machine. Run from the repository root:
#   bash scripts/device_zoo.sh [STAGE ...]        (default: runs bench mlp)
# Stages:
#   runs    every zoo pair under ncu (paprof run, default preset, --clock-control none),
#           slow and fast at the pair's default shape (--shape pair=NAME), into
#           examples/zoo/runs; then paprof compare of each pair (markdown in logs/)
#   bench   paprof bench of each pair (CUDA events, no profiler) -> logs/bench-PAIR.json/.log
#   mlp     examples/mlp: paprof run --cmd of eager and compiled (NVTX range "step") into
#           examples/mlp/runs, paprof compare eager compiled, and mlp.py both (the
#           CUDA-event-timed eager/compiled ratio) -> logs/mlp-*
# Measured on the H200 (2026-12-02): bench 41 s, runs 282 s + compare 38 s (launch_overhead's
# 32 kernels take 59 s of it); `bench runs` in one device call took 371 s. Run mlp in a call
# of its own (torch.compile, two programs under ncu, the timed ratio: a few minutes).
# PAIRS="a b" limits the zoo stages to those pairs.
# Everything is logged to $OUT/zoo.log; what the stages produce (run stores, logs) is packed
# into ONE tar, $OUT/zoo-<stages>.tar.gz (split into 15 MiB parts .00, .01 ... if larger). A failing variant or stage is logged and skipped.
set -u
OUT=${OUT:-/tmp/paprof-out}
ROOT=$PWD
LOGS=${ZOO_LOGS:-/tmp/zoo-logs}
mkdir -p "$OUT" "$LOGS"
LOG=$OUT/zoo.log
exec > >(tee -a "$LOG") 2>&1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# the copy of the tree on the GPU machine has no .git: name the commit for the sidecars
# (before the call: git rev-parse --short HEAD > .paprof-commit, and carry that file)
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
[ -n "$NCU" ] && export PATH="$(dirname "$NCU"):$PATH"
STAGES=${*:-runs bench mlp}
ALL_PAIRS="uncoalesced vector_loads occupancy_shared_mem partial_wave bank_conflicts barrier divergence dependent_chain l2_resident atomics spills launch_overhead fp64"
PAIRS=${PAIRS:-$ALL_PAIRS}
PAPROF="python3 -m paprof"
t0=$(date +%s)

stamp() { echo; echo "=== $* ($(date -u +%H:%M:%S), +$(( $(date +%s) - t0 )) s)"; }

stamp "device_zoo.sh $STAGES"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
echo "ncu: ${NCU:-none} $("${NCU:-ncu}" --version 2>/dev/null | tail -1)"
python3 -c "import cupy; print('cupy', cupy.__version__)" 2>&1 | tail -1
python3 -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1

for stage in $STAGES; do
  case $stage in
  runs)
    stamp "zoo runs: $PAIRS"
    ( cd examples/zoo && $PAPROF list --family zoo > "$LOGS/zoo-list.txt" 2>&1; echo "paprof list rc $?" )
    for pair in $PAIRS; do
      start=$(date +%s)
      ( cd examples/zoo && timeout 240 $PAPROF run --family zoo --variant "${pair}_slow" --variant "${pair}_fast" \
          --shape "pair=$pair" --runs runs --replace ) > "$LOGS/run-$pair.log" 2>&1
      rc=$?
      tail -12 "$LOGS/run-$pair.log"
      echo "run $pair: rc $rc, $(( $(date +%s) - start )) s"
    done
    stamp "zoo compare"
    for pair in $PAIRS; do
      ( cd examples/zoo && timeout 60 $PAPROF compare "${pair}_slow" "${pair}_fast" --runs runs \
          --markdown "$LOGS/compare-$pair.md" --out "$LOGS/compare-$pair.html" --force ) > "$LOGS/compare-$pair.log" 2>&1
      echo "compare $pair: rc $?"
      head -c 1500 "$LOGS/compare-$pair.md" 2>/dev/null; echo
    done
    ;;
  bench)
    stamp "zoo bench: $PAIRS"
    for pair in $PAIRS; do
      ( cd examples/zoo && timeout 120 $PAPROF bench --family zoo --variant "${pair}_slow" --variant "${pair}_fast" \
          --shape "pair=$pair" --json ) > "$LOGS/bench-$pair.json" 2> "$LOGS/bench-$pair.log"
      rc=$?
      python3 - "$LOGS/bench-$pair.json" "$pair" "$rc" <<'EOF'
import json, sys
path, pair, rc = sys.argv[1:]
try:
    data = json.load(open(path))
except Exception as err:  # bench failed before printing JSON
    print(f"bench {pair}: rc {rc}, no JSON ({type(err).__name__})")
    sys.exit(0)
rows = {r["variant"]: r for r in data.get("rows", [])}
def cell(vid):
    r = rows.get(vid) or {}
    return r.get("median_us"), r.get("rel_error"), r.get("passed")
(s, es, ps), (f, ef, pf) = cell(f"{pair}_slow"), cell(f"{pair}_fast")
ratio = f"{s / f:.2f}x" if s and f else "?"
print(f"bench {pair}: rc {rc}, slow {s} us (ok {ps}, {es}), fast {f} us (ok {pf}, {ef}), slow/fast {ratio}")
EOF
    done
    ;;
  mlp)
    stamp "mlp"
    ( cd examples/mlp &&
      for mode in eager compiled; do
        start=$(date +%s)
        timeout 300 $PAPROF run --cmd "python3 mlp.py $mode --timing-iters 0" --nvtx-range step --name "$mode" \
          --runs runs --replace > "$LOGS/mlp-run-$mode.log" 2>&1
        echo "mlp run $mode: rc $?, $(( $(date +%s) - start )) s"; tail -8 "$LOGS/mlp-run-$mode.log"
      done
      timeout 60 $PAPROF compare eager compiled --runs runs --markdown "$LOGS/mlp-compare.md" \
        --out "$LOGS/mlp-compare.html" --force > "$LOGS/mlp-compare.log" 2>&1
      echo "mlp compare: rc $?"; head -c 2000 "$LOGS/mlp-compare.md" 2>/dev/null; echo
      timeout 300 python3 mlp.py both --timing-iters 20 --json "$LOGS/mlp-times.json" > "$LOGS/mlp-times.log" 2>&1
      echo "mlp both: rc $?"; tail -4 "$LOGS/mlp-times.log" )
    ;;
  *)
    echo "unknown stage $stage (runs, bench, mlp)"
    ;;
  esac
done

stamp "pack"
cp "$LOG" "$LOGS/zoo.log" 2>/dev/null
TAR="$OUT/zoo-$(echo $STAGES | tr ' ' '-').tar.gz"
paths=""
[ -d examples/zoo/runs ] && paths="$paths examples/zoo/runs"
[ -d examples/mlp/runs ] && paths="$paths examples/mlp/runs"
tar czf "$TAR" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" ${paths:+-C "$ROOT" $paths}; echo "tar rc $?"; ls -la "$TAR"
# at most 16 MiB a file comes back: split a larger tar (cat zoo-*.tar.gz.* | tar xz)
if [ "$(stat -c %s "$TAR")" -gt $((15 * 1024 * 1024)) ]; then
  split -b 15m -d "$TAR" "$TAR." && rm -f "$TAR" && ls -la "$TAR".*
fi
echo "done: +$(( $(date +%s) - t0 )) s"
