#!/usr/bin/env bash
# Why a program's timing pass is slow (issue 40, point 3): on the H100 the timing pass of
# the compiled 8-layer GPT step (examples/programs/gpt_block.py) took 65 s for 309
# launches, eager's 10 s for 262, while a pass of the full pass costs the same on both.
# Times the program alone, then its timing pass (ncu, duration and launch shape only)
# four ways: as paprof runs it (kernel replay), --replay-mode application, --cache-control
# none, --target-processes application-only; then the eager step by its top kernels with
# --preset lean (passes a launch, seconds). Run on the GPU machine from the repository
# root:  bash scripts/device_timing_probe.sh   (-> $OUT/timing-probe.tar.gz, summary in
# times.txt). MODE (default compiled), GPT_ARGS (default "--layers 8 --steps 1"), LIMIT
# (s a step, default 90) and BUDGET (s, default 420) bound it.
set -u
OUT=${OUT:-/tmp/paprof-out}
P=$OUT/timing-probe
mkdir -p "$P"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
PROG="python3 $PWD/examples/programs/gpt_block.py"
MODE=${MODE:-compiled}
G="--timing-iters 0 ${GPT_ARGS:---layers 8 --steps 1}"
M="--metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --clock-control none --nvtx --nvtx-include step/"
BUDGET=${BUDGET:-420}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$P/times.txt"

# timed NAME COMMAND...: under the step's limit (or what is left of the budget); its wall
# seconds and the launches ncu said it profiled
timed() {
  local name=$1; shift
  local limit=${LIMIT:-90} left=$(( BUDGET - ($(date +%s) - t0) ))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -le 5 ] && { echo "$name: no time left" | tee -a "$P/times.txt"; return; }
  local start=$(date +%s.%N)
  timeout "$limit" "$@" > "$P/$name.log" 2>&1
  local rc=$?
  echo "$name: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s, $(grep -c '==PROF== Profiling' "$P/$name.log") launches profiled" | tee -a "$P/times.txt"
}

timed warm $PROG "$MODE" $G  # Inductor's cache warmed outside ncu
timed plain $PROG "$MODE" $G
timed kernel-replay "$NCU" $M --target-processes all -o "$P/kr" $PROG "$MODE" $G
timed application-replay "$NCU" $M --target-processes all --replay-mode application -o "$P/ar" $PROG "$MODE" $G
timed cache-none "$NCU" $M --target-processes all --cache-control none -o "$P/cn" $PROG "$MODE" $G
timed application-only "$NCU" $M --target-processes application-only -o "$P/ao" $PROG "$MODE" $G
timed lean-eager python3 -m paprof run --cmd "$PROG eager $G" --nvtx-range step --name eager \
  --runs "$P/lean-runs" --force --preset lean
python3 - "$P" >> "$P/times.txt" <<'PY'
import glob, json, sys
for side in glob.glob(f"{sys.argv[1]}/lean-runs/*/command/eager/command.json"):
    record = json.load(open(side))
    print("lean eager:", record.get("replay_passes"), "passes;", record.get("phases"))
PY
rm -f "$P"/*.ncu-rep
rm -rf "$P/lean-runs"/*/command/*/*.ncu-rep
cat "$P/times.txt"
tar czf "$OUT/timing-probe.tar.gz" -C "$OUT" timing-probe
