#!/usr/bin/env bash
# Where `paprof run --variant all` spends its time, before and after the fixed costs are
# paid once (issue 40, point 2), on the GPU machine in ONE call. From the repository root:
#   bash scripts/device_phases.sh
# On the same kernels (FAMILY, default paged_decode, every variant, its default shape), one
# after the other, every ncu call with --clock-control none:
#   new   paprof run --variant all --timings          (cold caches: NVRTC, nvcc)
#   tables the same with --preset tables (every section whole, the default before
#         2026-12-07; caches warm from `new`)
#   old   the same with PAPROF_RUN_ALONE=1: each variant checked, timed and hashed in its
#         own launcher process, as paprof run did before (cold caches of its own)
#   basic, full   ncu --set basic / --set full alone on the same launches (the launcher
#         under ncu with the same NVTX and kernel filters, each variant in turn)
# PARTS (default "new tables old raw") picks them; "again" repeats `new`, caches warm.
# then a side-by-side table (wall clock of each; each phase summed over the variants; each
# variant's part, replay passes) and a check that old, new and tables name the same causes,
# limits and ncu estimates (`paprof compare --json` of each store: the decomposition's
# terms in order, the bottleneck after each step, the rules of the next-move line).
# Time-boxed for 8 minutes on an H100: no part starts past DEADLINE (420 s) and each part's
# timeout ends by it; the raw ncu runs stop at the deadline (the table says which ran).
# Writes $OUT/phases-summary.txt, $OUT/phases.log and $OUT/phases.tar.gz (the stores'
# sidecars and ncu logs, the --timings output, the compare JSONs; no .ncu-rep).
set -u
OUT=${OUT:-/tmp/paprof-out}
ROOT=$PWD
W=${PHASES_DIR:-/tmp/paprof-phases}
rm -rf "$W"
mkdir -p "$OUT" "$W/logs" "$W/raw"
LOG=$W/logs/phases.log
exec > >(tee -a "$LOG") 2>&1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=160
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels > /dev/null 2>&1 ||
  echo "$0: pip install -e . -e ./kernels failed: the lab's families will not be found" >&2
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
[ -n "$NCU" ] && export PATH="$(dirname "$NCU"):$PATH"
FAMILY=${FAMILY:-paged_decode}
t0=$(date +%s)
DEADLINE=${DEADLINE:-420}
stamp() { echo; echo "=== $* ($(date -u +%H:%M:%S), +$(( $(date +%s) - t0 )) s)"; }
cap() { local left=$(( DEADLINE - ($(date +%s) - t0) )); [ "$left" -lt 1 ] && left=1; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }

stamp "device_phases.sh: $FAMILY, every variant"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
echo "ncu: ${NCU:-none} $("${NCU:-ncu}" --version 2>/dev/null | tail -1)"
echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)  cores: $(nproc)"
git log -1 --format='commit %h %s' 2>/dev/null || cat .paprof-commit 2>/dev/null

# run NAME CACHE BOX [paprof run options...]: one paprof run of every variant, its wall clock
run() {
  local name=$1 cache=$2 box=$3; shift 3
  if [ "$(cap 30)" -lt 30 ]; then echo "$name: skipped, past the deadline"; echo "$name skipped" >> "$W/walls.txt"; return; fi
  stamp "$name: paprof run --family $FAMILY --variant all $*"
  local start; start=$(date +%s.%N)
  CUPY_CACHE_DIR=$W/cache-$cache/cupy PAPROF_CUBIN_CACHE=$W/cache-$cache/cubin \
    timeout "$(cap "$box")" python3 -m paprof run --family "$FAMILY" --variant all --runs "$W/runs-$name" \
      --clock-control none --force --timings "$@" > "$W/logs/run-$name.txt" 2>&1
  local rc=$?
  local wall; wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  echo "$name rc=$rc wall=$wall" | tee -a "$W/walls.txt"
  tail -n 40 "$W/logs/run-$name.txt"
}

PARTS=" ${PARTS:-new tables old raw} "
run new new 170
[[ $PARTS == *" again "* ]] && run again new 110  # the same run, caches warm: the noise
[[ $PARTS == *" tables "* ]] && run tables new 110 --preset tables
if [[ $PARTS == *" old "* ]]; then
  export PAPROF_RUN_ALONE=1  # each variant alone: paprof run as it was
  run old old 220
  unset PAPROF_RUN_ALONE
fi

stamp "raw ncu: --set basic, then --set full, on the same launches"
cat > "$W/rawncu.py" <<'EOF'
"""ncu --set basic / full alone on each variant's launcher (the launches paprof profiles)."""
import json, os, subprocess, sys, time
from pathlib import Path
from paprof import registry
from paprof.measure import argv as A, presets
from paprof.measure.ncu_log import NcuLog

which, work, deadline = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
presets.PRESETS[f"set-{which}"] = presets.Preset(f"set-{which}", section_set=which)
variants = registry.resolve(("all",), os.environ["FAMILY"])
family = registry.family_of(variants[0])
params = family.parse(None)
rows = []
for v in variants:
    left = deadline - time.time()
    side = next((work / "runs-new").rglob(f"{v.id}/*.json"), None)
    kernels = len(json.loads(side.read_text()).get("profiled_kernels") or []) if side else 0
    if left < 20 or not side:
        rows.append({"variant": v.id, "preset": which, "skipped": "deadline" if side else "no run"})
        continue
    settings = A.NcuSettings(ncu=os.environ["NCU"], preset=f"set-{which}", clock_control="none",
                             kernels_per_launch=kernels or None)
    report = work / "raw" / f"{which}-{v.id}.ncu-rep"
    cmd = A.ncu_argv(settings, v, params, report, work / "raw" / f"{which}-{v.id}.result.json")
    t = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=left - 5)
        out, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as err:
        out, rc = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or ""), "timeout"
    wall = time.time() - t
    log = NcuLog()
    for line in out.replace("\r", "\n").splitlines():
        log.add_line(line)
    (work / "logs" / f"raw-{which}-{v.id}.ncu.log").write_text(out)
    passes = [k.passes for k in log.kernels if k.passes is not None]
    rows.append({"variant": v.id, "preset": which, "rc": rc, "wall_s": round(wall, 2),
                 "passes": sum(passes) if passes else None, "kernels": len(log.kernels)})
    report.unlink(missing_ok=True)
    print(json.dumps(rows[-1]), flush=True)
with open(work / "raw.jsonl", "a") as fh:
    for r in rows:
        fh.write(json.dumps(r) + "\n")
EOF
for which in basic full; do
  [[ $PARTS == *" raw "* ]] || break
  now=$(date +%s)
  FAMILY=$FAMILY CUPY_CACHE_DIR=$W/cache-new/cupy PAPROF_CUBIN_CACHE=$W/cache-new/cubin \
    timeout "$(cap 200)" python3 "$W/rawncu.py" "$which" "$W" "$(( t0 + DEADLINE ))"
  echo "raw $which: rc $?, $(( $(date +%s) - now )) s"
done

stamp "causes: paprof compare --json of each store"
VARIANTS=$(python3 -c "
from paprof import registry
print(' '.join(v.id for v in registry.resolve(('all',), '$FAMILY')))")
for name in old new again tables; do
  [ -d "$W/runs-$name" ] || continue
  ids=$(for v in $VARIANTS; do ls "$W/runs-$name"/*/"$FAMILY/$v"/*.json > /dev/null 2>&1 && printf '%s ' "$v"; done)
  timeout "$(cap 60)" python3 -m paprof compare $ids --runs "$W/runs-$name" --json "$W/logs/compare-$name.json" \
    --force > "$W/logs/compare-$name.txt" 2>&1
  echo "compare $name ($ids): rc $?"
done

stamp "summary"
python3 - "$W" "$FAMILY" <<'EOF' | tee "$OUT/phases-summary.txt"
import json, re, sys
from pathlib import Path
from paprof import phases as ph
from paprof.read.record import RunRecord

work, family = Path(sys.argv[1]), sys.argv[2]
names = ["old", "new", "again", "tables"]
walls = {}
for line in (work / "walls.txt").read_text().splitlines() if (work / "walls.txt").exists() else []:
    bits = dict(b.split("=", 1) for b in line.split()[1:] if "=" in b)
    walls[line.split()[0]] = (bits.get("wall", "-"), bits.get("rc", "skipped"))
runs = {}
for name in names:
    recs = {}
    for side in sorted((work / f"runs-{name}").rglob("*.json")):
        rec = RunRecord.read(side)
        if rec is not None and rec.phases:
            recs[rec["variant"]] = rec
    runs[name] = recs
raw = [json.loads(l) for l in (work / "raw.jsonl").read_text().splitlines()] if (work / "raw.jsonl").exists() else []

def cell(v, fmt="{:.1f}"):
    return fmt.format(v) if isinstance(v, (int, float)) else "-" if v is None else str(v)

print(f"paprof run --family {family} --variant all, wall clock (s) and exit status")
for name in names:
    wall, rc = walls.get(name, ("-", "not run"))
    print(f"  {name:5} {wall:>8}  rc {rc}  ({len(runs[name])} variants recorded)")
for which in ("basic", "full"):
    rows = [r for r in raw if r["preset"] == which]
    done = [r for r in rows if "wall_s" in r]
    print(f"  ncu --set {which:5} alone: {sum(r['wall_s'] for r in done):8.1f} s over {len(done)} of "
          f"{len(rows)} variants (skipped: {', '.join(r['variant'] for r in rows if 'skipped' in r) or 'none'})")
print()
print("each phase summed over the variants (s; a shared phase once, the SASS hashes beside it left out)")
totals = {n: ph.totals([r.phases for r in runs[n].values()]) for n in names}
order = ph.ordered_names([[ph.Phase(k, 0) for k in t] for t in totals.values()])
print(f"  {'phase':16}" + "".join(f"{n:>9}" for n in names))
for k in order:
    print(f"  {k:16}" + "".join(f"{cell(totals[n].get(k, '-')):>9}" for n in names))
print(f"  {'sum':16}" + "".join(f"{cell(sum(totals[n].values())):>9}" for n in names))
print(f"  {'(SASS beside)':16}" + "".join(
    f"{cell(ph.overlapped([r.phases for r in runs[n].values()])):>9}" for n in names))
print()
print("each variant: its part (s) | replay passes | ncu start + replay + end (s); raw ncu --set basic / full: wall (passes)")
variants = list(dict.fromkeys(v for n in names for v in runs[n]))
print(f"  {'variant':9}" + "".join(f"{n:>22}" for n in names) + f"{'basic':>16}{'full':>16}")
for v in variants:
    line = f"  {v:9}"
    for n in names:
        rec = runs[n].get(v)
        if rec is None:
            line += f"{'-':>22}"
            continue
        own = sum(p.own_seconds for p in rec.phases)
        passes = next((p.passes for p in rec.phases if p.name == ph.REPLAY), None)
        ncu = sum(p.seconds for p in rec.phases if p.name in (ph.NCU_START, ph.REPLAY, ph.NCU_END))
        line += f"{cell(own):>8} |{cell(passes, '{}'):>4} |{cell(ncu):>6}"
    for which in ("basic", "full"):
        r = next((r for r in raw if r["preset"] == which and r["variant"] == v), {})
        line += f"{(cell(r['wall_s']) + ' (' + cell(r.get('passes'), '{}') + ')') if 'wall_s' in r else r.get('skipped', '-'):>16}"
    print(line)
print()
print("the stories: each step's decomposition terms, bottleneck after it, next-move rules")

def story(name):
    path = work / "logs" / f"compare-{name}.json"
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    out = {}
    for t in doc["transitions"]:
        rules = re.findall(r"(?:: |; )([^;:]+?), up to", t.get("next_move") or "")
        out[(t["before"], t["after"])] = ([c["term"] for c in t["causes"]], t["bottleneck_after"], rules)
    return out

stories = {n: story(n) for n in names}
first = "old" if stories["old"] is not None else "new"  # without `old`, against `new`
base = stories[first]
for n in names[names.index(first) + 1:]:
    got = stories[n]
    if base is None or got is None:
        print(f"  {first} vs {n}: not compared (a store has no compare)")
        continue
    same = [k for k in base if got.get(k) == base[k]]
    print(f"  {first} vs {n}: {len(same)} of {len(base)} steps name the same terms, limit and rules")
    for k in base:
        if got.get(k) != base[k]:
            print(f"    {k[0]} -> {k[1]}: {first} {base[k]}\n    {' ' * len(k[0] + k[1])}      {n} {got.get(k)}")
EOF

stamp "pack"
( cd "$W" && find . -path ./cache-old -prune -o -path ./cache-new -prune -o \
    \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.jsonl' \) -print |
    tar czf "$OUT/phases.tar.gz" -T - ); echo "tar rc $?"
cp "$LOG" "$OUT/phases.log"
ls -la "$OUT"
