#!/usr/bin/env bash
# Candidate default presets, timed on the GPU machine (issue 40, point 2): the shipped
# chain (`paprof run --family paged_decode --variant all`) under the default, `tables` and
# the candidates of scripts/preset_probe.py, one store each, on one warm machine (a
# `paprof bench` first builds every variant, so no run pays the compiles); then the
# baseline alone under `basic` and under basic plus one more section at a time (which
# section costs the replay). Run from the repository root:
#   bash scripts/device_presets.sh
# PRESETS (default "default tables lean2 m3"), PROBES (default: none, i.e. basic itself,
# then the five sections basic leaves out), BUDGET (s, default 520). Out:
# $OUT/presets.log, $OUT/presets-logs.tar.gz (logs, times.txt), $OUT/presets-<name>.tar.gz
# (each store: reports and records).
set -uo pipefail
OUT=${OUT:-/tmp/paprof-out}
W=/tmp/presets-work
rm -rf "$W"; mkdir -p "$OUT" "$W/logs"
exec > >(tee -a "$OUT/presets.log") 2>&1
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > "$W/logs/pip.log" 2>&1 || echo "pip install failed"
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
BUDGET=${BUDGET:-520}
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$(date +%s.%N)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
"$NCU" --version | tail -1

start=$(date +%s.%N)
timeout "$(left)" python3 -m paprof bench --family paged_decode --variant all > "$W/logs/bench.log" 2>&1
echo "bench (builds): rc $?, $(secs "$start") s" | tee -a "$W/times.txt"

for p in ${PRESETS:-default tables lean2 m3}; do
  [ "$(left)" -lt 40 ] && { echo "$p: no time left" | tee -a "$W/times.txt"; continue; }
  start=$(date +%s.%N)
  timeout "$(left)" python3 scripts/preset_probe.py run --family paged_decode --variant all \
    --preset "$p" --runs "$W/runs-$p" --timings --wide > "$W/logs/run-$p.log" 2>&1
  echo "run --variant all --preset $p: rc $?, $(secs "$start") s wall" | tee -a "$W/times.txt"
  tail -4 "$W/logs/run-$p.log"
done

# the baseline alone under basic and basic with one more section each
for sec in ${PROBES:-none InstructionStats MemoryWorkloadAnalysis_Tables MemoryWorkloadAnalysis_Chart SpeedOfLight_RooflineChart SpeedOfLight_HierarchicalTensorRooflineChart}; do
  [ "$(left)" -lt 30 ] && { echo "probe $sec: no time left" | tee -a "$W/times.txt"; continue; }
  p=basic+$sec; [ "$sec" = none ] && p=basic
  start=$(date +%s.%N)
  timeout "$(left)" python3 scripts/preset_probe.py run --family paged_decode --variant baseline \
    --preset "$p" --runs "$W/probe-runs" --force --timings --wide > "$W/logs/probe-$sec.log" 2>&1
  echo "probe baseline $p: rc $?, $(secs "$start") s wall; $(grep -i 'replay' "$W/logs/probe-$sec.log" | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a "$W/times.txt"
done

echo "== times"; cat "$W/times.txt"
tar czf "$OUT/presets-logs.tar.gz" -C "$W" logs times.txt gpu.txt
for p in ${PRESETS:-default tables lean2 m3}; do
  [ -d "$W/runs-$p" ] && tar czf "$OUT/presets-$p.tar.gz" -C "$W" "runs-$p"
done
ls -la "$OUT"
