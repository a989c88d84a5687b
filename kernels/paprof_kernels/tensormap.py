"""TMA tensor maps (``CUtensorMap``) built on the host through the CUDA driver.

CuPy has no binding for ``cuTensorMapEncodeTiled``, so it is called here through ctypes
on ``libcuda.so.1`` (the driver CuPy itself runs on). The enum values are the driver
header's (``cuda.h`` of CUDA 13.0: ``CUtensorMapDataType``, ``CUtensorMapInterleave``,
``CUtensorMapSwizzle``, ``CUtensorMapL2promotion``, ``CUtensorMapFloatOOBfill``); the
driver's documented requirements are checked before the call, so a bad map fails here
with a sentence rather than as CUDA_ERROR_INVALID_VALUE.

Two layers: ``TiledMap`` holds every encode parameter except the global address (pure
Python, no GPU: the CPU emulation of ``cp.async.bulk.tensor`` in tests/flash_emu is fed
exactly these values), and ``encode_tiled(map, address)`` returns the driver's 128
opaque bytes for a device address.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

# cuda.h (CUDA 13.0), typedef enum CUtensorMapDataType_enum ... (in declaration order)
DATA_TYPE_UINT16 = 1
DATA_TYPE_FLOAT16 = 6
DATA_TYPE_BFLOAT16 = 9
DATA_TYPE_BYTES = {DATA_TYPE_UINT16: 2, DATA_TYPE_FLOAT16: 2, DATA_TYPE_BFLOAT16: 2}
INTERLEAVE_NONE = 0
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = 0, 1, 2, 3
SWIZZLE_BYTES = {SWIZZLE_NONE: None, SWIZZLE_32B: 32, SWIZZLE_64B: 64, SWIZZLE_128B: 128}
L2_PROMOTION_NONE, L2_PROMOTION_64B, L2_PROMOTION_128B, L2_PROMOTION_256B = 0, 1, 2, 3
OOB_FILL_NONE = 0  # out-of-bounds elements read as zeros
MAP_BYTES = 128    # sizeof(CUtensorMap): CU_TENSOR_MAP_NUM_QWORDS (16) x 8, alignas(128) in C++
MAP_ALIGN = 64     # "tensorMap address must be aligned to 64 bytes"
CUDA_SUCCESS = 0
DTYPE_CODE = {"fp16": DATA_TYPE_FLOAT16, "bf16": DATA_TYPE_BFLOAT16}
LIBCUDA = "libcuda.so.1"


@dataclass(frozen=True)
class TiledMap:
    """The parameters of ``cuTensorMapEncodeTiled`` but the global address. Dimension 0 is
    the innermost (contiguous) one; ``strides`` are the byte strides of dimensions 1..rank-1."""

    data_type: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int = INTERLEAVE_NONE
    swizzle: int = SWIZZLE_128B
    l2_promotion: int = L2_PROMOTION_256B
    oob_fill: int = OOB_FILL_NONE

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one copy writes to shared memory (the transaction count it completes on the
        mbarrier: the whole box, out-of-bounds elements included, filled with zeros)."""
        n = DATA_TYPE_BYTES[self.data_type]
        for b in self.box:
            n *= b
        return n

    def check(self) -> None:
        """The driver's documented requirements (cuda.h, cuTensorMapEncodeTiled) this map
        must meet; ValueError with the first it does not."""
        r = self.rank
        if not 1 <= r <= 5:
            raise ValueError(f"tensor map rank {r}: 1..5")
        if self.data_type not in DATA_TYPE_BYTES:
            raise ValueError(f"tensor map data type {self.data_type}: only the 16-bit types are used here")
        if len(self.strides) != r - 1 or len(self.box) != r or len(self.element_strides) != r:
            raise ValueError("tensor map: strides need rank - 1 entries, box and element strides rank")
        if any(not 0 < d <= 2**32 for d in self.dims):
            raise ValueError(f"tensor map dims {self.dims}: each in 1..2^32")
        if any(s % 16 or not 0 < s < 2**40 for s in self.strides):
            raise ValueError(f"tensor map strides {self.strides}: multiples of 16 below 2^40")
        esize = DATA_TYPE_BYTES[self.data_type]
        span = self.dims[0] * esize
        for i, s in enumerate(self.strides):  # each stride covers the dimension below it
            if s < span:
                raise ValueError(f"tensor map stride {i + 1} ({s} bytes) below the {span} bytes of dimension {i}")
            span = s * self.dims[i + 1]
        if any(not 0 < b <= 256 for b in self.box):
            raise ValueError(f"tensor map box {self.box}: each in 1..256")
        if self.interleave == INTERLEAVE_NONE and (self.box[0] * esize) % 16:
            raise ValueError(f"tensor map box inner dimension {self.box[0] * esize} bytes: a multiple of 16")
        if any(not 0 < e <= 8 for e in self.element_strides):
            raise ValueError(f"tensor map element strides {self.element_strides}: each in 1..8")
        if self.swizzle not in SWIZZLE_BYTES:
            raise ValueError(f"tensor map swizzle {self.swizzle}: none, 32, 64 or 128 bytes")
        span = SWIZZLE_BYTES[self.swizzle]
        if self.interleave == INTERLEAVE_NONE and span is not None and self.box[0] * esize > span:
            raise ValueError(f"tensor map box inner dimension {self.box[0] * esize} bytes exceeds the "
                             f"{span}-byte swizzle")
        if self.interleave != INTERLEAVE_NONE:
            raise ValueError("tensor map: interleaved layouts are not used here")
        if self.l2_promotion not in (0, 1, 2, 3) or self.oob_fill not in (0, 1):
            raise ValueError("tensor map: L2 promotion 0..3, OOB fill 0..1")

    def fields(self) -> list[int]:
        """The parameters as a flat int list (the emulation's input record): data type, rank,
        5 dims, 4 strides, 5 box, 5 element strides (unused entries 0), interleave, swizzle,
        L2 promotion, OOB fill."""
        def pad(xs, n):
            return list(xs) + [0] * (n - len(xs))

        return [self.data_type, self.rank, *pad(self.dims, 5), *pad(self.strides, 4), *pad(self.box, 5),
                *pad(self.element_strides, 5), self.interleave, self.swizzle, self.l2_promotion, self.oob_fill]


def rows_map(dtype: str, matrices: int, rows: int, cols: int, box_rows: int, box_cols: int = 64) -> TiledMap:
    """``matrices`` contiguous [rows][cols] 16-bit matrices (K or V: [batch * kv_heads][seq_k]
    [head_dim]) as a 3-D map {cols, rows, matrices}; a copy takes box_rows rows of box_cols
    columns of one matrix into a [box_rows][box_cols] tile in the 128-byte swizzle (box_cols
    x 2 = 128 bytes: one swizzle atom row a tile row). Rows past ``rows`` read as zeros."""
    esize = 2
    m = TiledMap(data_type=DTYPE_CODE[dtype], dims=(cols, rows, matrices),
                 strides=(cols * esize, rows * cols * esize), box=(box_cols, box_rows, 1), element_strides=(1, 1, 1))
    m.check()
    return m


@functools.lru_cache(maxsize=1)
def _encode_fn():
    try:
        lib = ctypes.CDLL(LIBCUDA)
    except OSError as err:
        raise RuntimeError(f"tensor maps need the CUDA driver ({LIBCUDA}): {err}") from None
    fn = lib.cuTensorMapEncodeTiled
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    # CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t rank,
    #   void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    #   const cuuint32_t* boxDim, const cuuint32_t* elementStrides, interleave, swizzle,
    #   l2Promotion, oobFill)  (enums are C ints)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def encode_tiled(m: TiledMap, address: int) -> bytes:
    """The driver's 128-byte CUtensorMap for ``m`` over device memory at ``address``."""
    m.check()
    if address % 16:
        raise ValueError(f"tensor map global address {address:#x}: must be 16-byte aligned")
    buf = ctypes.create_string_buffer(MAP_BYTES + 128)
    at = (ctypes.addressof(buf) + 127) // 128 * 128  # the C++ type's alignas(128)
    r = m.rank
    dims = (ctypes.c_uint64 * r)(*m.dims)
    strides = (ctypes.c_uint64 * max(r - 1, 1))(*(m.strides or (0,)))
    box = (ctypes.c_uint32 * r)(*m.box)
    estr = (ctypes.c_uint32 * r)(*m.element_strides)
    rc = _encode_fn()(at, m.data_type, r, address, dims, strides, box, estr, m.interleave, m.swizzle,
                      m.l2_promotion, m.oob_fill)
    if rc != CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled returned CUresult {rc} for {m}")
    return ctypes.string_at(at, MAP_BYTES)


class DeviceMaps:
    """Encoded maps copied into device buffers (the kernel takes their global addresses),
    kept by (map, address): the map is a function of both, so a cached one is always right.
    The copy happens on a step's first call for given arrays (the harness's check, outside
    timing); ``limit`` bounds the buffers held."""

    def __init__(self, limit: int = 64):
        self.limit = limit
        self._held: dict[tuple, object] = {}

    def get(self, m: TiledMap, address: int):
        key = (m, int(address))
        buf = self._held.get(key)
        if buf is None:
            import numpy as np  # noqa: PLC0415

            from paprof.measure.kernels import gpu  # noqa: PLC0415

            cp = gpu.cupy()
            raw = np.frombuffer(encode_tiled(m, int(address)), dtype=np.uint8)
            buf = cp.asarray(raw)  # CuPy's pool allocations are 512-byte aligned
            if buf.data.ptr % MAP_ALIGN:
                raise RuntimeError("a tensor map's device buffer is not 64-byte aligned")
            if len(self._held) >= self.limit:
                self._held.pop(next(iter(self._held)))
            self._held[key] = buf
        return buf
