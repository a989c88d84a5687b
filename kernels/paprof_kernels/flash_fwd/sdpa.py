"""The PyTorch peers of flash_fwd: ``scaled_dot_product_attention`` on one backend each.

Imported only when such a variant is built (PyTorch at the top is fine). The inputs come
as tensors over the family's arrays (bf16 as int16 bit patterns, viewed as bfloat16 here);
SDPA allocates its own output, which is returned (paprof checks it; nothing is copied
into ``out``). A backend that has no kernel for the parameters raises ``ShapeError``, so
the variant is skipped with PyTorch's reason.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from paprof.errors import ShapeError

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def _heads(x, p, heads: int, seq: int):
    if p.dtype == "bf16":
        x = x.view(torch.bfloat16)
    return x.view(p.batch, heads, seq, p.head_dim)


def attention(backend: str, inputs, out, p):
    """O of SDPA on ``backend`` ([batch, q_heads, seq_q, head_dim]; bf16 as int16)."""
    q = _heads(inputs["q"], p, p.q_heads, p.seq_q)
    k = _heads(inputs["k"], p, p.kv, p.keys)
    v = _heads(inputs["v"], p, p.kv, p.keys)
    extra = {"enable_gqa": True} if p.kv != p.q_heads else {}
    try:
        with sdpa_kernel(BACKENDS[backend]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=p.causal, scale=p.scale, **extra)
    except RuntimeError as err:  # "No available kernel": this backend turns the inputs down
        said = " ".join(str(err).split())[:200]
        raise ShapeError(f"PyTorch's {backend} SDPA backend has no kernel for {p.spec()}: {said}") from None
    return o.view(torch.int16) if p.dtype == "bf16" else o


def flash(inputs, out, p):
    return attention("flash", inputs, out, p)


def cudnn(inputs, out, p):
    return attention("cudnn", inputs, out, p)


def efficient(inputs, out, p):
    return attention("efficient", inputs, out, p)
