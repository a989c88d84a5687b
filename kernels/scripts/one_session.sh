#!/usr/bin/env bash
# One ncu session for several variants (issue 40 point 2), measured on the GPU machine in
# ONE call:   bash kernels/scripts/one_session.sh        (-> $OUT/one-session.tar.xz)
# On the same GPU, in this order: `paprof run --family paged_decode --variant all` one ncu
# a variant (PAPROF_NCU_PER_VARIANT=1, as before) then one session, both --timings, under
# the default preset, then (time allowing) the same pair under $PRESET2 (default tables,
# every section whole, where the preset exists, else basic); the stories of both ways side by side (scripts/story_lines.py);
# then `ncu --set basic` and `ncu --set full` on the same launches of one variant (v3).
set -uo pipefail
OUT=${OUT:-/tmp/paprof-out}
W=$OUT/one-session
mkdir -p "$W"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > "$W/pip.log" 2>&1 || echo "pip install failed (PYTHONPATH used)"
export PYTHONPATH=$PWD:$PWD/kernels
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
BUDGET=${BUDGET:-470}
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$NCU" --version | tail -1; } > "$W/gpu.txt" 2>&1
cat "$W/gpu.txt"
P2=${PRESET2:-$(python3 -c "from paprof.measure.presets import PRESETS; print('tables' if 'tables' in PRESETS else 'basic')")}
one() {  # one(name, preset, per_variant): paprof run --variant all, timed
  local name=$1 preset=$2 per=$3 start rc
  rm -rf "/tmp/$name"
  start=$(date +%s.%N)
  PAPROF_NCU_PER_VARIANT=$per timeout "$(left)" python3 -m paprof run --family paged_decode --variant all \
    --preset "$preset" --runs "/tmp/$name" --timings > "$W/$name.log" 2>&1
  rc=$?
  echo "$name: preset $preset, per-variant=$per: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s wall" | tee -a "$W/summary.txt"
  sed -n '/all variants: phases/,$p' "$W/$name.log" >> "$W/summary.txt"
  grep -E "ncu: the shared|failed|error" "$W/$name.log" | head -5 >> "$W/summary.txt"
}
one old-default default 1
one new-default default 0
python3 scripts/story_lines.py /tmp/old-default /tmp/new-default > "$W/stories-default.txt" 2>&1; tail -3 "$W/stories-default.txt"
# ncu --set basic / full on the launches paprof profiles of v3 (its run's own command, set swapped)
if [ "$(left)" -gt 120 ]; then
  for set in basic full; do
    start=$(date +%s.%N)
    python3 - "$set" /tmp/old-default > "$W/ncu-$set.cmd" <<'PY'
import json, shlex, sys, glob
side = json.load(open(glob.glob(sys.argv[2] + "/*/paged_decode/v3/*.json")[0]))
argv = side["command"]
out, i = [], 0
while i < len(argv):
    a = argv[i]
    if a in ("--section", "--metrics", "--set"):
        i += 2; continue
    if a in ("-o", "--result"):
        out += [a, f"/tmp/ncu-{sys.argv[1]}" + (".ncu-rep" if a == "-o" else ".json")]; i += 2; continue
    if a == "--force-overwrite":
        out += [a, "--set", sys.argv[1]]; i += 1; continue
    out.append(a); i += 1
print(shlex.join(out))
PY
    timeout "$(left)" bash -c "$(cat "$W/ncu-$set.cmd")" > "$W/ncu-$set.log" 2>&1
    echo "ncu --set $set on v3's launches: rc $?, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s wall, $(grep -o '[0-9]* passes' "$W/ncu-$set.log" | tr '\n' ' ')" | tee -a "$W/summary.txt"
  done
fi
if [ "$(left)" -gt 150 ]; then
  one old-$P2 "$P2" 1
  one new-$P2 "$P2" 0
  python3 scripts/story_lines.py "/tmp/old-$P2" "/tmp/new-$P2" > "$W/stories-$P2.txt" 2>&1; tail -3 "$W/stories-$P2.txt"
fi
cat "$W/summary.txt"
(cd /tmp && tar cf - old-default new-default $(ls -d old-$P2 new-$P2 2>/dev/null) | xz -1 > "$W/runs.tar.xz")
(cd "$OUT" && tar cf - one-session | xz -1 > one-session.tar.xz && rm -rf one-session)
ls -la "$OUT"
