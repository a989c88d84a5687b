#!/usr/bin/env bash
# A program by its top kernels, on the GPU machine (issue 40, point 3): GPT blocks' forward
# and backward in bf16 (examples/programs/gpt_block.py), eager against torch.compile,
# profiled by `paprof run --cmd` with the top-kernel default (a timing pass, then the
# kernels that make up 90 % of the step) and with --all (every kernel), each pair
# compared; every command timed (wall clock) and the two comparisons' top causes checked
# against each other. Run from the repository root:
#   bash scripts/device_program.sh
# GPT_ARGS (default "--layers 2 --steps 1") goes to every gpt_block.py run; LIMIT_* (s)
# time-box each step (default: truth 70, top runs 70 and 60, --all runs 120 and 60,
# compares 25 each), and BUDGET (default 450 s) all of them together: a step gets at most
# what is left of it, so the script ends within 8 minutes on any GPU. ROUTES (default "top
# all") picks the routes run: "top" or "all" alone splits them over two calls; any other
# NAME is the top route under `--preset NAME` (LIMIT_NAME_EAGER ...; with PAPROF="python3
# scripts/preset_probe.py" its candidate presets too), its causes set beside the top
# route's in the summary. EXTRA (default empty) is added to
# every `paprof run` (EXTRA="--preset basic" ROUTES="top all": both routes under basic).
# Everything is logged to $OUT/program.log; the reports, explanations, logs and a
# summary.json go into $OUT/program-results.tar.gz, the run stores into
# $OUT/program-runs.tar.gz (split into 15 MiB parts .00, .01 ... if larger; the --all
# reports are left out when they would not fit in 4 parts).
set -u
OUT=${OUT:-/tmp/paprof-out}
ROOT=$PWD
W=${PROGRAM_WORK:-/tmp/program-work}
rm -rf "$W"
mkdir -p "$OUT" "$W/logs"
exec > >(tee -a "$OUT/program.log") 2>&1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
[ -n "$NCU" ] && export PATH="$(dirname "$NCU"):$PATH"
GPT_ARGS=${GPT_ARGS:---layers 2 --steps 1}
BUDGET=${BUDGET:-450}
PROG="python3 $ROOT/examples/programs/gpt_block.py"
PAPROF=${PAPROF:-python3 -m paprof}  # python3 scripts/preset_probe.py: its candidate presets too
t0=$(date +%s)
printf 'step\trc\tseconds\n' > "$W/times.tsv"

stamp() { echo; echo "=== $* ($(date -u +%H:%M:%S), +$(( $(date +%s) - t0 )) s)"; }

# timed NAME LIMIT COMMAND...: run it under `timeout LIMIT`, log to logs/NAME.log, record
# its exit status and wall seconds in times.tsv
timed() {
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - t0) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 0 ]; then
    printf '%s\t%s\t%s\n' "$name" "budget" "0" >> "$W/times.tsv"; echo "$name: no time left"; return
  fi
  stamp "$name (time-box ${limit} s)"
  local start=$(date +%s.%N)
  timeout "$limit" "$@" > "$W/logs/$name.log" 2>&1
  local rc=$?
  local secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
  printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >> "$W/times.tsv"
  tail -6 "$W/logs/$name.log"
  echo "$name: rc $rc, $secs s"
}

stamp "device_program.sh ($GPT_ARGS)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
echo "ncu: ${NCU:-none} $("${NCU:-ncu}" --version 2>/dev/null | tail -1)"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1

# the ground truth, and the Inductor cache warmed for the runs under ncu
timed truth "${LIMIT_TRUTH:-70}" $PROG both --timing-iters 20 --json "$W/times.json" $GPT_ARGS

for how in ${ROUTES:-top all}; do
  case $how in all) flag="--all" ;; top) flag="" ;; *) flag="--preset $how" ;; esac
  for mode in eager compiled; do
    limit_var="LIMIT_${how^^}_${mode^^}"
    case $how-$mode in all-eager) default=120 ;; *-eager) default=70 ;; *) default=60 ;; esac
    timed "run-$how-$mode" "${!limit_var:-$default}" $PAPROF run --cmd "$PROG $mode --timing-iters 0 $GPT_ARGS" \
      --nvtx-range step --name "$mode" --runs "$W/runs-$how" --force $flag ${EXTRA:-}
  done
  timed "compare-$how" "${LIMIT_COMPARE:-25}" $PAPROF compare eager compiled --runs "$W/runs-$how" \
    --markdown "$W/compare-$how.md" --json "$W/compare-$how.json" --out "$W/compare-$how.html" --force
done

stamp "summary: the top causes both ways"
ROUTES_RUN="${ROUTES:-top all}" python3 - "$W" <<'EOF'
import csv, json, os, sys
from pathlib import Path

w = Path(sys.argv[1])
summary = {"times": {r["step"]: {"rc": r["rc"], "seconds": float(r["seconds"])}
                     for r in csv.DictReader(open(w / "times.tsv"), delimiter="\t")}}
try:
    summary["truth"] = json.loads((w / "times.json").read_text())
except (OSError, ValueError):
    summary["truth"] = None
t = summary["times"]
ROUTES = tuple(dict.fromkeys(("top", "all", *os.environ["ROUTES_RUN"].split())))
for how in ROUTES:
    summary[f"{how}_seconds_typed_to_answer"] = sum(t.get(k, {}).get("seconds", 0) for k in
                                                    (f"run-{how}-eager", f"run-{how}-compiled", f"compare-{how}"))
    try:
        doc = json.loads((w / f"compare-{how}.json").read_text())
    except (OSError, ValueError) as err:
        summary[how] = {"error": str(err)}
        continue
    (step,) = doc["transitions"][:1] or [{}]
    summary[how] = {
        "headline": step.get("headline"), "speedup": step.get("speedup"), "cause": step.get("cause"),
        "causes": [c["term"] for c in step.get("causes") or []][:3],
        "bottlenecks": [step.get("bottleneck_before"), step.get("bottleneck_after")],
        "program": [{"label": r["label"], "step_us": r["step_us"], "kernels": len(r["kernels"]),
                     "skipped": r["skipped"]} for r in (doc.get("program") or {}).get("runs", [])],
    }
    for side in sorted((w / f"runs-{how}").rglob("*.json")):
        chosen = json.loads(side.read_text()).get("selection")
        if chosen:
            summary[how].setdefault("selection", {})[side.parent.name] = {
                k: chosen.get(k) for k in ("profiled", "skipped", "steps", "launches", "time_us", "seconds",
                                           "processes")}
top, every = summary.get("top", {}), summary.get("all", {})
told = bool(top.get("causes")) and bool(every.get("causes"))  # null: a side told no cause
summary["same_top_cause"] = top["causes"][0] == every["causes"][0] if told else None
summary["same_causes_order"] = top["causes"] == every["causes"] if told else None
for how in ROUTES[2:]:  # a lighter preset against the default, both by top kernels
    other = summary.get(how, {})
    if top.get("causes") and other.get("causes"):
        summary[f"{how}_same_causes_order_as_top"] = top["causes"] == other["causes"]
(w / "summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps({k: v for k, v in summary.items() if k.endswith(("typed_to_answer", "_top", "order", "cause"))
                  or k == "times"}, indent=1))
for how in ROUTES:
    print(how, json.dumps({k: summary.get(how, {}).get(k) for k in ("headline", "causes", "bottlenecks")}))
EOF

stamp "pack"
cp "$OUT/program.log" "$W/logs/" 2>/dev/null
tar czf "$OUT/program-results.tar.gz" -C "$W" --exclude 'runs-*' . ; echo "results tar rc $?"
RUNS="$OUT/program-runs.tar.gz"
tar czf "$RUNS" -C "$W" $(cd "$W" && ls -d runs-* 2>/dev/null)
if [ "$(stat -c %s "$RUNS")" -gt $(( 60 * 1024 * 1024 )) ]; then
  echo "the run stores are over 60 MiB: the --all reports left out"
  tar czf "$RUNS" -C "$W" --exclude 'runs-all/*.ncu-rep' --exclude 'runs-all/*/*/*/*.ncu-rep' $(cd "$W" && ls -d runs-*)
fi
if [ "$(stat -c %s "$RUNS")" -gt $(( 15 * 1024 * 1024 )) ]; then  # cat program-runs.tar.gz.* | tar xz
  split -b 15m -d "$RUNS" "$RUNS." && rm -f "$RUNS"
fi
ls -la "$OUT"
stamp "done"
