"""The ``zoo_lib`` family: pairs of library operations, each slow for ONE cause the library
documents (the second family of ``examples/zoo``, beside ``zoo``).

Same conventions as ``zoo``: variants ``<pair>_slow`` / ``<pair>_fast``, the parameter
``pair`` names the pair (and its function), a variant refuses another pair's parameters;
each pair's cause and its pre-registered first-line regex are in ``expected.toml``.
The pair names (``lib1`` ... ``lib4``), the variant ids and their words (``idea``,
``launch``) are neutral: they say neither what the two calls change nor why one is
slower; the table below (and ``zoo_lib_ops.py``) does.

| pair | function | slow | fast |
| --- | --- | --- | --- |
| lib1 | fp32 ``A @ B`` (n x n) | ``torch.matmul`` with ``allow_tf32 = False`` | with ``allow_tf32 = True`` |
| lib2 | fp16 attention, (batch, heads, seq, 64) | SDPA, math backend | SDPA, flash backend |
| lib3 | fp16 ``A @ B`` (n x n), fp32 accumulation | a Triton matmul, ``num_stages=1`` | the same kernel, ``num_stages=4`` |
| lib4 | fp16 conv2d 3x3, 256 -> 256 channels | NCHW (contiguous) tensors | ``channels_last`` tensors |

The inputs are float32 (NumPy or CuPy); each variant's ``prepare`` converts them once,
outside the timing, into what its call takes (fp16, channels_last), and its launch
enqueues the one library call. PyTorch and Triton are imported only when a variant is
built (``zoo_lib_ops``), on the GPU machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.family import CallableVariant, Family, ParamError, Params, Work, param

PAIRS = {
    # pair: (default n, tolerance, summary)
    "lib1": (2048, 2e-3, "fp32 matmul of two n x n matrices (TF32 rounds the inputs to 10 bits)"),
    "lib2": (2048, 1e-2, "fp16 attention: batch 4, 16 heads, n tokens, head dim 64"),
    "lib3": (4096, 5e-3, "fp16 matmul of two n x n matrices, fp32 accumulation, fp16 out"),
    "lib4": (64, 1e-2, "fp16 3x3 conv2d, padding 1: batch 32, 256 -> 256 channels, n x n pixels"),
}
BATCH, HEADS, HEAD_DIM = 4, 16, 64          # lib2
CONV_BATCH, CONV_CH = 32, 256                # lib4


@dataclass(frozen=True)
class LibPair(Params):
    pair: str = param("lib1", choices=tuple(PAIRS), help="which pair's function (and shape)")
    n: int = param(0, min=0, max=16384, omit_default=True,
                   help="matrix side (lib1, lib3), tokens (lib2), image side (lib4); 0: the pair's default")

    @property
    def size(self) -> int:
        return self.n or PAIRS[self.pair][0]

    def validate(self) -> None:
        if self.pair in ("lib1", "lib2") and self.size % 64:
            raise ParamError(f"{self.pair}: n ({self.size}) must be a multiple of 64")
        if self.pair == "lib3" and self.size % 128:
            raise ParamError(f"lib3: n ({self.size}) must be a multiple of 128 (the tile)")


def _shapes(p: LibPair) -> dict:
    n = p.size
    if p.pair in ("lib1", "lib3"):
        return {"a": (n, n), "b": (n, n)}
    if p.pair == "lib2":
        shape = (BATCH, HEADS, n, HEAD_DIM)
        return {"q": shape, "k": shape, "v": shape}
    return {"x": (CONV_BATCH, CONV_CH, n, n), "w": (CONV_CH, CONV_CH, 3, 3)}


def inputs(p: LibPair, seed, xp) -> dict:
    rng = xp.random.default_rng(seed)
    out = {}
    for name, shape in _shapes(p).items():
        a = rng.standard_normal(shape, dtype=xp.float32)
        if name == "w":
            a *= 1.0 / 48.0  # ~ unit-variance outputs from 256 x 9 terms
        if p.pair != "lib1":  # the fp16 pairs: values that fp16 holds exactly
            a = a.astype(xp.float16).astype(xp.float32)
        out[name] = a
    return out


def output(p: LibPair, xp):
    n = p.size
    if p.pair == "lib1":
        return xp.empty((n, n), xp.float32)
    if p.pair == "lib3":
        return xp.empty((n, n), xp.float16)
    if p.pair == "lib2":
        return xp.empty((BATCH, HEADS, n, HEAD_DIM), xp.float16)
    return xp.empty((CONV_BATCH, CONV_CH, n, n), xp.float16)


def reference(p: LibPair, i: dict, xp):
    if p.pair in ("lib1", "lib3"):
        return i["a"].astype(xp.float64) @ i["b"].astype(xp.float64)
    if p.pair == "lib2":
        q, k, v = (i[name].astype(xp.float64) for name in ("q", "k", "v"))
        s = (q @ k.swapaxes(-1, -2)) / HEAD_DIM ** 0.5
        e = xp.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v
    return conv3x3(i["x"].astype(xp.float64), i["w"].astype(xp.float64), xp)


def conv3x3(x, w, xp):
    """Cross-correlation, padding 1, stride 1 (torch's conv2d): nine shifted matmuls."""
    b, c, h, wd = x.shape
    pad = xp.zeros((b, c, h + 2, wd + 2), x.dtype)
    pad[:, :, 1:-1, 1:-1] = x
    out = xp.zeros((b, w.shape[0], h, wd), x.dtype)
    for dy in range(3):
        for dx in range(3):
            patch = pad[:, :, dy:dy + h, dx:dx + wd]          # b, c, h, w
            out += xp.einsum("oc,bchw->bohw", w[:, :, dy, dx], patch)
    return out


def tolerance(p: LibPair) -> float:
    return PAIRS[p.pair][1]


def work(p: LibPair) -> Work:
    n = p.size
    if p.pair == "lib1":
        return Work(bytes=12 * n * n, flops=2 * n ** 3, flop_kind="tensor")
    if p.pair == "lib3":
        return Work(bytes=6 * n * n, flops=2 * n ** 3, flop_kind="tensor")
    if p.pair == "lib2":
        return Work(bytes=4 * 2 * BATCH * HEADS * n * HEAD_DIM, flops=4 * BATCH * HEADS * n * n * HEAD_DIM,
                    flop_kind="tensor")
    pixels = CONV_BATCH * n * n
    return Work(bytes=2 * 2 * pixels * CONV_CH + 2 * CONV_CH * CONV_CH * 9,
                flops=2 * pixels * CONV_CH * CONV_CH * 9, flop_kind="tensor")


def _accepts(pair: str):
    def check(p: LibPair) -> None:
        if p.pair != pair:
            raise ParamError(f"a variant of pair {pair}; the parameters are pair {p.pair} "
                             f"(--shape pair={pair})")
    return check


def _variants() -> list[CallableVariant]:
    out = []
    for pair in PAIRS:
        for index, speed in enumerate(("slow", "fast")):
            out.append(CallableVariant(
                id=f"{pair}_{speed}",
                # neutral words: which call it is, not what it changes (the table above)
                idea=f"[{pair}] library call {'a' if index == 0 else 'b'} (zoo_lib_ops.py)",
                prepare=f"zoo_lib_ops:prepare_{pair}_{'a' if index == 0 else 'b'}",
                arrays="torch",
                accepts=_accepts(pair),
                launch="the library's choice",
            ))
    return out


family = Family(
    name="zoo_lib",
    summary="library pairs: <pair>_slow vs <pair>_fast, one documented cause each (--shape pair=NAME)",
    params=LibPair, variants=_variants(), inputs=inputs, output=output, reference=reference,
    work=work, tolerance=tolerance,
    notes=("each pair's slow variant is slow for one cause, named in examples/zoo/expected.toml",),
)
