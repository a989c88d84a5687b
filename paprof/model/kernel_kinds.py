"""What a kernel does, told from its counters alone (names can say anything).

One kind so far: a **layout transpose** (a permutation of a tensor's dimensions, NCHW to
NHWC and back, a matrix transpose) done the usual way, through a tile in shared memory.
Its counters have a shape no other common kernel has: every global load is stored to
shared memory once and every global store reads shared memory once (shared stores equal
global loads, shared loads equal global stores, instruction for instruction), and it
writes as many bytes as it reads (global load sectors equal store sectors). A GEMM, an
attention kernel, a stencil or a reduction reads shared memory many times per global
store; an elementwise pass does not touch shared memory. On the reports shipped and
measured here (226 kernel launches, 17 kernels using shared memory) the kernels that match
are cuDNN's ``nchwToNhwcKernel`` and ``nhwcToNchwKernel`` and the zoo's tiled
transposes; no other.
"""

from __future__ import annotations

from paprof.model.numbers import finite

#: How far the paired counts may differ (a tile's edge and predicated-off lanes move them
#: a little; the kernels above are within 0.02 %).
INSTRUCTION_SLACK = 0.10
BYTES_SLACK = 0.25

TRANSPOSE_COLUMNS = ("global_load_instructions", "global_store_instructions",
                     "shared_load_instructions", "shared_store_instructions",
                     "l1_global_load_sectors", "l1_global_store_sectors")


def _num(values: dict, column: str) -> float | None:
    x = finite(values.get(column))
    return x if x is not None and x > 0 else None


def _near(a: float, b: float, slack: float) -> bool:
    return abs(a / b - 1.0) <= slack


def is_layout_transpose(values: dict) -> bool:
    """True where a kernel's counters (one launch's or several launches' sums) have a tiled
    transpose's shape; False where they do not or where a counter is missing (a report
    without the InstructionStats / MemoryWorkloadAnalysis counters: nothing is guessed)."""
    gl, gs, sl, ss, lsec, ssec = (_num(values, c) for c in TRANSPOSE_COLUMNS)
    if None in (gl, gs, sl, ss, lsec, ssec):
        return False
    return (_near(ss, gl, INSTRUCTION_SLACK) and _near(sl, gs, INSTRUCTION_SLACK)
            and _near(lsec, ssec, BYTES_SLACK))
