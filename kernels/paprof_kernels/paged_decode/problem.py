"""The paged-attention decode problem: its shape, its inputs and the float64 reference.

One query token per sequence attends over that sequence's keys and values, which live
in fixed-size pages of a shared cache reached through a block table. The functions here
take an array module ``xp`` (NumPy, or CuPy on the GPU) so that the same reference code
checks small shapes in CI and full-size shapes on the device.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from paprof.errors import ShapeError
from paprof.family import Params, param

DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
"""K/V cache element types and their size in bytes. Query and output stay fp32. ``fp8`` is
e4m3 (4 exponent bits, 3 mantissa bits, finite up to 448) with one float32 scale per KV
head for K and one for V: the cache holds ``value / scale`` as e4m3 bytes."""

FP8_MAX = 448.0
"""The largest finite e4m3 value: each head's scale maps its largest |value| here."""

MAX_KV_BYTES = 1 << 40
"""Shapes whose K/V cache would exceed this (1 TiB) are refused: no GPU holds them."""


@dataclass(frozen=True)
class Shape(Params):
    """One decode step's problem size.

    ``context`` is one length for every sequence, or a tuple with one length per
    sequence (ragged batch). ``num_splits`` is 0 for "the variant decides" and only
    matters to split-KV variants. ``max_pages`` is the block table's width; 0 means
    just wide enough for the longest sequence. ``chunk_pages`` is v7's work-list chunk
    (pages a CTA at most; 0: v7 decides); other variants ignore it.
    """

    batch: int = param(64, aliases=("b",), min=1, max=65535, help="sequences in the batch")
    q_heads: int = param(32, aliases=("heads",), min=1, max=65535, help="query heads")
    kv_heads: int = param(8, min=1, max=65535, help="K/V heads (q_heads / kv_heads share one: GQA)")
    head_dim: int = param(128, aliases=("d",), min=1, max=1024)
    page_size: int = param(16, key="page", min=1, max=4096, help="tokens per cache page")
    context: int | tuple[int, ...] = param(
        4096, aliases=("ctx",), min=1, help="tokens per sequence, or one length each as a:b:c")
    num_splits: int = param(0, key="splits", min=0, max=4096, omit_default=True,
                            help="split-KV parts (0: the variant decides)")
    dtype: str = param("fp32", choices=tuple(DTYPES),
                       help="K/V cache type, fp8 = e4m3 with a scale per KV head (query and output: fp32)")
    max_pages: int = param(0, min=0, omit_default=True,
                           help="block-table width in pages (0: just enough)")
    chunk_pages: int = param(0, key="chunk", min=0, max=1 << 20, omit_default=True,
                             help="v7's work-list chunk in pages a CTA (0: v7 decides)")

    # -- derived sizes ---------------------------------------------------------------
    @property
    def context_lens(self) -> tuple[int, ...]:
        if isinstance(self.context, tuple):
            return self.context
        return (self.context,) * self.batch

    @property
    def max_context(self) -> int:
        return max(self.context_lens)

    @property
    def group(self) -> int:
        """Query heads per KV head (the GQA ratio)."""
        return self.q_heads // self.kv_heads

    @property
    def pages_per_seq(self) -> int:
        """Width of the block table."""
        return self.max_pages or -(-self.max_context // self.page_size)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype]

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)

    @property
    def kv_bytes(self) -> int:
        """Unique K and V bytes one decode step must read (ragged lengths counted exactly)."""
        tokens = sum(self.context_lens)
        return 2 * tokens * self.kv_heads * self.head_dim * self.elem_bytes

    @property
    def num_pages(self) -> int:
        """Physical pages in the cache: exactly the ones the sequences use."""
        return sum(-(-c // self.page_size) for c in self.context_lens)

    # -- checks ------------------------------------------------------------------------
    def validate(self) -> None:
        if self.q_heads % self.kv_heads:
            raise ShapeError(
                f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        lens = self.context_lens
        if isinstance(self.context, tuple) and len(lens) != self.batch:
            raise ShapeError(
                f"{len(lens)} context lengths given for batch {self.batch}; give one per sequence"
            )
        needed = -(-self.max_context // self.page_size)
        if self.max_pages and needed > self.max_pages:
            raise ShapeError(
                f"context {self.max_context} needs {needed} pages of {self.page_size} tokens, "
                f"beyond the block table's {self.max_pages} pages"
            )
        if self.kv_bytes > MAX_KV_BYTES:
            raise ShapeError(f"this shape's K/V cache would take {self.kv_bytes / 1e12:.1f} TB; "
                             "no GPU holds that")

    @classmethod
    def resolve(cls, values: dict, given: set[str]) -> dict:
        """``context=1:15:16:17`` gives one length per sequence: batch then defaults to their
        count; a batch given over a ragged base keeps its longest length for every sequence."""
        values["dtype"] = str(values["dtype"]).lower()
        if isinstance(values["context"], tuple) and "batch" not in given:
            values["batch"] = len(values["context"])
        elif "batch" in given and "context" not in given and isinstance(values["context"], tuple):
            values["context"] = max(values["context"])
        return values

    # -- naming ------------------------------------------------------------------------
    def slug(self) -> str:
        """A file-name-safe id, e.g. ``b64_ctx4096_h32x8_d128_p16_fp32``."""
        if isinstance(self.context, tuple):
            ctx = "-".join(str(c) for c in self.context)
            if len(ctx) > 40:
                digest = hashlib.sha1(ctx.encode()).hexdigest()[:8]
                ctx = f"ragged{len(self.context)}-max{self.max_context}-{digest}"
        else:
            ctx = str(self.context)
        text = (
            f"b{self.batch}_ctx{ctx}_h{self.q_heads}x{self.kv_heads}_d{self.head_dim}"
            f"_p{self.page_size}_{self.dtype}"
        )
        if self.num_splits:
            text += f"_s{self.num_splits}"
        if self.max_pages:
            text += f"_mp{self.max_pages}"
        if self.chunk_pages:
            text += f"_c{self.chunk_pages}"
        return text


def parse_shape(text: str | None, base: Shape | None = None) -> Shape:
    """``Shape.parse``: ``batch=64,context=4096,...`` (any key's alias)."""
    return Shape.parse(text, base)


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


INPUT_NAMES = ("query", "key_cache", "value_cache", "block_tables", "context_lens")
"""The arrays of one problem (``make_inputs``' dict), on the host (NumPy) or device (CuPy):
query ``[batch, q_heads, head_dim]`` float32; key_cache and value_cache
``[num_pages, page_size, kv_heads, head_dim]`` of the dtype; block_tables
``[batch, pages_per_seq]`` int32, -1 beyond the sequence; context_lens ``[batch]`` int32.
The softmax scale is ``shape.scale`` (1 / sqrt(head_dim)). An fp8 cache adds
``FP8_SCALE_NAMES``: k_scale and v_scale ``[kv_heads]`` float32."""

FP8_SCALE_NAMES = ("k_scale", "v_scale")


def _kv_dtype(xp, dtype: str):
    if dtype == "bf16":
        return None  # stored as uint16 bit patterns; see to_storage()
    return {"fp32": xp.float32, "fp16": xp.float16}[dtype]


def to_e4m3(xp, values):
    """Float values as e4m3 bit patterns (uint8): round to nearest even, saturating at
    +-448, as ``cvt.rn.satfinite.e4m3x2.f32`` does; values under 2^-6 land on the
    subnormal grid of 2^-9. Never produces NaN (0x7f / 0xff)."""
    x = values.astype(xp.float32, copy=False)  # every e4m3 value and step is exact in float32
    a = xp.minimum(xp.abs(x), xp.float32(FP8_MAX))
    _, e = xp.frexp(a)  # a = m 2^e, m in [0.5, 1): the binade's exponent is e - 1
    step = xp.ldexp(xp.ones_like(a), xp.maximum(e - 1, -6) - 3)  # 3 mantissa bits a binade
    q = xp.minimum(xp.rint(a / step) * step, xp.float32(FP8_MAX))  # rint: half to even
    _, eq = xp.frexp(q)
    normal = q >= xp.float32(2.0**-6)
    exp_field = xp.where(normal, eq - 1 + 7, 0)
    mant = xp.where(normal, xp.ldexp(q, -(eq - 1) + 3) - 8, xp.ldexp(q, 9))
    bits = (exp_field.astype(xp.int32) << 3) | mant.astype(xp.int32)
    return (bits | (xp.signbit(x).astype(xp.int32) << 7)).astype(xp.uint8)


def from_e4m3(xp, bits):
    """The float64 values of e4m3 bit patterns (no NaN among them: see ``to_e4m3``)."""
    b = bits.astype(xp.int32)
    exp_field, mant = (b >> 3) & 15, (b & 7).astype(xp.float64)
    mag = xp.where(exp_field == 0, xp.ldexp(mant, -9), xp.ldexp(mant + 8, exp_field - 10))
    return xp.where((b >> 7) != 0, -mag, mag)


def to_storage(xp, values, dtype: str):
    """Convert float values to the cache's storage type (bf16 as uint16 bit patterns, fp8
    as e4m3 bytes: scale the values first, see ``fp8_scales``).

    bf16 rounds to nearest even from float32, as a GPU conversion would.
    """
    if dtype == "fp8":
        return to_e4m3(xp, values)
    if dtype != "bf16":
        return values.astype(_kv_dtype(xp, dtype))
    bits = values.astype(xp.float32).view(xp.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(xp.uint16)


def from_storage(xp, stored, dtype: str):
    """The float64 values a cache of ``dtype`` actually holds (fp8: before its scale)."""
    if dtype == "fp8":
        return from_e4m3(xp, stored)
    if dtype != "bf16":
        return stored.astype(xp.float64)
    return (stored.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)


def fp8_scales(xp, values):
    """One float32 scale per KV head (axis 2 of ``[pages, page, kv_heads, d]``): the head's
    largest |value| over FP8_MAX, so that value / scale spans e4m3's whole range."""
    amax = xp.abs(values).max(axis=(0, 1, 3)).astype(xp.float32)
    return xp.maximum(amax, xp.float32(1e-30)) / xp.float32(FP8_MAX)


def make_block_tables(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    """Each sequence's logical pages mapped to shuffled physical pages, -1 padding.

    Every physical page is used by exactly one (sequence, logical page).
    """
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    perm = rng.permutation(shape.num_pages).astype(np.int32)
    table = np.full((shape.batch, shape.pages_per_seq), -1, dtype=np.int32)
    start = 0
    for b, ctx in enumerate(shape.context_lens):
        n = -(-ctx // shape.page_size)
        table[b, :n] = perm[start : start + n]
        start += n
    return table


def make_inputs(shape: Shape, seed: int | None = None, xp=None) -> dict:
    """Fresh random inputs (normal values, never zeros) on the array module ``xp``.

    The page mapping is drawn on the host; the large K/V caches are drawn with ``xp``'s
    own generator so that gigabyte-sized caches are made on the GPU directly.
    """
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    rng = np.random.default_rng(seed)
    tables = make_block_tables(shape, rng)
    xrng = xp.random.default_rng(int(rng.integers(2**31)))
    cache_shape = (shape.num_pages, shape.page_size, shape.kv_heads, shape.head_dim)

    def draw(size):
        return xrng.standard_normal(size, dtype=xp.float32)

    inputs = {
        "query": draw((shape.batch, shape.q_heads, shape.head_dim)),
        "block_tables": xp.asarray(tables),
        "context_lens": xp.asarray(np.asarray(shape.context_lens, dtype=np.int32)),
    }
    for name in ("key_cache", "value_cache"):
        values = draw(cache_shape)
        if shape.dtype == "fp8":
            # heads of a real model differ in range: spread them over 0.5x to 2x, so that a
            # kernel using one head's scale for another's is wrong by far more than the bound
            spread = xp.asarray((2.0 ** rng.uniform(-1, 1, shape.kv_heads)).astype(np.float32))
            values *= spread.reshape(1, 1, -1, 1)
            scales = fp8_scales(xp, values)
            inputs[name[0] + "_scale"] = scales
            values /= scales.reshape(1, 1, -1, 1)
        inputs[name] = to_storage(xp, values, shape.dtype)
        del values
    return {k: inputs[k] for k in (*INPUT_NAMES, *FP8_SCALE_NAMES) if k in inputs}


def make_output(shape: Shape, xp=None):
    """The output array the kernels write: ``[batch, q_heads, head_dim]`` float32."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    return xp.empty((shape.batch, shape.q_heads, shape.head_dim), dtype=xp.float32)


# ---------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------


def gather_sequence(xp, inputs: dict, shape: Shape, b: int):
    """Sequence ``b``'s keys and values in token order, float64, ``[ctx, kv_heads, d]``."""
    ctx = int(shape.context_lens[b])
    n = -(-ctx // shape.page_size)
    pages = xp.asarray(inputs["block_tables"][b, :n])
    k = from_storage(xp, inputs["key_cache"][pages], shape.dtype)
    v = from_storage(xp, inputs["value_cache"][pages], shape.dtype)
    if shape.dtype == "fp8":  # the dequantised cache: e4m3 value x its head's scale
        k = k * inputs["k_scale"].astype(xp.float64).reshape(1, 1, -1, 1)
        v = v * inputs["v_scale"].astype(xp.float64).reshape(1, 1, -1, 1)
    k = k.reshape(n * shape.page_size, shape.kv_heads, shape.head_dim)[:ctx]
    v = v.reshape(n * shape.page_size, shape.kv_heads, shape.head_dim)[:ctx]
    return k, v


def reference(shape: Shape, inputs: dict, xp=None):
    """Decode attention in float64 with a stable softmax: ``[batch, q_heads, head_dim]``."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    g = shape.group
    out = xp.empty((shape.batch, shape.q_heads, shape.head_dim), dtype=xp.float64)
    for b in range(shape.batch):
        k, v = gather_sequence(xp, inputs, shape, b)
        q = inputs["query"][b].astype(xp.float64).reshape(shape.kv_heads, g, shape.head_dim)
        scores = xp.einsum("kgd,tkd->kgt", q, k) * shape.scale
        scores -= scores.max(axis=-1, keepdims=True)
        p = xp.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out[b] = xp.einsum("kgt,tkd->kgd", p, v).reshape(shape.q_heads, shape.head_dim)
    return out


def online_softmax_reference(scores, values, chunk: int = 1):
    """Online softmax over a 1-D score stream, ``chunk`` tokens at a time.

    Returns (m, l, acc): the running max, the running sum of exp(s - m) and the
    unnormalised weighted sum of values. ``acc / l`` is the attention output.
    Kept in plain NumPy to document, and test, what the kernels do.
    """
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    scores = np.asarray(scores, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    m, l = -np.inf, 0.0
    acc = np.zeros(values.shape[1:], dtype=np.float64)
    for start in range(0, len(scores), chunk):
        s = scores[start : start + chunk]
        m_new = max(m, float(s.max()))
        correction = math.exp(m - m_new) if m != -np.inf else 0.0
        p = np.exp(s - m_new)
        l = l * correction + float(p.sum())
        acc = acc * correction + p @ values[start : start + chunk]
        m = m_new
    return m, l, acc


def merge_splits(ms, ls, accs):
    """Combine split-KV partial results (m_s, l_s, unnormalised O_s) into the output.

    A split with no tokens (l_s = 0, m_s = -inf) carries no weight and is skipped;
    counting it would give exp(-inf - -inf) = NaN.
    """
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    ms = np.asarray(ms, dtype=np.float64)
    ls = np.asarray(ls, dtype=np.float64)
    accs = np.asarray(accs, dtype=np.float64)
    live = ls > 0
    if not live.any():
        raise ValueError("every split is empty: there is nothing to attend over")
    m = ms[live].max()
    w = np.exp(ms[live] - m)
    l = float((w * ls[live]).sum())
    return (w[:, None] * accs[live]).sum(axis=0) / l
