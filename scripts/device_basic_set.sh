#!/usr/bin/env bash
# Reports of ncu's basic set (ncu without --set: no stall, scheduler or instruction
# counters), as a user who never heard of paprof would write them: a plain CUDA program
# (scripts/basic_set_pairs.cu, two of the zoo's pairs) under `ncu --set basic`, one report
# a kernel. From the repository root, on the GPU machine:
#   bash scripts/device_basic_set.sh
# Writes $OUT/basic-set.tar.gz (the four reports and ncu's logs); tests/data/basic-set
# holds them (tests/test_basic_set_reports.py). About 30 s.
set -u
OUT=${OUT:-/tmp/paprof-out}
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
DIR=$(mktemp -d /tmp/basic-set-XXXXXX)/basic-set
mkdir -p "$OUT" "$DIR"
nvcc -arch=sm_90 -o "$DIR/../pairs" scripts/basic_set_pairs.cu || exit 1
"$NCU" --version | tail -1 | tee "$DIR/ncu-version.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$DIR/gpu.txt"
for k in uncoalesced_slow uncoalesced_fast bank_conflicts_slow bank_conflicts_fast; do
  timeout 120 "$NCU" --set basic --clock-control none -k "regex:^zoo_${k}\$" -o "$DIR/$k" "$DIR/../pairs" \
    > "$DIR/$k.ncu.log" 2>&1
  echo "$k: rc $?"; tail -2 "$DIR/$k.ncu.log"
done
tar czf "$OUT/basic-set.tar.gz" -C "$(dirname "$DIR")" basic-set && ls -la "$OUT"
