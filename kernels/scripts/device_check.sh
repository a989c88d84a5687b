#!/usr/bin/env bash
# Everything paprof does on the GPU machine, in ONE call of the device tool:
#   bash kernels/scripts/device_check.sh [STAGE ...]      (default: env tests bench runs)
# Stages:
#   env      GPU, driver, ncu, CuPy, NVTX
#   raw      ncu on every variant straight from the launcher (no paprof run), reports in raw/
#   runs     paprof run --variant all  -> $OUT/h200-runs.tar (the shipped examples/h200)
#   bench    paprof bench at the issue's shapes -> logs/bench-*.json
#   tune     sweep v5's warps / unroll / prefetch (kernels/scripts/tune_v5.py)
#   probe    ncu memory counters of sweep entries $PROBE (default "0 1")
#   diag     load the shipped runs with ncu's own Python module (faulthandler on)
#   tests    the GPU test suite (pytest -m gpu)
#   sanitize v5/v6's tensor-core kernel under compute-sanitizer memcheck (kernels/scripts/sanitize_fast.py)
#   check    paprof baseline update + paprof check --profile --repeat 5, twice
#   custom   examples/custom_family: bench, run --variant all, compare (-> $OUT/custom-runs.tar)
#   readme   the README's own family (scripts/readme_example.py): bench, run, compare, check
#   cmd      paprof run --cmd on a whole program with an NVTX range (the command kind)
#   sweep    paprof sweep of v5/v6 fp16 over batch x context (12 points), bench and profile
#            modes, with their reports (-> $OUT/sweeps.tar)
#   power    scripts/gate_power.py: the gate's detection and false-alarm rates (-> logs)
#   presets  paprof run --variant all under the presets $PRESETS (default: default source),
#            timed, replay passes in the logs (-> $OUT/presets.tar.xz[.aa ...])
#   flashw   flash_fwd's Hopper wgmma variant: its GPU tests (stop at the first failure, the
#            error of each 64-query block in the message), compute-sanitizer memcheck on
#            small shapes, then paprof bench of wgmma, mma, mma128, sdpa_flash, sdpa_cudnn at the
#            issue shapes (bf16 b4 h32 s8192 d128, causal, d64, s1024) -> logs/flashw-*
#   packed   v7 packed against tokens: its GPU tests, tune_v5.py --packed
#   merge    v7's merge kernel against the fused merge: GPU tests, memcheck, tune_v5.py --merge
#   fair     FlashInfer timed as it runs (issue 26): its kit installed, its GPU tests, then v6,
#            v7 and both FlashInfer paths benched at issue 16's nine shapes -> logs/bench-fair-*
#   decode16 the whole GPU suite (FlashInfer's JIT building meanwhile), then paprof bench of v6,
#            v7 and the FlashInfer peers at issue 16's nine shapes -> logs/d16-*, logs/bench-d16-*
#   ragship  v7 on the ragged batch under ncu (the packed path) -> $OUT/ragship.tar.xz
#   ship16   v6 and v7 at batch 1 (fp16; v7 fp8 too) under ncu, v7 with its merge kernel, and
#            paprof compare v6 v7 -> $OUT/ship16.tar.xz
#   flash5   wgmma2 as shipped (the diet): all its GPU tests, paprof bench at the four issue shapes
#            beside cuDNN, SDPA flash and wgmma -> logs/flash5-*
#   flashship wgmma2 and sdpa_cudnn under ncu at the issue's shape (-> $OUT/flashship.tar.xz)
#   fp8runs  v7 under ncu, fp8 and fp16 caches, b64 and b1 (-> $OUT/fp8runs.tar.xz)
#   flashbig flash_fwd's runs at the issue's shape (b4 h32 s8192 d128 bf16; handbook fp32)
#            (-> $OUT/flash-big.tar.xz)
#   attnprobe a bf16 GEMM ceiling and PyTorch SDPA's backends (kernels/scripts/attention_probe.py)
#   flash    flash_fwd: its GPU tests, paprof bench of every variant and SDPA peer at the
#            issue shapes (bf16 b4 h32 s8192 d128, causal, d64, s1024; the fp32 handbook at
#            b1 h8 s2048) against the GEMM ceiling, paprof run --variant all (bf16) and the
#            handbook (fp32) at b2 h16 s2048 causal -> logs/flash-*, $OUT/flash-runs.tar.xz[.aa ...]
#   flash2   flash_fwd's faster kernels against mma and the SDPA peers (variants in $FV at the top
#            of the stage): their GPU tests, paprof bench (30 launches) at the issue shapes (bf16
#            b4 h32 s8192 d128, causal, d64, s1024) -> logs/flash2-*, a TFLOP/s table
#   flash3   flash_fwd mma128's second round: its GPU tests, kernels/scripts/tune_flash.py over its
#            layouts (4 x 32 shipped, 8 x 16, alternatives; bf16 b4 h32 s8192 d128, causal,
#            d64, with sdpa_flash timed beside them), then paprof bench of mma, mma128 and
#            sdpa_flash (30 launches) at the four issue shapes -> logs/flash3-*, a TFLOP/s table
#   flash4   flash_fwd wgmma2 (FlashAttention-3's scheduling, issue 13): its GPU tests (stop at
#            the first failure; every knob setting on two shapes, the shipped TMA build first),
#            compute-sanitizer memcheck on two small shapes (and the cp.async producer on one), paprof bench
#            of wgmma2, wgmma, sdpa_flash, sdpa_cudnn at the four issue shapes (wgmma2 skips
#            d64), then kernels/scripts/tune_flash.py --variant wgmma2 $F4_TUNE (default --sweep diet: the
#            consumers' diet taken away a step at a time; cuDNN and sdpa_flash beside) -> logs/flash4-*
#   ship     the runs shipped for issues 13 and 16: mma128 and wgmma at the issue's flash_fwd
#            shape, v6/v7 on the ragged batch and at group 1 head_dim 64, v7 at the main shape
#            (fp16) -> $OUT/ship.tar.xz[.aa ...]
#   shards   the same bench sweep as two shards run one after the other on this GPU, merged,
#            and once through --gpus 0 (the worker path) (-> $OUT/shards.tar)
#   fp8      the fp8 (e4m3) cache: its GPU tests, its sanitize_fast.py shapes under memcheck,
#            paprof bench of v5/v6 at the issue shapes in fp8 (against fp16 at the main
#            shape), the fp8 entries of kernels/scripts/tune_v5.py
#   decode7  v7 (work split by tokens; the packed ranges forced for the A/B): its GPU tests
#            (-k v7), v7's shapes of kernels/scripts/sanitize_fast.py --v7 under memcheck (while the
#            peers' JIT builds run on the CPUs), paprof bench of v6, v7 and the FlashInfer
#            peers (when ./peers-kit is carried) at the issue's six shapes in fp16 and three
#            in fp8, kernels/scripts/tune_v5.py --d7 (group 1 at d64 in bf16 / fp8, v7 packed against
#            tokens) -> logs/decode7-*, logs/sanitize-v7.log, logs/bench-d7-*, logs/tune-d7.log
#   flashinfer FlashInfer as a peer: the kit in ./peers-kit (carried) installed into /tmp, its
#            JIT modules built in parallel, paprof bench of v5, v6, flashinfer, flashinfer_cc
#            at the issue shapes (fp16 and fp8), paprof run + compare at the main shape fp16
#            (-> $OUT/peers.tar.xz[.aa ...]), then the peer's GPU tests
# Results land in $OUT (the device tool brings it back): logs.tar with every log.
set -uo pipefail
OUT=${OUT:-/tmp/paprof-out}
mkdir -p "$OUT/logs"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the kernel lab is found through its entry point: install both (offline, no build isolation)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > /dev/null 2>&1 ||
  echo "device_check: pip install -e . -e ./kernels failed: the lab's families will not be found" >&2
# the copy of the tree on the GPU machine has no .git: name the commit for the sidecars
# (before the call: git rev-parse --short HEAD > .paprof-commit, and carry that file)
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
export PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
STAGES=${*:-env tests bench runs}
MAIN="batch=64,context=4096,q_heads=32,kv_heads=8,head_dim=128,page=16"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WorkloadDistribution --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
t0=$(date +%s)
# flash_runs STORE SHAPE LOG TIMEOUT: paprof run of every flash_fwd variant in bf16, then the
# fp32 handbook, at SHAPE into STORE (emptied first), logged to $OUT/logs/LOG.log
# decode_bench TAG PEERS: paprof bench of v6 and v7 (and FlashInfer's two paths when PEERS is
# set and logs/TAG-peers.log says they installed) at issue 16's nine shapes -> logs/bench-TAG-*,
# the table and v7's launch details; no new shape after D7_BUDGET s from the start
decode_bench() {
  (
    PV="--family paged_decode --variant v6 --variant v7"
    if [ -n "$2" ] && grep -q "peers_install rc 0" "$OUT/logs/$1-peers.log" 2>/dev/null; then
      peers_env $P; PV="$PV --variant flashinfer --variant flashinfer_cc"
    fi
    RAGGED="context=17:300:1024:2048:4000:4096:6000:8192:9000:12000:15000:16384:500:3000:7000:10000"
    for spec in "$MAIN,dtype=fp16" "batch=4,context=32768,dtype=fp16" "batch=1,context=131072,dtype=fp16" \
                "batch=32,context=8192,q_heads=64,kv_heads=8,dtype=fp16" "batch=64,context=4096,q_heads=32,kv_heads=32,head_dim=64,dtype=fp16" \
                "$RAGGED,dtype=fp16" "$MAIN,dtype=fp8" "batch=4,context=32768,dtype=fp8" "batch=1,context=131072,dtype=fp8"; do
      if [ $(( $(date +%s) - t0 )) -gt "${D7_BUDGET:-210}" ]; then echo "bench $spec: skipped (past D7_BUDGET)"; continue; fi
      name=$1-$(echo "$spec" | sed -e 's/batch=64,context=4096,q_heads=32,kv_heads=8,head_dim=128,page=16/main/' -e "s/$RAGGED/ragged16/" | tr ',=' '_-')
      timeout 90 python3 -m paprof bench $PV --shape "$spec" --json > "$OUT/logs/bench-$name.json" 2> "$OUT/logs/bench-$name.log"
      echo "bench $spec: rc $?"
    done
    python3 kernels/scripts/bench_table.py "$OUT"/logs/bench-$1-*.json | tee "$OUT/logs/bench-$1-table.txt"
    # what v7 chose at each shape (its launch details)
    python3 -c "
import json, sys
for f in sys.argv[1:]:
  try:
      d = json.load(open(f))
  except ValueError:
      continue
  for r in d['rows']:
      if r['variant'] == 'v7':
          print(d['shape_slug'], r.get('details'))" "$OUT"/logs/bench-$1-*.json | tee "$OUT/logs/bench-$1-v7-details.txt"
  )
}
flash_runs() {
  rm -rf "$1"
  for which in "all bf16" "handbook fp32"; do
    read -r vid dtype <<< "$which"
    local start=$(date +%s)
    timeout "$4" python3 -m paprof run --family flash_fwd --variant "$vid" --runs "$1" \
      --shape "$2,dtype=$dtype" 2>&1 | tee -a "$OUT/logs/$3.log" | tail -8
    echo "paprof run --family flash_fwd --variant $vid ($dtype): rc ${PIPESTATUS[0]} $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/$3.log"
  done
}
# flash_bench NAME TIMEOUT VARIANT...: paprof bench (30 launches, JSON) of the variants at
# flash_fwd's four issue shapes (bf16 b4 h32 s8192 d128, causal, d64, s1024) into
# $OUT/logs/NAME-bench-*, then their TFLOP/s table in NAME-bench-table.md
flash_bench() {
  local name=$1 limit=$2 F="batch=4,q_heads=32,seq_q=8192,head_dim=128,dtype=bf16" i=0 spec start vid
  shift 2
  local vargs=()
  for vid in "$@"; do vargs+=(--variant "$vid"); done
  for spec in "$F" "$F,causal=true" "${F/head_dim=128/head_dim=64}" "${F/seq_q=8192/seq_q=1024}"; do
    i=$((i + 1))
    start=$(date +%s)
    timeout "$limit" python3 -m paprof bench --family flash_fwd "${vargs[@]}" --launches 30 --shape "$spec" --json \
      > "$OUT/logs/$name-bench-$i.json" 2> "$OUT/logs/$name-bench-$i.log"
    echo "bench $spec: rc $? $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/$name-bench.txt"
    tail -4 "$OUT/logs/$name-bench-$i.log"
  done
  python3 kernels/scripts/bench_table.py --flops "$OUT"/logs/"$name"-bench-*.json | tee "$OUT/logs/$name-bench-table.md"
}
# flash_memcheck NAME TIMEOUT VARIANT SHAPE...: one verified launch of the flash_fwd variant at
# each shape under compute-sanitizer memcheck (no timing, no GEMM ceiling) -> logs/NAME-memcheck.log;
# FLASH_KNOBS="TMA=0,STAGES=2" (wgmma2's knobs) builds the variant with those -D values
flash_memcheck() {
  local name=$1 limit=$2 vid=$3 SAN
  shift 3
  SAN=$(ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
  timeout "$limit" "${SAN:-compute-sanitizer}" --tool memcheck --print-limit 5 python3 -c "
import sys
from paprof import registry
from paprof.measure.kernels import harness
fam = registry.family('flash_fwd')
import os
from paprof_kernels.flash_fwd import catalog
variant = registry.get(sys.argv[1], 'flash_fwd')
knobs = catalog.parse_knobs(os.environ.get('FLASH_KNOBS', ''), 'wgmma2')
if knobs:
    variant = catalog.tuned(variant, knobs)
for text in sys.argv[2:]:
    p = fam.parse(text)
    print(sys.argv[1], p.slug(), harness.verify(harness.prepare(fam, variant, p)), flush=True)
" "$vid" "$@" > "$OUT/logs/$name-memcheck.log" 2>&1
  echo "$vid memcheck: rc $?"; tail -6 "$OUT/logs/$name-memcheck.log"
}
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
# peers_env P: the environment FlashInfer's kit in P runs in (exported: call it in a
# subshell, so that the peer's PYTHONPATH stays out of the later stages)
peers_env() {
  export PYTHONPATH=$PWD:$1/fi:$1/ffi FLASHINFER_WORKSPACE_BASE=$1/ws CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")} MAX_JOBS=${MAX_JOBS:-4}
}
# peers_install P: FlashInfer's kit from ./peers-kit (carried) installed into P (emptied
# first), peers_env set, and its JIT modules built, all six at once on tiny shapes (the
# launcher with no check and no launch: prepare() alone, which plans); logs in
# $OUT/logs/peers-*. Returns 1 when flashinfer cannot be imported afterwards.
peers_install() {
  local P=$1 start vid spec
  rm -rf $P; mkdir -p $P/ffi $P/fi $P/ws $P/runs
  python3 -m pip install --no-index --no-deps --target $P/ffi peers-kit/apache_tvm_ffi-*.whl > "$OUT/logs/peers-install.log" 2>&1
  tar xJf peers-kit/flashinfer-*-trimmed.tar.xz -C $P/fi 2>> "$OUT/logs/peers-install.log"
  peers_env $P
  { command -v ninja || python3 -c "import ninja; print('ninja module', ninja.__file__)"; python3 -c "import flashinfer, torch; print('flashinfer', flashinfer.__version__, 'torch', torch.__version__)"; python3 -m paprof list | grep -i flashinfer; } 2>&1 | tail -6 | tee -a "$OUT/logs/peers-install.log"
  # FlashInfer JIT-compiles a module at its first plan()
  start=$(date +%s)
  for vid in flashinfer flashinfer_cc; do
    for spec in dtype=fp16 head_dim=64,q_heads=32,kv_heads=32,dtype=fp16 dtype=fp8; do
      ( timeout 300 python3 -m paprof.measure.kernels.launch --family paged_decode --variant $vid --shape "batch=2,context=64,$spec" --no-check \
          --profile-launches 0 > "$OUT/logs/peers-jit-$vid-$(echo $spec | tr ',=' '_-').log" 2>&1
        echo "jit $vid $spec: rc $?" ) &
    done
  done
  wait
  echo "JIT modules: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/peers-install.log"
  python3 -c "import flashinfer" > /dev/null 2>&1
}
# pack NAME DIR: DIR as $OUT/NAME.tar.xz, split into 15 MiB parts when larger (the device
# tool brings back files of 16 MiB at most); join here with cat NAME.tar.xz.* | tar xJ
pack() {
  tar cf - "$2" | xz -T0 -6 > "$OUT/$1.tar.xz"
  if [ "$(stat -c %s "$OUT/$1.tar.xz")" -gt 15000000 ]; then
    (cd "$OUT" && split -b 15M "$1.tar.xz" "$1.tar.xz." && rm "$1.tar.xz")
  fi
}

for stage in $STAGES; do
  case $stage in
  env)
    stamp env
    { nvidia-smi; "$NCU" --version; python3 -c "
import cupy, sys
print('python', sys.version)
print('cupy', cupy.__version__)
print('nvtx available', getattr(cupy.cuda, 'nvtx', None) is not None and getattr(cupy.cuda.nvtx, 'available', True))
from paprof.measure.kernels import gpu; print(gpu.current_device())
"; } > "$OUT/logs/env.txt" 2>&1
    tail -5 "$OUT/logs/env.txt"
    ;;
  raw)
    stamp raw
    mkdir -p "$OUT/raw"
    for v in baseline v1 v2 v3 v4 handbook v5 v6; do
      stamp "raw $v"
      timeout 120 "$NCU" --clock-control none $SECTIONS --nvtx --nvtx-include "paged_decode.$v/" \
        -o "$OUT/raw/$v" -f python3 -m paprof.measure.kernels.launch --variant $v --shape "$MAIN" \
        --profile-launches 1 --result "$OUT/raw/$v.json" > "$OUT/logs/raw-$v.log" 2>&1
      echo "  rc=$? $(grep -c '==PROF== Profiling' "$OUT/logs/raw-$v.log") kernels profiled"
    done
    (cd "$OUT" && tar cf raw.tar raw && rm -rf raw)
    ;;
  runs)
    stamp runs
    rm -rf /tmp/runs
    start=$(date +%s)
    timeout 300 python3 -m paprof run --family paged_decode --variant all --shape "$MAIN" --runs /tmp/runs 2>&1 | tee "$OUT/logs/runs.log"
    echo "paprof run --variant all: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/runs.log"
    timeout 120 python3 -m paprof run --variant v5 --variant v6 --shape "$MAIN,dtype=fp16" --runs /tmp/runs 2>&1 | tee -a "$OUT/logs/runs.log"
    timeout 120 python3 -m paprof run --variant v5 --variant v6 --shape "batch=4,context=32768,dtype=fp16" --runs /tmp/runs 2>&1 | tee -a "$OUT/logs/runs.log"
    timeout 60 python3 -m paprof run --variant v6 --shape "batch=1,context=131072,dtype=fp16" --runs /tmp/runs 2>&1 | tee -a "$OUT/logs/runs.log"
    (cd /tmp && tar cf "$OUT/h200-runs.tar" runs)
    ;;
  bench)
    stamp bench
    python3 -m paprof bench --family paged_decode --variant all --shape "$MAIN" --json > "$OUT/logs/bench-main-fp32.json" 2> "$OUT/logs/bench-main-fp32.log"
    for spec in "$MAIN,dtype=fp16" "$MAIN,dtype=bf16" "batch=1,context=131072,dtype=fp16" "batch=4,context=32768,dtype=fp16"; do
      name=$(echo "$spec" | sed 's/batch=64,context=4096,q_heads=32,kv_heads=8,head_dim=128,page=16/main/' | tr ',=' '_-')
      python3 -m paprof bench --variant v5 --variant v6 --variant v3 --shape "$spec" --json > "$OUT/logs/bench-$name.json" 2> "$OUT/logs/bench-$name.log"
    done
    python3 kernels/scripts/bench_table.py "$OUT"/logs/bench-*.json | tee "$OUT/logs/bench-table.txt"
    ;;
  tune)
    stamp tune
    timeout 300 python3 kernels/scripts/tune_v5.py 2>&1 | tee "$OUT/logs/tune.log"
    ;;
  probe)
    # a few memory counters of chosen sweep entries: PROBE="0 1" bash kernels/scripts/device_check.sh probe
    stamp probe
    METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_sectors.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
    for i in ${PROBE:-0 1}; do
      timeout 120 "$NCU" --clock-control none --metrics $METRICS -k regex:paged_decode -c 1 \
        python3 kernels/scripts/tune_v5.py --only "$i" --no-timing --launches 1 > "$OUT/logs/probe-$i.log" 2>&1
      echo "probe $i rc=$?"; grep -E "paged_decode|__|rel=" "$OUT/logs/probe-$i.log" | tail -12
    done
    ;;
  diag)
    stamp diag
    python3 -c "from paprof.read.locate import import_ncu_report as f; m = f(); print('ncu_report from', m.__file__)"
    runs=examples/h200; [ -d /tmp/runs ] && runs=/tmp/runs
    python3 -X faulthandler -m paprof table $runs --format csv > "$OUT/logs/diag-table.csv" 2> "$OUT/logs/diag-table.log"; echo "table exit $?"
    tail -5 "$OUT/logs/diag-table.log"
    python3 -X faulthandler -m paprof baseline update --runs $runs --out /tmp/diag-baseline.json 2>&1 | tail -3; echo "baseline exit ${PIPESTATUS[0]}"
    ;;
  tests)
    stamp tests
    { timeout 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider 2>&1 | tail -20; (cd kernels && timeout 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider 2>&1 | tail -30); } | tee "$OUT/logs/gpu-tests.log"
    ;;
  sanitize)
    stamp sanitize
    SAN=$(ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
    timeout 300 "${SAN:-compute-sanitizer}" --tool memcheck --print-limit 5 python3 kernels/scripts/sanitize_fast.py 2>&1 | tee "$OUT/logs/sanitize.log" | tail -12
    ;;
  check)
    stamp check
    rm -rf /tmp/check-runs /tmp/baseline.json
    python3 -m paprof run --variant v3 --variant v5 --shape "$MAIN" --runs /tmp/check-runs --launches 5 2>&1 | tail -5
    python3 -m paprof baseline update --runs /tmp/check-runs --out /tmp/baseline.json 2>&1 | tail -5
    for i in 1 2; do
      python3 -m paprof check --baseline /tmp/baseline.json --profile --repeat 5 --markdown "$OUT/logs/check-$i.md" 2>&1 | tee "$OUT/logs/check-$i.log" | tail -15
      echo "check $i exit ${PIPESTATUS[0]}"
    done
    cp /tmp/baseline.json "$OUT/logs/" 2>/dev/null
    ;;
  custom)
    stamp custom
    ( cd examples/custom_family && rm -rf runs &&
      python3 -m paprof list --family softmax &&
      for shape in "rows=16384,cols=4096" "rows=4096,cols=1000" "rows=1024,cols=32768"; do
        python3 -m paprof bench --family softmax --variant all --shape "$shape" --json > "$OUT/logs/custom-bench-$(echo $shape | tr ',=' '_-').json" 2>> "$OUT/logs/custom-bench.log"
        python3 "$OLDPWD/kernels/scripts/bench_table.py" "$OUT/logs/custom-bench-$(echo $shape | tr ',=' '_-').json"
      done
      start=$(date +%s)
      timeout 240 python3 -m paprof run --family softmax --variant all --runs runs 2>&1 | tee "$OUT/logs/custom-run.log"
      echo "paprof run --family softmax --variant all: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/custom-run.log"
      python3 -m paprof compare naive block fused torch triton --runs runs --markdown "$OUT/logs/custom-compare.md" --out "$OUT/logs/custom-compare.html" 2>&1 | tail -3
      tar cf "$OUT/custom-runs.tar" runs )
    ;;
  readme)
    stamp readme
    rm -rf /tmp/readme && python3 scripts/readme_example.py /tmp/readme > /dev/null
    ( cd /tmp/readme/my-kernels &&
      python3 -m paprof bench --family vadd --variant all 2>&1 | tail -4 &&
      python3 -m paprof run --family vadd --variant all --shape n=67108864 2>&1 | tail -8 &&
      python3 -m paprof compare simple vec4 --markdown "$OUT/logs/readme-compare.md" 2>&1 | tail -2 &&
      python3 -m paprof baseline update --runs runs --out perf/vadd.json 2>&1 | tail -3 &&
      python3 -m paprof check --baseline perf/vadd.json --runs runs 2>&1 | tail -4; echo "readme check exit $?"
      python3 -m paprof check --baseline perf/vadd.json --profile --repeat 3 2>&1 | tail -4; echo "readme check --profile exit ${PIPESTATUS[0]}"
      tar cf "$OUT/readme-runs.tar" runs perf )
    ;;
  cmd)
    stamp cmd
    ( cd examples/custom_family &&
      python3 -m paprof run --cmd "python3 whole_program.py --steps 3" --nvtx-range softmax_step \
        --name whole_program --runs runs 2>&1 | tail -6
      python3 -m paprof table runs/*/command 2>&1 | tail -6
      tar cf "$OUT/cmd-runs.tar" runs/*/command )
    ;;
  sweep)
    stamp sweep
    GRID="--variant v5 --variant v6 --grid batch=1,4,16,64 --grid context=4096..65536x4 --shape dtype=fp16"
    for mode in bench profile; do
      start=$(date +%s)
      timeout 420 python3 -m paprof sweep $GRID --$mode --runs sweeps/h200-$mode --report sweeps/h200-$mode.html 2>&1 | tail -25 | tee "$OUT/logs/sweep-$mode.log"
      echo "sweep --$mode: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/sweep-$mode.log"
    done
    tar cf "$OUT/sweeps.tar" sweeps
    ;;
  power)
    stamp power
    timeout 400 python3 scripts/gate_power.py --json "$OUT/logs/gate_power.json" 2>&1 | tee "$OUT/logs/gate_power.log" | tail -30
    ;;
  shards)
    stamp shards
    GRID="--variant v5 --variant v6 --grid batch=1,4,16,64 --grid context=4096..65536x4 --shape dtype=fp16 --bench"
    rm -rf shards && mkdir -p shards
    start=$(date +%s)
    for k in 1 2; do
      python3 -m paprof sweep $GRID --shard $k/2 --runs shards/shard-$k 2>&1 | tail -2
    done
    python3 -m paprof merge shards/shard-1 shards/shard-2 --out shards/merged 2>&1 | tail -3
    python3 -m paprof sweep-report --runs shards/merged --out shards/merged.html 2>&1 | tail -4
    echo "two shards + merge: $(( $(date +%s) - start )) s wall"
    start=$(date +%s)
    python3 -m paprof sweep $GRID --gpus 0 --runs shards/gpus0 2>&1 | tail -3
    echo "--gpus 0: $(( $(date +%s) - start )) s wall"
    tar cf "$OUT/shards.tar" shards
    ;;
  presets)
    stamp presets
    rm -rf presets; mkdir -p presets
    for p in ${PRESETS:-default source}; do
      start=$(date +%s)
      python3 -m paprof run --family paged_decode --variant all --preset $p --runs presets/$p > "$OUT/logs/preset-$p.log" 2>&1
      echo "preset $p: rc $? $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/presets.txt"
      grep -rho "[0-9]* passes" presets/$p | sort | uniq -c | tee -a "$OUT/logs/presets.txt"
    done
    pack presets presets
    ;;
  attnprobe)
    stamp attnprobe
    python3 kernels/scripts/attention_probe.py > "$OUT/logs/attention_probe.txt" 2>&1
    cat "$OUT/logs/attention_probe.txt"
    ;;
  flash)
    stamp flash
    timeout 300 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -q -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/logs/flash-tests.log"
    F="batch=4,q_heads=32,seq_q=8192,head_dim=128,dtype=bf16"
    i=0
    for spec in "$F" "$F,causal=true" "${F/head_dim=128/head_dim=64}" "${F/seq_q=8192/seq_q=1024}" \
                "batch=1,q_heads=8,seq_q=2048,head_dim=128,dtype=fp32"; do
      i=$((i + 1))
      start=$(date +%s)
      timeout 150 python3 -m paprof bench --family flash_fwd --variant all --launches 30 --shape "$spec" --json \
        > "$OUT/logs/flash-bench-$i.json" 2> "$OUT/logs/flash-bench-$i.log"
      echo "bench $spec: rc $? $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/flash-bench.txt"
    done
    python3 kernels/scripts/bench_table.py --flops "$OUT"/logs/flash-bench-*.json | tee "$OUT/logs/flash-bench-table.md"
    flash_runs flash-runs "batch=2,q_heads=16,seq_q=2048,head_dim=128,causal=true" flash-run 240
    python3 -m paprof table flash-runs > "$OUT/logs/flash-table.txt" 2>&1; tail -12 "$OUT/logs/flash-table.txt"
    pack flash-runs flash-runs
    ;;
  fp8)
    stamp fp8
    # the whole pytest output in the log (a failure a line: its error per sequence and KV
    # head), its tail here; then the fp8 shapes of kernels/scripts/sanitize_fast.py under memcheck
    timeout 240 python3 -X faulthandler -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_kernels.py -k fp8 -q -p no:cacheprovider \
      -rfE --tb=line --junitxml "$OUT/logs/fp8-tests.xml" > "$OUT/logs/fp8-tests.log" 2>&1
    echo "fp8 tests: rc $?"; tail -25 "$OUT/logs/fp8-tests.log"
    SAN=$(ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
    timeout 150 "${SAN:-compute-sanitizer}" --tool memcheck --print-limit 5 python3 kernels/scripts/sanitize_fast.py --dtype fp8 \
      > "$OUT/logs/sanitize-fp8.log" 2>&1
    echo "fp8 memcheck: rc $?"; tail -10 "$OUT/logs/sanitize-fp8.log"
    for spec in "$MAIN,dtype=fp8" "$MAIN,dtype=fp16" "batch=4,context=32768,dtype=fp8" "batch=1,context=131072,dtype=fp8" \
                "batch=32,context=8192,q_heads=64,kv_heads=8,dtype=fp8"; do
      name=fp8-$(echo "$spec" | sed 's/batch=64,context=4096,q_heads=32,kv_heads=8,head_dim=128,page=16/main/' | tr ',=' '_-')
      timeout 120 python3 -m paprof bench --family paged_decode --variant v5 --variant v6 --shape "$spec" --json > "$OUT/logs/bench-$name.json" 2> "$OUT/logs/bench-$name.log"
      echo "bench $spec: rc $?"
    done
    python3 kernels/scripts/bench_table.py "$OUT"/logs/bench-fp8-*.json | tee "$OUT/logs/bench-fp8-table.txt"
    if [ "${FP8_TUNE:-1}" = 1 ]; then  # FP8_TUNE=0 leaves the tuning entries out
      timeout 150 python3 kernels/scripts/tune_v5.py --fp8 2>&1 | tee "$OUT/logs/tune-fp8.log" | grep -v "^    "
    fi
    ;;
  flashinfer)
    stamp flashinfer
    # in a subshell: the peer's PYTHONPATH and environment stay out of the later stages
    (
      P=/tmp/peers
      peers_install $P
      PV="--family paged_decode --variant v5 --variant v6 --variant flashinfer --variant flashinfer_cc"
      RAGGED="context=17:300:1024:2048:4000:4096:6000:8192:9000:12000:15000:16384:500:3000:7000:10000"
      for spec in "$MAIN,dtype=fp16" "batch=4,context=32768,dtype=fp16" "batch=1,context=131072,dtype=fp16" \
                  "batch=32,context=8192,q_heads=64,kv_heads=8,dtype=fp16" "batch=64,context=4096,q_heads=32,kv_heads=32,head_dim=64,dtype=fp16" \
                  "$RAGGED,dtype=fp16" "$MAIN,dtype=fp8"; do
        name=peers-$(echo "$spec" | sed -e 's/batch=64,context=4096,q_heads=32,kv_heads=8,head_dim=128,page=16/main/' -e "s/$RAGGED/ragged16/" | tr ',=' '_-')
        timeout 150 python3 -m paprof bench $PV --shape "$spec" --json > "$OUT/logs/bench-$name.json" 2> "$OUT/logs/bench-$name.log"
        echo "bench $spec: rc $?"
      done
      python3 kernels/scripts/bench_table.py "$OUT"/logs/bench-peers-*.json | tee "$OUT/logs/bench-peers-table.txt"
      start=$(date +%s)
      timeout 240 python3 -m paprof run --family paged_decode --variant v6 --variant flashinfer --variant flashinfer_cc --shape "$MAIN,dtype=fp16" --runs $P/runs 2>&1 | tail -12 | tee "$OUT/logs/peers-run.log"
      echo "paprof run: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/peers-run.log"
      python3 -m paprof compare v6 flashinfer flashinfer_cc --runs $P/runs --markdown "$OUT/logs/peers-compare.md" --out "$OUT/logs/peers-compare.html" 2>&1 | tail -3
      python3 -m paprof compare v6 flashinfer --runs $P/runs --markdown "$OUT/logs/peers-compare-v6-flashinfer.md" 2>&1 | tail -2
      (cd $P && mkdir -p peers/jit && cp -r runs peers/ && cd ws && find . \( -name "*.ninja" -o -name "*.log" \) -print0 | xargs -0 -r cp --parents -t ../peers/jit; true)
      (cd $P && pack peers peers)
      # last: bench has already checked every variant at every shape above
      timeout 200 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_peers.py -q -p no:cacheprovider -rs 2>&1 | tail -25 | tee "$OUT/logs/peers-tests.log"
    )
    ;;
  flash2)
    stamp flash2
    FV="mma mma128 sdpa_flash sdpa_cudnn"   # the variants benched; the first: the baseline
    FT="mma128"                             # pytest -k: the new kernels' GPU tests
    timeout 120 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -q -p no:cacheprovider -rs -k "$FT" 2>&1 \
      | tail -25 | tee "$OUT/logs/flash2-tests.log"
    # shellcheck disable=SC2086  # one word a variant
    flash_bench flash2 100 $FV
    ;;
  flashw)
    stamp flashw
    # at most 150 + 90 + 4 x 85 s (under the device tool's 10 minutes); expected ~4 minutes
    # the tests with the error of each 64-query block first (pytest -x stops at the first
    # failure), then the rest of wgmma's (the shared shapes, the launch report)
    for k in "wgmma_by_tile" "wgmma and not wgmma_by_tile"; do
      timeout 75 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -k "$k" -x -q -p no:cacheprovider -rfEs \
        --tb=short >> "$OUT/logs/flashw-tests.log" 2>&1
      echo "wgmma tests ($k): rc $?"
    done
    grep -E "^(FAILED|ERROR)|by query block|passed|failed|skipped" "$OUT/logs/flashw-tests.log" | tail -15
    flash_memcheck flashw 90 wgmma "batch=1,q_heads=4,kv_heads=2,seq_q=200,seq_k=333,head_dim=128,causal=true,dtype=bf16" \
      "batch=1,q_heads=2,seq_q=77,head_dim=64,dtype=fp16"
    flash_bench flashw 85 wgmma mma mma128 sdpa_flash sdpa_cudnn
    ;;
  decode7)
    # v7 (work split by tokens, packed ranges for ragged batches): its GPU tests, memcheck on
    # v7's edge shapes (kernels/scripts/sanitize_fast.py --v7) while the peers' JIT builds run on the
    # CPUs, then paprof bench of v6 and v7 (and the FlashInfer peers when ./peers-kit is
    # carried; PEERS=0 leaves them out) at the issue's shapes in fp16 and fp8, then
    # kernels/scripts/tune_v5.py --d7 (group 1 at head_dim 64 in bf16 and fp8; v7 packed against
    # tokens on the ragged batch, with timelines, and at batch 1). About 4 minutes.
    # D7_BUDGET (s from the script's start, default 210): no new bench after it; D7_END
    # (default 250): the sweep is cut there.
    stamp decode7
    P=/tmp/peers
    if [ "${PEERS:-1}" = 1 ] && ls peers-kit/flashinfer-*-trimmed.tar.xz > /dev/null 2>&1; then
      ( peers_install $P > "$OUT/logs/d7-peers.log" 2>&1; echo "peers_install rc $?" >> "$OUT/logs/d7-peers.log" ) &
      peers_pid=$!
    else
      peers_pid=""; echo "decode7: no peers-kit (or PEERS=0): FlashInfer left out"
    fi
    # the token path's chunk tests passed on the H200 at 6d7bf95 and its kernel is unchanged
    timeout 150 python3 -X faulthandler -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_kernels.py -k "v7 and not chunks_given" -q \
      -p no:cacheprovider -rfE --tb=line --junitxml "$OUT/logs/decode7-tests.xml" > "$OUT/logs/decode7-tests.log" 2>&1
    echo "v7 tests: rc $?"; tail -25 "$OUT/logs/decode7-tests.log"
    stamp "decode7 memcheck"
    SAN=$(ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
    timeout 90 "${SAN:-compute-sanitizer}" --tool memcheck --print-limit 5 python3 kernels/scripts/sanitize_fast.py --v7 \
      > "$OUT/logs/sanitize-v7.log" 2>&1
    echo "v7 memcheck: rc $?"; tail -12 "$OUT/logs/sanitize-v7.log"
    [ -n "$peers_pid" ] && { wait $peers_pid; tail -4 "$OUT/logs/d7-peers.log"; }
    stamp "decode7 bench"
    decode_bench d7 "$peers_pid"
    stamp "decode7 tune"
    left=$(( ${D7_END:-250} - ($(date +%s) - t0) ))  # the sweep stops by D7_END s (default 250)
    if [ $left -gt 20 ]; then
      timeout $(( left < 120 ? left : 120 )) python3 kernels/scripts/tune_v5.py --d7 2>&1 | tee "$OUT/logs/tune-d7.log" | grep -v "^    SM "
    else
      echo "tune_v5.py --d7: skipped (past D7_END)"
    fi
    ;;
  flash3)
    stamp flash3
    timeout 180 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -q -p no:cacheprovider -rs -k mma128 2>&1 \
      | tail -25 | tee "$OUT/logs/flash3-tests.log"
    stamp flash3 tune
    timeout 200 python3 kernels/scripts/tune_flash.py --launches 30 2>&1 | tee "$OUT/logs/flash3-tune.log"
    stamp flash3 bench
    flash_bench flash3 60 mma mma128 sdpa_flash
    ;;
  flash4)
    # at most 60 + 220 + 2 x 60 + 4 x 60 s, then the A/B cut at F4_END (default 570 s from
    # the script's start: under the device tool's 10 minutes; the TMA entries come early in
    # its sweep); expected ~7 minutes
    stamp flash4
    # wgmma first: head_dim 64 with QRELOAD (NOTES item 76) among its tile classes
    timeout 60 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -k "test_wgmma_by_tile and not wgmma2" -q \
      -p no:cacheprovider -rfEs --tb=short > "$OUT/logs/flash4-wgmma-tests.log" 2>&1
    echo "wgmma tests: rc $?"
    grep -E "^(FAILED|ERROR)|passed|failed|skipped" "$OUT/logs/flash4-wgmma-tests.log" | tail -8
    # wgmma2's tests, the TMA producer's (NOTES items 77-79) and the persistent grid's (82-84)
    # among them
    timeout 220 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -k wgmma2 -x -q -p no:cacheprovider -rfEs \
      --tb=short > "$OUT/logs/flash4-tests.log" 2>&1
    echo "wgmma2 tests: rc $?"
    grep -E "^(FAILED|ERROR)|by query block|passed|failed|skipped" "$OUT/logs/flash4-tests.log" | tail -15
    stamp flash4 memcheck
    flash_memcheck flash4 70 wgmma2 "batch=1,q_heads=4,kv_heads=2,seq_q=200,seq_k=333,head_dim=128,causal=true,dtype=bf16" \
      "batch=1,q_heads=2,seq_q=77,seq_k=700,head_dim=128,dtype=fp16"
    FLASH_KNOBS="TMA=0,STAGES=2" flash_memcheck flash4-cpasync 60 wgmma2 \
      "batch=1,q_heads=4,kv_heads=2,seq_q=200,seq_k=333,head_dim=128,causal=true,dtype=bf16"
    stamp flash4 bench
    flash_bench flash4 60 wgmma2 wgmma sdpa_flash sdpa_cudnn
    stamp flash4 tune
    left=$(( ${F4_END:-570} - ($(date +%s) - t0) ))
    [ "$left" -lt 30 ] && left=30
    # F4_TUNE: the sweep's arguments (default the diet's A/B, NOTES items 85-86, cuDNN beside)
    # shellcheck disable=SC2086
    timeout "$left" python3 kernels/scripts/tune_flash.py --variant wgmma2 ${F4_TUNE:---sweep diet --peer sdpa_cudnn --peer sdpa_flash} \
      --launches 30 2>&1 | tee "$OUT/logs/flash4-tune.log"
    ;;
  ship)
    stamp ship
    rm -rf /tmp/ship
    RAGGED="context=17:300:1024:2048:4000:4096:6000:8192:9000:12000:15000:16384:500:3000:7000:10000"
    for args in "--family flash_fwd --variant mma128 --variant wgmma --shape batch=4,q_heads=32,seq_q=8192,head_dim=128,dtype=bf16" \
                "--family paged_decode --variant v6 --variant v7 --shape $RAGGED,dtype=fp16" \
                "--family paged_decode --variant v6 --variant v7 --shape batch=64,context=4096,q_heads=32,kv_heads=32,head_dim=64,dtype=fp16" \
                "--family paged_decode --variant v7 --shape $MAIN,dtype=fp16"; do
      start=$(date +%s)
      # shellcheck disable=SC2086  # one word a flag
      timeout 150 python3 -m paprof run $args --runs /tmp/ship 2>&1 | tail -6 | tee -a "$OUT/logs/ship.log"
      echo "paprof run $args: rc ${PIPESTATUS[0]} $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/ship.log"
    done
    python3 -m paprof table /tmp/ship > "$OUT/logs/ship-table.txt" 2>&1; tail -12 "$OUT/logs/ship-table.txt"
    (cd /tmp && pack ship ship)
    ;;
  ship16)
    # v6 and v7 at batch 1, context 131,072 (fp16; v7 also fp8) under ncu, v7 on its path
    # there now (the token plan's 66 parts a KV head merged by paged_decode_v7_merge), then
    # paprof compare v6 v7 on them -> $OUT/ship16.tar.xz
    stamp ship16
    rm -rf /tmp/ship16
    for args in "--variant v6 --variant v7 --shape batch=1,context=131072,dtype=fp16" \
                "--variant v7 --shape batch=1,context=131072,dtype=fp8"; do
      start=$(date +%s)
      # shellcheck disable=SC2086  # one word a flag
      timeout 200 python3 -m paprof run --family paged_decode $args --runs /tmp/ship16 2>&1 | tail -6 | tee -a "$OUT/logs/ship16.log"
      echo "paprof run $args: rc ${PIPESTATUS[0]} $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/ship16.log"
    done
    python3 -m paprof table /tmp/ship16 2>&1 | tail -8
    python3 -m paprof compare v6 v7 --runs /tmp/ship16 --shape batch=1,context=131072,dtype=fp16 \
      --out "$OUT/logs/ship16-compare.html" 2>&1 | tail -12
    (cd /tmp && pack ship16 ship16)
    ;;
  ragship)
    # v7 on issue 16's ragged batch (fp16) under ncu, the path it takes now (packed) -> $OUT/ragship.tar.xz
    stamp ragship
    rm -rf /tmp/ragship
    RAGGED="context=17:300:1024:2048:4000:4096:6000:8192:9000:12000:15000:16384:500:3000:7000:10000"
    timeout 150 python3 -m paprof run --family paged_decode --variant v7 --shape "$RAGGED,dtype=fp16" --runs /tmp/ragship \
      2>&1 | tail -6 | tee -a "$OUT/logs/ragship.log"
    python3 -m paprof table /tmp/ragship 2>&1 | tail -4
    (cd /tmp && pack ragship ragship)
    ;;
  packed)
    stamp packed
    # v7's packed path against tokens (issue 16, NOTES items 65-69): its GPU tests, then
    # kernels/scripts/tune_v5.py --packed (ragged and b1, fp16 and fp8, with timelines)
    timeout 200 python3 -m pytest -c kernels/pyproject.toml -m gpu -q -p no:cacheprovider kernels/tests/test_gpu_kernels.py -k "v7 and not chunks_given" \
      > "$OUT/logs/packed-tests.log" 2>&1
    echo "packed tests: rc $?"; tail -5 "$OUT/logs/packed-tests.log"
    timeout 360 python3 kernels/scripts/tune_v5.py --packed 2>&1 | tee "$OUT/logs/tune-packed.log" | grep -v "^    SM "
    ;;
  decode16)
    # issue 16's closing call: the whole GPU suite while FlashInfer's JIT modules build on the
    # CPUs, then decode_bench (v6, v7, flashinfer, flashinfer_cc at the nine shapes)
    stamp decode16
    P=/tmp/peers
    peers_pid=""
    if ls peers-kit/flashinfer-*-trimmed.tar.xz > /dev/null 2>&1; then
      ( peers_install $P > "$OUT/logs/d16-peers.log" 2>&1; echo "peers_install rc $?" >> "$OUT/logs/d16-peers.log" ) &
      peers_pid=$!
    fi
    timeout 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfE --tb=line > "$OUT/logs/d16-tests.log" 2>&1
    echo "GPU tests: rc $?"; tail -8 "$OUT/logs/d16-tests.log"
    [ -n "$peers_pid" ] && { wait $peers_pid; tail -2 "$OUT/logs/d16-peers.log"; }
    stamp "decode16 bench"
    D7_BUDGET=${D7_BUDGET:-560} decode_bench d16 "$peers_pid"
    ;;
  merge)
    stamp merge
    # v7's merges in a kernel of their own against the fused last-CTA merge (issue 16, NOTES
    # item 95): kernels/scripts/tune_v5.py --merge first (b1, b4, ragged, groups of 8; fp16 and fp8;
    # one process, each pair fused then kernel), then the GPU tests of both, then memcheck of
    # the merge kernel on v7's edge shapes -> logs/merge-*, logs/tune-merge.log
    timeout 240 python3 kernels/scripts/tune_v5.py --merge 2>&1 | tee "$OUT/logs/tune-merge.log" | grep -v "^    SM "
    stamp "merge tests"
    timeout 200 python3 -m pytest -c kernels/pyproject.toml -m gpu -q -p no:cacheprovider kernels/tests/test_gpu_kernels.py -k "merge_kernel_or_fused" \
      -rfE --tb=line > "$OUT/logs/merge-tests.log" 2>&1
    echo "merge tests: rc $?"; tail -6 "$OUT/logs/merge-tests.log"
    stamp "merge memcheck"
    SAN=$(ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
    timeout 90 "${SAN:-compute-sanitizer}" --tool memcheck --print-limit 5 python3 kernels/scripts/sanitize_fast.py --v7 \
      --merge-kernel > "$OUT/logs/sanitize-merge.log" 2>&1
    echo "merge memcheck: rc $?"; tail -12 "$OUT/logs/sanitize-merge.log"
    ;;
  flash5)
    # wgmma2 as shipped with the diet (NOTES items 85-87): every wgmma2 GPU test (no -x), then
    # paprof bench of wgmma2, cuDNN, SDPA flash and wgmma at the four issue shapes (a second
    # process for the spread; run flashship after it for the ncu runs) -> logs/flash5-*
    stamp flash5
    timeout 240 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_gpu_flash.py -k wgmma2 -q -p no:cacheprovider -rfEs \
      --tb=short > "$OUT/logs/flash5-tests.log" 2>&1
    echo "wgmma2 tests: rc $?"
    grep -E "^(FAILED|ERROR)|passed|failed|skipped" "$OUT/logs/flash5-tests.log" | tail -15
    stamp flash5 bench
    flash_bench flash5 60 wgmma2 sdpa_cudnn sdpa_flash wgmma
    ;;
  flashship)
    stamp flashship
    # flash_fwd's Hopper kernels under ncu at the issue's shape (bf16 b4 h32 s8192 d128),
    # cuDNN's beside them -> $OUT/flashship.tar.xz (examples/h200-flash_fwd)
    rm -rf /tmp/flashship
    for v in wgmma2 sdpa_cudnn; do
      start=$(date +%s)
      timeout 150 python3 -m paprof run --family flash_fwd --variant "$v" \
        --shape batch=4,q_heads=32,seq_q=8192,head_dim=128,dtype=bf16 --runs /tmp/flashship 2>&1 | tail -4 | tee -a "$OUT/logs/flashship.log"
      echo "paprof run $v: rc ${PIPESTATUS[0]} $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/flashship.log"
    done
    python3 -m paprof table /tmp/flashship 2>&1 | tail -6
    (cd /tmp && pack flashship flashship)
    ;;
  fp8runs)
    stamp fp8runs
    # v7 under ncu with fp8 and fp16 caches at b64 (no split) and b1 (split): what the fp8
    # step loses against a pure read, from counters (issue 16) -> $OUT/fp8runs.tar.xz
    rm -rf /tmp/fp8runs
    for shape in "$MAIN,dtype=fp8" "$MAIN,dtype=fp16" "batch=1,context=131072,dtype=fp8" "batch=1,context=131072,dtype=fp16"; do
      start=$(date +%s)
      timeout 150 python3 -m paprof run --family paged_decode --variant v7 --shape "$shape" --runs /tmp/fp8runs 2>&1 | tail -4 | tee -a "$OUT/logs/fp8runs.log"
      echo "paprof run v7 $shape: rc ${PIPESTATUS[0]} $(( $(date +%s) - start )) s wall" | tee -a "$OUT/logs/fp8runs.log"
    done
    python3 -m paprof table /tmp/fp8runs > "$OUT/logs/fp8runs-table.txt" 2>&1; tail -12 "$OUT/logs/fp8runs-table.txt"
    python3 -m paprof table --format csv /tmp/fp8runs > "$OUT/logs/fp8runs-table.csv" 2>&1
    (cd /tmp && pack fp8runs fp8runs)
    ;;
  flashbig)
    stamp flashbig
    # flash_fwd's shipped runs at the issue's shape (bf16 b4 h32 s8192 d128, non-causal),
    # the handbook in fp32 at the same shape
    flash_runs flash-big "batch=4,q_heads=32,seq_q=8192,head_dim=128" flash-big 200
    pack flash-big flash-big
    ;;
  fair)
    # issue 26: FlashInfer timed as it runs (its own fp16 output, no cast of paprof's in the
    # step): its kit installed, the peers' GPU tests (an fp16 step is FlashInfer's kernels
    # only), then v6, v7 and both FlashInfer paths at issue 16's nine shapes
    stamp fair
    P=/tmp/peers
    ( peers_install $P > "$OUT/logs/fair-peers.log" 2>&1; echo "peers_install rc $?" >> "$OUT/logs/fair-peers.log" )
    tail -2 "$OUT/logs/fair-peers.log"
    peers_env $P
    timeout 120 python3 -m pytest -c kernels/pyproject.toml -m gpu kernels/tests/test_peers.py -q -p no:cacheprovider -rfE --tb=line \
      > "$OUT/logs/fair-peer-tests.log" 2>&1
    echo "peer tests: rc $?"; tail -4 "$OUT/logs/fair-peer-tests.log"
    stamp "fair bench"
    D7_BUDGET=${D7_BUDGET:-540} decode_bench fair yes
    ;;
  *) echo "unknown stage $stage"; exit 2;;
  esac
done
stamp done
(cd "$OUT" && tar cf logs.tar logs && rm -rf logs)
