#!/usr/bin/env bash
# The run record, the gate's noise rules and NVML on the GPU machine, in ONE device call:
#   bash scripts/device_gate.sh [STAGE ...]        (default: all stages below)
# Stages:
#   run        paprof run of v2 and v3 (the run record with its SASS hash and NVML's
#              environment), compare v2 v3 (--json), table of the store
#   gate       baseline update, then check --profile --profiled-launches 3 twice against it (the same
#              code: a timing change is noise), with --json/--markdown/--junit outputs
#   calibrate  paprof calibrate of v3 (3 A/A repeats under ncu), then check --calibration
#   bench      paprof bench of v2, v3 --json (NVML's view of the GPU in the record)
# nvidia-ml-py comes from ./wheels when carried (pip download nvidia-ml-py there).
# Everything lands in $OUT/gate.tar.gz.
set -u
# the kernel lab's families are found through its entry point: install it beside paprof
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > /dev/null 2>&1 ||
  echo "$0: pip install -e . -e ./kernels failed: the lab's families will not be found" >&2
OUT=${OUT:-/tmp/paprof-out}
LOGS=/tmp/gate
mkdir -p "$OUT" "$LOGS"
exec > >(tee -a "$LOGS/gate.log") 2>&1
export PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
if ls wheels/nvidia_ml_py-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/nvml wheels/nvidia_ml_py-*.whl
  export PYTHONPATH=$PWD:/tmp/nvml
else
  export PYTHONPATH=$PWD
fi
python3 -c "import pynvml; pynvml.nvmlInit(); print('NVML', pynvml.nvmlSystemGetDriverVersion())" 2>&1 | tail -1
t0=$(date +%s)
stamp() { echo "=== $* (+$(( $(date +%s) - t0 )) s)"; }
R=$LOGS/runs
SHAPE=batch=8,context=4096
for stage in ${*:-run gate calibrate bench}; do
  case $stage in
  run)
    stamp run
    timeout 240 python3 -m paprof run --variant v2 --variant v3 --shape $SHAPE --runs "$R" > "$LOGS/run.log" 2>&1
    echo "run rc $?"; tail -4 "$LOGS/run.log"
    python3 - "$R" <<'PY'
import json, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    d = json.loads(p.read_text())
    code, env = d.get("code") or {}, d.get("environment") or {}
    print(p.name, d.get("variant"), "schema", d.get("schema"), "code taken", code.get("taken"),
          "fingerprint", (code.get("fingerprint") or "")[:12], "why", code.get("why"),
          "| environment observed", env.get("observed"), "disturbed", env.get("disturbed"),
          "why", env.get("why"))
PY
    python3 -m paprof compare v2 v3 --runs "$R" --out "$LOGS/v2v3.html" --json "$LOGS/v2v3.json" 2>&1 | head -4
    python3 -m paprof table "$R" --per-variant 2>&1 | head -6
    ;;
  gate)
    stamp gate
    python3 -m paprof baseline update --runs "$R" --out "$LOGS/base.json" --force 2>&1 | tail -2
    for i in 1 2; do
      timeout 240 python3 -m paprof check --baseline "$LOGS/base.json" --runs "$R" --profile --profiled-launches 3 \
        --json "$LOGS/check$i.json" --markdown "$LOGS/check$i.md" --junit "$LOGS/check$i.xml" --force \
        > "$LOGS/check$i.log" 2>&1
      echo "check $i rc $?"; tail -12 "$LOGS/check$i.log"
    done
    ;;
  calibrate)
    stamp calibrate
    timeout 300 python3 -m paprof calibrate --family paged_decode --variant v3 --shape $SHAPE --repeats 3 \
      --out "$LOGS/calibration.json" --force > "$LOGS/calibrate.log" 2>&1
    echo "calibrate rc $?"; tail -6 "$LOGS/calibrate.log"
    timeout 240 python3 -m paprof check --baseline "$LOGS/base.json" --runs "$R" \
      --calibration "$LOGS/calibration.json" > "$LOGS/check-cal.log" 2>&1
    echo "check --calibration rc $?"; tail -6 "$LOGS/check-cal.log"
    ;;
  bench)
    stamp bench
    timeout 120 python3 -m paprof bench --variant v2 --variant v3 --shape $SHAPE --json > "$LOGS/bench.json" 2> "$LOGS/bench.log"
    echo "bench rc $?"; tail -3 "$LOGS/bench.log"
    python3 -c "import json; d=json.load(open('$LOGS/bench.json')); print({k: d[k] for k in d if 'environ' in k})" 2>&1 | cut -c1-600
    ;;
  *) echo "unknown stage $stage"; exit 2;;
  esac
done
stamp done
rm -rf "$R"/*/*/*/*.ncu-rep.tmp* 2>/dev/null
tar czf "$OUT/gate.tar.gz" -C /tmp gate && ls -la "$OUT/gate.tar.gz"
