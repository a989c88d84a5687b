#!/usr/bin/env bash
# Issue 26's GPU checks in one device call (run from the repository root, with ./peers-kit
# and .paprof-commit carried):
#   steps  v4 under ncu with 3 profiled launches: the launcher pushes its NVTX range once a
#          step, and `paprof table --per-variant` must show 3 steps of 2 kernels each
#   mlp    examples/mlp eager and compiled under ncu (paprof run --cmd, range "step"), their
#          comparison, and mlp.py's CUDA-event-timed ratio (the ground truth)
#   fair   FlashInfer timed as it runs (its own fp16 output, no cast of paprof's in the step):
#          v7 and both FlashInfer paths benched with groups of 8 heads, then at the main shape
#          (each skipped once the call has run FAIR_BUDGET / FAIR_END seconds)
# Everything lands in $OUT/issue26.tar.gz (logs and run stores).
set -u
OUT=${OUT:-/tmp/paprof-out}
LOGS=/tmp/i26
mkdir -p "$OUT" "$LOGS"
exec > >(tee -a "$LOGS/issue26.log") 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the kernel lab's families are found through its entry point: install it beside paprof
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > /dev/null 2>&1 ||
  echo "$0: pip install -e . -e ./kernels failed: the lab's families will not be found" >&2
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
t0=$(date +%s)
stamp() { echo "=== $* (+$(( $(date +%s) - t0 )) s)"; }

for stage in ${*:-steps mlp fair}; do
  case $stage in
  steps)
    stamp steps
    timeout 120 python3 -m paprof run --variant v4 --shape batch=8,context=4096 --launches 3 \
      --runs "$LOGS/steps" > "$LOGS/steps-run.log" 2>&1
    echo "run rc $?"; tail -3 "$LOGS/steps-run.log"
    python3 -m paprof table "$LOGS/steps" --per-variant 2>&1 | tee "$LOGS/steps-table.txt"
    python3 -m paprof table "$LOGS/steps" --format csv --columns variant,kernel,launch,step,steps_from,duration_us \
      2>&1 | tee "$LOGS/steps.csv"
    ;;
  mlp)
    stamp mlp
    ( cd examples/mlp &&
      for mode in eager compiled; do
        timeout 150 python3 -m paprof run --cmd "python3 mlp.py $mode --timing-iters 0" --nvtx-range step \
          --name "$mode" --runs "$LOGS/mlp-runs" > "$LOGS/mlp-run-$mode.log" 2>&1
        echo "mlp run $mode: rc $? (+$(( $(date +%s) - t0 )) s)"; tail -4 "$LOGS/mlp-run-$mode.log"
      done
      python3 -m paprof table "$LOGS/mlp-runs" --per-variant > "$LOGS/mlp-table.txt" 2>&1
      python3 -m paprof compare eager compiled --runs "$LOGS/mlp-runs" --markdown "$LOGS/mlp-compare.md" \
        --out "$LOGS/mlp-compare.html" 2>&1 | tee "$LOGS/mlp-compare.log"
      timeout 120 python3 mlp.py both --timing-iters 20 --json "$LOGS/mlp-times.json" > "$LOGS/mlp-times.log" 2>&1
      echo "mlp both: rc $?"; tail -4 "$LOGS/mlp-times.log" )
    ;;
  fair)
    stamp fair
    if [ $(( $(date +%s) - t0 )) -gt "${FAIR_BUDGET:-330}" ]; then echo "fair: skipped (past FAIR_BUDGET)"; continue; fi
    P=/tmp/peers
    rm -rf $P && mkdir -p $P/ffi $P/fi $P/ws
    python3 -m pip install -q --no-index --no-deps --target $P/ffi peers-kit/apache_tvm_ffi-*.whl > "$LOGS/peers.log" 2>&1
    tar xJf peers-kit/flashinfer-*-trimmed.tar.xz -C $P/fi 2>> "$LOGS/peers.log"
    export PYTHONPATH=$PWD:$P/fi:$P/ffi FLASHINFER_WORKSPACE_BASE=$P/ws MAX_JOBS=8
    export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
    python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)" 2>&1 | tail -1
    for spec in ${FAIR_SHAPES:-"batch=32,context=8192,q_heads=64,kv_heads=8,dtype=fp16" "batch=64,context=4096,dtype=fp16"}; do
      if [ $(( $(date +%s) - t0 )) -gt "${FAIR_END:-470}" ]; then echo "bench $spec: skipped (past FAIR_END)"; continue; fi
      name=$(echo "$spec" | tr ',=' '_-')
      timeout 150 python3 -m paprof bench --family paged_decode --variant v7 --variant flashinfer \
        --variant flashinfer_cc --shape "$spec" --json > "$LOGS/bench-$name.json" 2> "$LOGS/bench-$name.log"
      echo "bench $spec: rc $? (+$(( $(date +%s) - t0 )) s)"; tail -6 "$LOGS/bench-$name.log"
    done
    ;;
  esac
done
stamp done
tar czf "$OUT/issue26.tar.gz" -C /tmp i26 && ls -la "$OUT/issue26.tar.gz"
