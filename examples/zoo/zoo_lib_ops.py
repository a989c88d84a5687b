"""The calls of the ``zoo_lib`` family (``zoo_lib_family.py``): imported only when a
variant is built, on the GPU machine (PyTorch, and Triton for lib3).

Each ``prepare_<pair>_<a|b>(inputs, out, params)`` converts the float32 inputs once
(outside the timing) and returns the launch of one step: ``a`` is the pair's slow
variant, ``b`` its fast one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


# -- lib1: fp32 matmul, TF32 off / on ------------------------------------------------------

def _tf32(on: bool) -> None:
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9: the new switch (the old one mixes badly)
        matmul.fp32_precision = "tf32" if on else "ieee"
    else:  # pragma: no cover (older torch)
        matmul.allow_tf32 = on


def _lib1(on: bool):
    def prepare(inputs, out, params):
        a, b = inputs["a"], inputs["b"]

        def launch():
            _tf32(on)  # the switch is global: set it before every call
            torch.matmul(a, b, out=out)
        return launch
    return prepare


prepare_lib1_a = _lib1(False)
prepare_lib1_b = _lib1(True)


# -- lib2: SDPA, math / flash backend ------------------------------------------------------

def _lib2(backend_name: str):
    def prepare(inputs, out, params):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        q, k, v = (inputs[name].to(torch.float16) for name in ("q", "k", "v"))

        def launch():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        return launch
    return prepare


prepare_lib2_a = _lib2("MATH")
prepare_lib2_b = _lib2("FLASH_ATTENTION")


# -- lib3: a Triton matmul, num_stages 1 / 4 -----------------------------------------------

def _lib3(stages: int):
    def prepare(inputs, out, params):
        from zoo_lib_triton import matmul

        a, b = (inputs[name].to(torch.float16) for name in ("a", "b"))

        def launch():
            matmul(a, b, out, num_stages=stages)
        return launch
    return prepare


prepare_lib3_a = _lib3(1)
prepare_lib3_b = _lib3(4)


# -- lib4: fp16 conv2d, NCHW / channels_last -----------------------------------------------

def _lib4(channels_last: bool):
    def prepare(inputs, out, params):
        x, w = (inputs[name].to(torch.float16) for name in ("x", "w"))
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
            w = w.contiguous(memory_format=torch.channels_last)

        def launch():
            return F.conv2d(x, w, padding=1)
        return launch
    return prepare


prepare_lib4_a = _lib4(False)
prepare_lib4_b = _lib4(True)
