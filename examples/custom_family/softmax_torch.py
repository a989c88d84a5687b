"""The ``torch`` variant of the softmax family: PyTorch's own softmax, for comparison.

Imported only when the variant is built (on the GPU machine). ``torch.softmax`` has an
``out=`` overload (ATen's ``softmax.int_out``), which for a contiguous ``out`` of the
input's dtype hands ``out`` straight to the softmax kernel: one kernel, no copy. Builds
whose Python binding lacks it fall back to ``torch._softmax(..., out=)``, the same kernel.
"""

from __future__ import annotations

import torch


def _has_out_overload() -> bool:
    probe = torch.ones(1, 2)
    try:
        torch.softmax(probe, -1, out=torch.empty(1, 2))
    except TypeError:
        return False
    return True


if _has_out_overload():
    def _softmax_into(x, out):
        torch.softmax(x, -1, out=out)
else:  # pragma: no cover (older bindings)
    def _softmax_into(x, out):
        torch._softmax(x, -1, False, out=out)


def softmax(inputs, out, params) -> None:
    _softmax_into(inputs["x"], out)
