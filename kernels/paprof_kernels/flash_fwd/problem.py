"""The flash-attention forward (prefill) problem: parameters, inputs, work and reference.

Each (batch, query head) attends with ``seq_q`` queries over ``seq_k`` keys of its K/V
head (``q_heads / kv_heads`` query heads share one: GQA):
``O = softmax(Q K^T / sqrt(head_dim) [+ causal mask]) V``. Every tensor is laid out per
head, contiguous: Q and O ``[batch * q_heads, seq_q, head_dim]``, K and V
``[batch * kv_heads, seq_k, head_dim]``; head ``h`` of batch ``b`` is row block
``b * heads + h``, and query head ``h`` reads K/V head ``h // (q_heads / kv_heads)``.

The causal mask is **bottom-right aligned**: query ``i`` sees keys ``j <= i + seq_k - seq_q``
(the last query sees every key, as in decoding with a K/V cache of ``seq_k - seq_q``
earlier tokens). For ``seq_q == seq_k`` that is PyTorch's ``is_causal`` (top-left and
bottom-right agree); causal needs ``seq_k >= seq_q`` so that every query sees a key.

Storage: fp32 and fp16 as their NumPy/CuPy types; bf16 as int16 arrays holding the bf16
bit patterns (NumPy and CuPy have no bf16 type; through DLPack PyTorch sees int16 and
views it as bfloat16). The output has the inputs' type.

The reference is float64 on a *sample* (``Sample``): a few (batch, head) pairs, and for
each every query row of the first, a middle and the last 64-row tile, plus one row of
every tile, which together hit every row position inside a tile (the thread, warp and
fragment row a kernel gives it), every tile index, and the causal diagonal of each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from paprof.errors import ShapeError
from paprof.family import Params, Sample, Work, param

DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2}
"""Element types and their size in bytes (inputs and output alike)."""

HEAD_DIMS = (64, 128)

TILE_ROWS = 64
"""Query rows a CTA owns in every kernel of the family: the sample covers each position."""

MAX_BYTES = 64 << 30
"""Shapes whose Q, K, V and O would take more than this (64 GiB) are refused."""

MAX_SAMPLE_ROWS = 1024
"""At most this many query rows a sampled head (keeps the float64 reference cheap)."""


@dataclass(frozen=True)
class Shape(Params):
    """One attention forward pass. ``kv_heads`` 0: as many as ``q_heads`` (no GQA);
    ``seq_k`` 0: as long as ``seq_q``."""

    batch: int = param(4, aliases=("b",), min=1, max=65535, help="sequences in the batch")
    q_heads: int = param(32, aliases=("heads", "h"), min=1, max=1024, help="query heads")
    kv_heads: int = param(0, min=0, max=1024, omit_default=True,
                          help="K/V heads (q_heads / kv_heads query heads share one: GQA; 0: q_heads)")
    seq_q: int = param(8192, aliases=("seq", "s"), min=1, max=1 << 20, help="queries per sequence")
    seq_k: int = param(0, min=0, max=1 << 20, omit_default=True,
                       help="keys per sequence (0: seq_q)")
    head_dim: int = param(128, aliases=("d",), choices=HEAD_DIMS)
    causal: bool = param(False, help="bottom-right aligned causal mask: query i sees keys j <= i + seq_k - seq_q")
    dtype: str = param("bf16", choices=tuple(DTYPES), help="Q, K, V and O type")

    # -- derived sizes ------------------------------------------------------------------
    @property
    def kv(self) -> int:
        """K/V heads (``kv_heads``, or ``q_heads`` when 0)."""
        return self.kv_heads or self.q_heads

    @property
    def keys(self) -> int:
        """Keys per sequence (``seq_k``, or ``seq_q`` when 0)."""
        return self.seq_k or self.seq_q

    @property
    def group(self) -> int:
        """Query heads per K/V head."""
        return self.q_heads // self.kv

    @property
    def offset(self) -> int:
        """``seq_k - seq_q``: query i's last visible key under the causal mask is i + offset."""
        return self.keys - self.seq_q

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype]

    @property
    def q_elements(self) -> int:
        return self.batch * self.q_heads * self.seq_q * self.head_dim

    @property
    def kv_elements(self) -> int:
        return self.batch * self.kv * self.keys * self.head_dim

    @property
    def pairs(self) -> int:
        """Unmasked (query, key) pairs of one head, counted exactly."""
        return attended_pairs(self.seq_q, self.keys, self.causal)

    # -- checks -------------------------------------------------------------------------
    def validate(self) -> None:
        if self.q_heads % self.kv:
            raise ShapeError(f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv})")
        if self.causal and self.keys < self.seq_q:
            raise ShapeError(
                f"causal attention is bottom-right aligned (query i sees keys up to i + seq_k - seq_q): "
                f"seq_k ({self.keys}) must be at least seq_q ({self.seq_q}), or the first queries see no key")
        total = (2 * self.q_elements + 2 * self.kv_elements) * self.elem_bytes
        if total > MAX_BYTES:
            raise ShapeError(f"Q, K, V and O would take {total / 2**30:.1f} GiB; at most "
                             f"{MAX_BYTES >> 30} GiB")

    @classmethod
    def resolve(cls, values: dict, given: set[str]) -> dict:
        """Lower-case the dtype; ``kv_heads`` equal to ``q_heads`` and ``seq_k`` equal to
        ``seq_q`` are written as their 0 default, so one problem has one spec and slug."""
        values["dtype"] = str(values["dtype"]).lower()
        if values["kv_heads"] == values["q_heads"]:
            values["kv_heads"] = 0
        if values["seq_k"] == values["seq_q"]:
            values["seq_k"] = 0
        return values

    def slug(self) -> str:
        """``b4_h32x8_s8192x4096_d128_causal_bf16`` (``x..`` only where K/V differ)."""
        heads = f"h{self.q_heads}" + (f"x{self.kv}" if self.kv != self.q_heads else "")
        seq = f"s{self.seq_q}" + (f"x{self.keys}" if self.keys != self.seq_q else "")
        mask = "_causal" if self.causal else ""
        return f"b{self.batch}_{heads}_{seq}_d{self.head_dim}{mask}_{self.dtype}"


def attended_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """(query, key) pairs the mask leaves: all of them, or under the bottom-right causal
    mask ``sum_i (i + seq_k - seq_q + 1)`` = ``seq_q (seq_k - seq_q) + seq_q (seq_q + 1) / 2``."""
    if not causal:
        return seq_q * seq_k
    return seq_q * (seq_k - seq_q) + seq_q * (seq_q + 1) // 2


def work(shape: Shape) -> Work:
    """Bytes: Q, K, V read once and O written once. FLOPs: Q K^T and P V, a multiply-add
    per head dimension each, for every attended (query, key) pair of every query head
    (the causal part counted exactly). fp32 runs on CUDA cores, fp16/bf16 on tensor cores."""
    nbytes = (2 * shape.q_elements + 2 * shape.kv_elements) * shape.elem_bytes
    flops = 4 * shape.batch * shape.q_heads * shape.pairs * shape.head_dim
    return Work(bytes=nbytes, flops=flops, flop_kind="fp32" if shape.dtype == "fp32" else "tensor")


# ---------------------------------------------------------------------------------------
# Inputs and output
# ---------------------------------------------------------------------------------------


def to_storage(xp, values, dtype: str):
    """float32 values in the storage type: bf16 rounds to nearest even, kept as int16 bits."""
    if dtype == "fp32":
        return values.astype(xp.float32)
    if dtype == "fp16":
        return values.astype(xp.float16)
    bits = values.astype(xp.float32).view(xp.uint32)
    return ((bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16).astype(xp.uint16).view(xp.int16)


def from_storage(xp, stored, dtype: str):
    """The float64 values an array of ``dtype`` storage holds."""
    if dtype != "bf16":
        return stored.astype(xp.float64)
    return (stored.view(xp.uint16).astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)


def make_inputs(shape: Shape, seed: int | None = None, xp=None) -> dict:
    """Fresh standard-normal Q, K and V (never zeros), drawn with ``xp``'s generator."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    rng = xp.random.default_rng(int(np.random.default_rng(seed).integers(2**31)))
    d = shape.head_dim

    def draw(rows, seq):
        return to_storage(xp, rng.standard_normal((rows, seq, d), dtype=xp.float32), shape.dtype)

    return {"q": draw(shape.batch * shape.q_heads, shape.seq_q),
            "k": draw(shape.batch * shape.kv, shape.keys),
            "v": draw(shape.batch * shape.kv, shape.keys)}


def storage_dtype(xp, dtype: str):
    return {"fp32": xp.float32, "fp16": xp.float16, "bf16": xp.int16}[dtype]


def make_output(shape: Shape, xp=None):
    """O: ``[batch * q_heads, seq_q, head_dim]`` of the inputs' storage type."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    return xp.empty((shape.batch * shape.q_heads, shape.seq_q, shape.head_dim),
                    dtype=storage_dtype(xp, shape.dtype))


# ---------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------


def sample_heads(shape: Shape) -> list[int]:
    """Row blocks (``b * q_heads + h``) the reference checks: the first and last head of
    the first and last sequence, one in the middle, and the heads either side of the
    first K/V group boundary (with GQA: the last head of K/V head 0, the first of K/V
    head 1)."""
    hq, last_b = shape.q_heads, shape.batch - 1
    picks = [(0, 0), (0, hq - 1), (last_b, 0), (last_b, hq - 1), (shape.batch // 2, hq // 2)]
    if shape.group > 1 and shape.kv > 1:
        picks += [(0, shape.group - 1), (0, shape.group)]
    return sorted({b * hq + h for b, h in picks})


def sample_rows(shape: Shape, tile: int = TILE_ROWS) -> list[int]:
    """Query rows the reference checks in each sampled head: all rows of the first, a
    middle and the last ``tile``-row tile (every position inside a tile, the causal
    diagonal of each, a partial last tile), and one row of every other tile (row
    ``t * tile + t % tile`` of tile t: every tile index, the positions rotating)."""
    n = shape.seq_q
    tiles = -(-n // tile)
    rows: set[int] = set()
    for t in sorted({0, tiles // 2, tiles - 1}):
        rows.update(range(t * tile, min(n, (t + 1) * tile)))
    rows.update(min(n - 1, t * tile + t % tile) for t in range(tiles))
    chosen = sorted(rows)
    if len(chosen) > MAX_SAMPLE_ROWS:  # very long sequences: keep the full tiles, thin the rest
        full = {r for t in sorted({0, tiles // 2, tiles - 1})
                for r in range(t * tile, min(n, (t + 1) * tile))}
        rest = [r for r in chosen if r not in full]
        keep = MAX_SAMPLE_ROWS - len(full)
        step = max(1, -(-len(rest) // max(1, keep)))
        chosen = sorted(full | set(rest[::step]))
    return chosen


def attention_rows(q, k, v, rows, shape: Shape, xp):
    """float64 attention of the query rows ``rows`` (``q``: those rows only, ``[R, d]``)
    over all keys ``k``, ``v`` (``[seq_k, d]``), masked as the shape says."""
    scores = (q @ k.T) * shape.scale
    if shape.causal:
        keys = xp.arange(shape.keys)[None, :]
        limit = xp.asarray(rows)[:, None] + shape.offset
        scores = xp.where(keys <= limit, scores, -xp.inf)
    scores -= scores.max(axis=1, keepdims=True)
    p = xp.exp(scores)
    p /= p.sum(axis=1, keepdims=True)
    return p @ v


def reference(shape: Shape, inputs: dict, xp=None) -> Sample:
    """float64 attention on the sampled heads and rows (``sample_heads``, ``sample_rows``)."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    xp = np if xp is None else xp
    heads = sample_heads(shape)
    rows = sample_rows(shape)
    row_index = xp.asarray(np.asarray(rows, dtype=np.int64))
    values = xp.empty((len(heads), len(rows), shape.head_dim), dtype=xp.float64)
    for i, bh in enumerate(heads):
        b, h = divmod(bh, shape.q_heads)
        kvh = b * shape.kv + h // shape.group
        q = from_storage(xp, inputs["q"][bh][row_index], shape.dtype)
        k = from_storage(xp, inputs["k"][kvh], shape.dtype)
        v = from_storage(xp, inputs["v"][kvh], shape.dtype)
        values[i] = attention_rows(q, k, v, rows, shape, xp)
    index = (xp.asarray(np.asarray(heads, dtype=np.int64))[:, None], row_index[None, :])
    return Sample(index=index, values=values,
                  decode=lambda a, xp_: from_storage(xp_, a, shape.dtype))
