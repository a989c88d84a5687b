#!/usr/bin/env bash
# What each part of the default preset costs on one long kernel (issue 40, point 2): the
# paged_decode baseline (52 ms on an H100) profiled alone by `paprof run --timings`, then
# the same launch under ncu with the preset's sections changed one way at a time, each
# timed (wall clock) with its replay passes. Run on the GPU machine from the repository root:
#   bash scripts/device_sections.sh          (-> $OUT/sections.tar.gz, summary in sections.txt)
# VARIANTS (default "baseline v1") are the variants measured, HOWS the ways (default: all
# eight below); BUDGET (s, default 240) bounds the whole.
set -uo pipefail
OUT=${OUT:-/tmp/paprof-out}
W=$OUT/sections
mkdir -p "$W"
export PYTHONPATH=$PWD:$PWD/kernels PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > "$W/pip.log" 2>&1 || echo "pip install failed"
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
BUDGET=${BUDGET:-240}
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$W/gpu.txt"
for v in ${VARIANTS:-baseline v1}; do
  start=$(date +%s.%N)
  timeout "$(left)" python3 -m paprof run --family paged_decode --variant "$v" --runs /tmp/sec-runs --timings --force --wide > "$W/run-$v.log" 2>&1
  echo "paprof run --variant $v: rc $?, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s wall" | tee -a "$W/sections.txt"
  for how in ${HOWS:-default no-InstructionStats no-Tables no-both only-opcode only-spilling only-InstructionStats only-duration}; do
    [ "$(left)" -lt 20 ] && { echo "$v $how: no time left" | tee -a "$W/sections.txt"; continue; }
    python3 - "$how" "$v" > "$W/$v-$how.cmd" <<'PY'
import glob, json, shlex, sys
how, v = sys.argv[1:]
side = json.load(open(glob.glob(f"/tmp/sec-runs/*/paged_decode/{v}/*.json")[0]))
argv, out, i = side["command"], [], 0
sections = [argv[k + 1] for k, a in enumerate(argv) if a == "--section"]
drop = {"no-InstructionStats": {"InstructionStats"}, "no-Tables": {"MemoryWorkloadAnalysis_Tables"},
        "no-both": {"InstructionStats", "MemoryWorkloadAnalysis_Tables"}}.get(how, set())
only = {"only-opcode": ["--metrics", "sass__inst_executed_per_opcode"],
        "only-spilling": ["--metrics", "sass__inst_executed_register_spilling"],
        "only-InstructionStats": ["--section", "InstructionStats"],
        "only-duration": ["--metrics", "gpu__time_duration.sum"]}.get(how)
while i < len(argv):
    a = argv[i]
    if a in ("--section", "--metrics", "--set"):
        i += 2
        continue
    if a == "-o":
        out += [a, f"/tmp/sec-{v}-{how}.ncu-rep"]; i += 2; continue
    if a == "--result":
        out += [a, f"/tmp/sec-{v}-{how}.json"]; i += 2; continue
    if a == "--force-overwrite":
        out.append(a)
        out += only if only else [x for s in sections if s not in drop for x in ("--section", s)]
        i += 1
        continue
    out.append(a); i += 1
print(shlex.join(out))
PY
    start=$(date +%s.%N)
    timeout "$(left)" bash -c "$(cat "$W/$v-$how.cmd")" > "$W/$v-$how.log" 2>&1
    rc=$?
    echo "$v $how: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s wall, $(grep -o '[0-9]* passes' "$W/$v-$how.log" | tr '\n' ' ') $(grep -c 'taking more time' "$W/$v-$how.log") slow-launch warnings" | tee -a "$W/sections.txt"
  done
done
tar czf "$OUT/sections.tar.gz" -C "$OUT" sections
