#!/usr/bin/env bash
# paprof.profile on the GPU machine (issue 39, point 1), in ONE call. From the repository root:
#   bash scripts/device_notebook.sh
# 1. env     GPU, ncu, torch, triton, nsight-python (if installed)
# 2. cell    docs/api.md's notebook cell (a Triton add at block 64 and 1024, n = 2^24) run as
#            a Python script in a fresh folder: its cause line, the report's variants, the
#            wall clock of the whole process (Python start, imports, the two runs under ncu,
#            the report); the HTML report -> $OUT/notebook-report.html
# 3. nsight  the same kernel at the same two configs under nsight-python
#            (@nsight.analyze.kernel + nsight.annotate), wall clock of the whole process, its
#            table; only where `import nsight` works (else one line saying it is not there)
# 4. tests   python3 -m pytest tests/test_profile_api.py -m gpu (the cell again, and the kernel
#            beside torch.add)
# At the END: the lines each cell has and the two wall clocks. Everything is logged to
# $OUT/notebook.log. About 1-2 min on an H100/H200 (four processes under ncu).
set -u
OUT=${OUT:-/tmp/paprof-out}
ROOT=$PWD
WORK=$(mktemp -d /tmp/paprof-notebook-XXXXXX)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/notebook.log") 2>&1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -f .paprof-commit ] && export PAPROF_GIT_COMMIT=$(cat .paprof-commit)
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
export NCU
[ -n "$NCU" ] && export PATH="$(dirname "$NCU"):$PATH"
stamp() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
now() { date +%s.%N; }
seconds() { python3 -c "print(f'{$2 - $1:.1f}')"; }

stamp "1. env"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
echo "ncu: ${NCU:-none} $("${NCU:-ncu}" --version 2>/dev/null | tail -1)"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1
if python3 -c "import nsight" 2>/dev/null; then
  HAVE_NSIGHT=1; python3 -c "import importlib.metadata as m; print('nsight-python', m.version('nsight-python'))" 2>&1 | tail -1
else
  HAVE_NSIGHT=0; echo "nsight-python: not installed here (import nsight fails): no side-by-side timing"
fi

stamp "2. cell: docs/api.md's paprof.profile cell as a script"
python3 - "$WORK/cell.py" <<'EOF'
import re, sys
page = open("docs/api.md").read()
(cell,) = [b for b in re.findall(r"```py\n(.*?)```", page, flags=re.S) if "paprof.profile(" in b]
open(sys.argv[1], "w").write(cell)
EOF
cat > "$WORK/after.py" <<EOF
exec(compile(open("$WORK/cell.py").read(), "$WORK/cell.py", "exec"))  # a file: inspect reads its source
print("headline:", report.steps.iloc[0].headline)
print(report.variants[["label", "shape", "duration_us", "bottleneck"]].to_string())
open("$OUT/notebook-report.html", "w").write(report.html)
EOF
cat "$WORK/cell.py"
start=$(now)
( cd "$WORK" && timeout 300 python3 after.py ) 2>&1 | tail -30
echo "cell rc ${PIPESTATUS[0]}"
PAPROF_S=$(seconds "$start" "$(now)")
echo "paprof.profile cell: ${PAPROF_S} s wall clock (process start to the printed report)"

stamp "3. nsight-python: the same kernel and configs"
NSIGHT_S=-
cat > "$WORK/nsight_cell.py" <<'EOF'
import torch, triton, triton.language as tl, nsight

@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)

def add(x, y, block):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
    return out

@nsight.analyze.kernel(configs=[(64,), (1024,)], runs=1)
def bench(block):
    x, y = torch.randn(1 << 24, device="cuda"), torch.randn(1 << 24, device="cuda")
    with nsight.annotate("add"):
        add(x, y, block)

result = bench()
frame = result.to_dataframe() if hasattr(result, "to_dataframe") else result
print(frame.to_string() if hasattr(frame, "to_string") else frame)
EOF
if [ "$HAVE_NSIGHT" = 1 ]; then
  start=$(now)
  ( cd "$WORK" && timeout 300 python3 nsight_cell.py ) 2>&1 | tail -30
  echo "nsight rc ${PIPESTATUS[0]}"
  NSIGHT_S=$(seconds "$start" "$(now)")
  echo "nsight-python cell: ${NSIGHT_S} s wall clock (process start to the printed table)"
else
  echo "nsight-python is not installed: skipped"
fi

stamp "4. tests: pytest -m gpu tests/test_profile_api.py"
timeout 300 python3 -m pytest tests/test_profile_api.py -m gpu -n 0 -q -p no:cacheprovider 2>&1 | tail -15

stamp "summary"
lines() { grep -cv '^\s*$' "$1"; }
echo "paprof.profile cell: $(lines "$WORK/cell.py") non-blank lines (kernel included), ${PAPROF_S} s"
echo "nsight-python cell:  $(lines "$WORK/nsight_cell.py") non-blank lines (kernel included, printing too), ${NSIGHT_S} s"
echo "(the kernel and add() are the same 8 lines in both)"
