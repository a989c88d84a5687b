#!/usr/bin/env bash
# The tool and its kernel lab as two installed packages on the GPU machine, in ONE device
# call, and the small reports of tests/data/small:
#   bash scripts/device_split.sh
# 1. install paprof and the lab (kernels/) side by side, offline; paprof list
# 2. paprof run by an id unique across the installed families (v3, no --family) and by
#    family/id (paged_decode/v6), then compare them: the code path in the family's words
# 3. the GPU tests of both packages
# 4. the README family (docs/your-kernels.md: vadd) run at n=2^20 with one profiled launch
#    a variant (on the H200, 2026-12-03: 842 KB a report at the default preset, not yet
#    small enough to stand in for examples/ in the unit tests)
# Everything lands in $OUT/split.tar.gz.
set -u
OUT=${OUT:-/tmp/paprof-out}
W=/tmp/split
rm -rf "$W" && mkdir -p "$OUT" "$W/logs"
exec > >(tee -a "$W/logs/split.log") 2>&1
export PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)
export NCU PATH="$(dirname "${NCU:-/usr/bin/ncu}"):$PATH"
ROOT=$PWD

echo "== 1. install"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kernels 2>&1 | tail -3
python3 -m pip list 2>/dev/null | grep -i paprof
paprof list

echo "== 2. runs"
SHAPE=batch=8,context=2048
timeout 200 paprof run --variant v3 --shape $SHAPE --runs "$W/runs" --profiled-launches 1; echo "run v3 rc $?"
timeout 200 paprof run --variant paged_decode/v6 --shape $SHAPE --runs "$W/runs" --profiled-launches 1; echo "run v6 rc $?"
timeout 100 paprof run --variant handbook --shape $SHAPE --runs "$W/runs"; echo "run handbook (ambiguous) rc $?"
timeout 100 paprof compare v3 v6 --runs "$W/runs" --out "$W/v3-v6.html" --markdown "$W/v3-v6.md"; echo "compare rc $?"
grep -n "v6 " "$W/v3-v6.md" | head -8

echo "== 3. GPU tests"
timeout 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider 2>&1 | tail -6
(cd kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tail -8)

echo "== 4. small reports"
python3 scripts/readme_example.py "$W/readme" > /dev/null
(cd "$W/readme/my-kernels" &&
  timeout 200 paprof run --family vadd --variant all --shape n=1048576 --profiled-launches 1 \
    --runs "$W/small"; echo "small runs rc $?")
find "$W/small" -type f -exec ls -l {} \;
(cd /tmp && tar czf "$OUT/split.tar.gz" split)
