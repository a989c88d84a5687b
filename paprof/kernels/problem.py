"""The paged-attention decode problem: its shape, its inputs and the float64 reference.

One query token per sequence attends over that sequence's keys and values, which live
in fixed-size pages of a shared cache reached through a block table. The functions here
take an array module ``xp`` (NumPy, or CuPy on the GPU) so that the same reference code
checks small shapes in CI and full-size shapes on the device.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from paprof.errors import ShapeError

DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2}
"""K/V cache element types and their size in bytes. Query and output stay fp32."""

_KEYS = {
    "batch": "batch",
    "b": "batch",
    "q_heads": "q_heads",
    "heads": "q_heads",
    "kv_heads": "kv_heads",
    "head_dim": "head_dim",
    "d": "head_dim",
    "page_size": "page_size",
    "page": "page_size",
    "context": "context",
    "ctx": "context",
    "splits": "num_splits",
    "num_splits": "num_splits",
    "dtype": "dtype",
    "max_pages": "max_pages",
}


@dataclass(frozen=True)
class Shape:
    """One decode step's problem size.

    ``context`` is one length for every sequence, or a tuple with one length per
    sequence (ragged batch). ``num_splits`` is 0 for "the variant decides" and only
    matters to split-KV variants. ``max_pages`` is the block table's width; 0 means
    just wide enough for the longest sequence.
    """

    batch: int = 64
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    page_size: int = 16
    context: int | tuple[int, ...] = 4096
    num_splits: int = 0
    dtype: str = "fp32"
    max_pages: int = 0

    def __post_init__(self):
        if isinstance(self.context, (list, tuple)):
            object.__setattr__(self, "context", tuple(int(c) for c in self.context))
        self.validate()

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
        for name in ("batch", "q_heads", "kv_heads", "head_dim", "page_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ShapeError(f"{name} must be a positive integer, got {value!r}")
        if self.num_splits < 0:
            raise ShapeError(f"splits must be 0 (automatic) or positive, got {self.num_splits}")
        if self.dtype not in DTYPES:
            raise ShapeError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.q_heads % self.kv_heads:
            raise ShapeError(
                f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        lens = self.context_lens
        if isinstance(self.context, tuple) and len(lens) != self.batch:
            raise ShapeError(
                f"{len(lens)} context lengths given for batch {self.batch}; give one per sequence"
            )
        if min(lens) <= 0:
            raise ShapeError(f"every context length must be positive, got {min(lens)}")
        if self.max_pages < 0:
            raise ShapeError(f"max_pages must be positive, got {self.max_pages}")
        needed = -(-self.max_context // self.page_size)
        if self.max_pages and needed > self.max_pages:
            raise ShapeError(
                f"context {self.max_context} needs {needed} pages of {self.page_size} tokens, "
                f"beyond the block table's {self.max_pages} pages"
            )

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
        return text

    def spec(self) -> str:
        """The ``--shape`` text that parses back into this shape."""
        ctx = (
            ":".join(str(c) for c in self.context)
            if isinstance(self.context, tuple)
            else str(self.context)
        )
        parts = [
            f"batch={self.batch}",
            f"q_heads={self.q_heads}",
            f"kv_heads={self.kv_heads}",
            f"head_dim={self.head_dim}",
            f"page={self.page_size}",
            f"context={ctx}",
            f"dtype={self.dtype}",
        ]
        if self.num_splits:
            parts.append(f"splits={self.num_splits}")
        if self.max_pages:
            parts.append(f"max_pages={self.max_pages}")
        return ",".join(parts)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if isinstance(self.context, tuple):
            d["context"] = list(self.context)
        return d


def parse_shape(text: str | None, base: Shape | None = None) -> Shape:
    """Parse ``batch=64,context=4096,...`` (keys may be abbreviated, see ``_KEYS``).

    ``context=1:15:16:17`` gives one length per sequence; batch then defaults to their
    count. Keys not named keep ``base``'s values (the default shape when None).
    """
    base = base or Shape()
    fields = base.to_dict()
    if isinstance(base.context, tuple):
        fields["context"] = tuple(base.context)
    given: set[str] = set()
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ShapeError(f"shape item {item!r} is not KEY=VALUE (e.g. batch=64,context=4096)")
        key, value = (s.strip() for s in item.split("=", 1))
        if key not in _KEYS:
            raise ShapeError(
                f"unknown shape key {key!r}; known: {', '.join(sorted(set(_KEYS.values())))}"
            )
        name = _KEYS[key]
        given.add(name)
        if name == "dtype":
            fields[name] = value.lower()
            continue
        try:
            if name == "context" and ":" in value:
                fields[name] = tuple(int(v) for v in value.split(":"))
            else:
                fields[name] = int(value)
        except ValueError:
            raise ShapeError(f"shape value for {key} must be an integer, got {value!r}") from None
    if isinstance(fields["context"], tuple) and "batch" not in given:
        fields["batch"] = len(fields["context"])
    elif "batch" in given and "context" not in given and isinstance(fields["context"], tuple):
        fields["context"] = max(fields["context"])
    return Shape(**fields)


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


@dataclass
class Inputs:
    """The arrays of one problem, on the host (NumPy) or the device (CuPy)."""

    query: object  # [batch, q_heads, head_dim] float32
    key_cache: object  # [num_pages, page_size, kv_heads, head_dim] dtype
    value_cache: object  # same
    block_tables: object  # [batch, pages_per_seq] int32, -1 beyond the sequence
    context_lens: object  # [batch] int32
    scale: float


def _kv_dtype(xp, dtype: str):
    if dtype == "bf16":
        return None  # stored as uint16 bit patterns; see to_storage()
    return {"fp32": xp.float32, "fp16": xp.float16}[dtype]


def to_storage(xp, values, dtype: str):
    """Convert float values to the cache's storage type (bf16 as uint16 bit patterns).

    bf16 rounds to nearest even from float32, as a GPU conversion would.
    """
    if dtype != "bf16":
        return values.astype(_kv_dtype(xp, dtype))
    bits = values.astype(xp.float32).view(xp.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(xp.uint16)


def from_storage(xp, stored, dtype: str):
    """The float64 values a cache of ``dtype`` actually holds."""
    if dtype != "bf16":
        return stored.astype(xp.float64)
    return (stored.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)


def make_block_tables(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    """Each sequence's logical pages mapped to shuffled physical pages, -1 padding.

    Every physical page is used by exactly one (sequence, logical page).
    """
    perm = rng.permutation(shape.num_pages).astype(np.int32)
    table = np.full((shape.batch, shape.pages_per_seq), -1, dtype=np.int32)
    start = 0
    for b, ctx in enumerate(shape.context_lens):
        n = -(-ctx // shape.page_size)
        table[b, :n] = perm[start : start + n]
        start += n
    return table


def make_inputs(shape: Shape, seed: int | None = None, xp=np) -> Inputs:
    """Fresh random inputs (normal values, never zeros) on the array module ``xp``.

    The page mapping is drawn on the host; the large K/V caches are drawn with ``xp``'s
    own generator so that gigabyte-sized caches are made on the GPU directly.
    """
    rng = np.random.default_rng(seed)
    tables = make_block_tables(shape, rng)
    xrng = xp.random.default_rng(int(rng.integers(2**31)))
    cache_shape = (shape.num_pages, shape.page_size, shape.kv_heads, shape.head_dim)

    def draw(size):
        return xrng.standard_normal(size, dtype=xp.float32)

    return Inputs(
        query=draw((shape.batch, shape.q_heads, shape.head_dim)),
        key_cache=to_storage(xp, draw(cache_shape), shape.dtype),
        value_cache=to_storage(xp, draw(cache_shape), shape.dtype),
        block_tables=xp.asarray(tables),
        context_lens=xp.asarray(np.asarray(shape.context_lens, dtype=np.int32)),
        scale=1.0 / math.sqrt(shape.head_dim),
    )


# ---------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------


def gather_sequence(xp, inputs: Inputs, shape: Shape, b: int):
    """Sequence ``b``'s keys and values in token order, float64, ``[ctx, kv_heads, d]``."""
    ctx = int(shape.context_lens[b])
    n = -(-ctx // shape.page_size)
    pages = xp.asarray(inputs.block_tables[b, :n])
    k = from_storage(xp, inputs.key_cache[pages], shape.dtype)
    v = from_storage(xp, inputs.value_cache[pages], shape.dtype)
    k = k.reshape(n * shape.page_size, shape.kv_heads, shape.head_dim)[:ctx]
    v = v.reshape(n * shape.page_size, shape.kv_heads, shape.head_dim)[:ctx]
    return k, v


def reference(inputs: Inputs, shape: Shape, xp=np):
    """Decode attention in float64 with a stable softmax: ``[batch, q_heads, head_dim]``."""
    g = shape.group
    out = xp.empty((shape.batch, shape.q_heads, shape.head_dim), dtype=xp.float64)
    for b in range(shape.batch):
        k, v = gather_sequence(xp, inputs, shape, b)
        q = inputs.query[b].astype(xp.float64).reshape(shape.kv_heads, g, shape.head_dim)
        scores = xp.einsum("kgd,tkd->kgt", q, k) * inputs.scale
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


def relative_error(out, ref) -> float:
    """``||out - ref|| / ||ref||`` in float64; NaN anywhere gives inf (never passes)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out).all():
        return math.inf
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
