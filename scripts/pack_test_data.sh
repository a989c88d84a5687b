#!/usr/bin/env bash
# Re-make the recorded runs of tests/data from the ones shipped in examples/
# (tests/data/README.md says what each archive holds and where the runs come from):
#   bash scripts/pack_test_data.sh
# The archives are deterministic: the same examples/ give the same bytes (names sorted,
# mtime, owner and group fixed; xz single-threaded).
set -euo pipefail
cd "$(dirname "$0")/../examples"
pack() {
    local out="../tests/data/$1"
    shift
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$@" | xz -9e -T1 > "$out"
    echo "$out: $(wc -c < "$out") bytes"
}
pack h200-paged_decode.tar.xz h200/nvidia-h200 h200-source/nvidia-h200 \
    sweeps/h200-profile sweeps/h200-bench sweeps/h200-bench.regime.json
flash=h200-flash_fwd/nvidia-h200/flash_fwd
pack h200-flash_fwd.tar.xz $flash/handbook $flash/mma $flash/sdpa_cudnn $flash/wgmma2
