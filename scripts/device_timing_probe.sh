#!/usr/bin/env bash
# Why a program's timing pass is slow, and what a preset without instruction counts costs
# (issue 40, points 3 and 2), in ONE call on the GPU machine, from the repository root:
#   bash scripts/device_timing_probe.sh      (-> $OUT/timing-probe.tar.gz, summary times.txt)
# On the H100 the timing pass of the compiled 8-layer GPT step (examples/programs/
# gpt_block.py) took 65 s for 309 launches, eager's 10 s for 262, and it was the first
# run of the compiled program on that machine. The compiled program under ncu's timing
# pass, each with caches of its own (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR): cold as
# paprof runs it (--target-processes all), cold with --target-processes application-only,
# cold without ncu, warm without ncu, warm as paprof runs it. Then ncu's --kernel-id help
# and one try of an invocation pattern; then `paprof run --family paged_decode --variant
# all` with the default (caches cold), --preset basic (no instruction counts) and the
# default again, --timings.
# GPT_ARGS (default "--layers 8 --steps 1"), LIMIT (s a step, default 120) and BUDGET (s,
# default 560) bound it.
set -u
OUT=${OUT:-/tmp/paprof-out}
P=$OUT/timing-probe
mkdir -p "$P"
export PYTHONPATH=$PWD:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
PROG="python3 $PWD/examples/programs/gpt_block.py"
G="--timing-iters 0 ${GPT_ARGS:---layers 8 --steps 1}"
DIMS=launch__grid_dim_x,launch__grid_dim_y,launch__grid_dim_z,launch__block_dim_x,launch__block_dim_y,launch__block_dim_z
M="--metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,$DIMS --clock-control none --nvtx --nvtx-include step/"
BUDGET=${BUDGET:-560}
C=/tmp/probe-caches
rm -rf "$C"
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$NCU" --version | tail -1; } | tee "$P/times.txt"

# timed NAME CACHE COMMAND...: with its own Inductor and Triton caches (CACHE), under the
# step's limit (or what is left of the budget); its wall seconds and launches profiled
timed() {
  local name=$1 cache=$2; shift 2
  local limit=${LIMIT:-120} left=$(( BUDGET - ($(date +%s) - t0) ))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -le 5 ] && { echo "$name: no time left" | tee -a "$P/times.txt"; return; }
  local start=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=$C/$cache TRITON_CACHE_DIR=$C/$cache/triton timeout "$limit" "$@" > "$P/$name.log" 2>&1
  local rc=$?
  echo "$name: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s, $(grep -c '==PROF== Profiling' "$P/$name.log") launches profiled, $(grep -c '==PROF== Connected' "$P/$name.log") processes" | tee -a "$P/times.txt"
}

timed cold-ncu-all c1 "$NCU" $M --target-processes all -o "$P/r1" $PROG compiled $G
timed cold-ncu-apponly c2 "$NCU" $M --target-processes application-only -o "$P/r2" $PROG compiled $G
timed cold-plain c3 $PROG compiled $G
timed warm-plain c3 $PROG compiled $G
timed warm-ncu-all c3 "$NCU" $M --target-processes all -o "$P/r3" $PROG compiled $G
"$NCU" --help > "$P/ncu-help.txt" 2>&1
timed eager-kernel-id c4 "$NCU" $M --target-processes all --kernel-id ':::regex:nvjet:regex:^(1|3)$' -o "$P/r4" $PROG eager $G
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > "$P/pip.log" 2>&1 || echo "pip install failed (PYTHONPATH used)" | tee -a "$P/times.txt"
# the first run warms CuPy's and NVRTC's caches; basic and default are then compared warm
for name in default-cold basic default; do
  timed "paged-$name" c5 python3 -m paprof run --family paged_decode --variant all --preset "${name%-cold}" \
    --runs "/tmp/paged-$name" --timings
  sed -n '/all variants: phases/,$p' "$P/paged-$name.log" | head -20 >> "$P/times.txt"
done
python3 - /tmp/paged-basic /tmp/paged-default >> "$P/times.txt" 2>&1 <<'PY'
import glob, json, sys
for store in sys.argv[1:]:
    for side in sorted(glob.glob(f"{store}/*/paged_decode/*/*.json")):
        r = json.load(open(side))
        print(store.rsplit("/", 1)[1], r.get("variant"), "passes", r.get("replay_passes"))
PY
rm -f "$P"/*.ncu-rep
cat "$P/times.txt"
(cd /tmp && tar czf "$P/paged-runs.tar.gz" --exclude="*.ncu-rep" paged-basic paged-default 2>/dev/null)
tar czf "$OUT/timing-probe.tar.gz" -C "$OUT" timing-probe && rm -rf "$P"
