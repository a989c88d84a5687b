"""Per-GPU figures the reports compare measurements against.

A data table, not code: add a GPU by adding a row. Nothing in paprof branches on a GPU's
name; it looks the name up here (``lookup``) and uses what the row says. A run's sidecar
may record its own measured ceiling (``read_ceiling_tbs``), which then wins over the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """What we know about one GPU model."""

    name: str
    """The name as the driver (and ncu's ``device__attribute_display_name``) reports it."""
    sms: int
    """Streaming multiprocessors."""
    l2_mb: float
    """L2 cache size in MB."""
    dram_datasheet_tbs: float
    """DRAM bandwidth from the datasheet, TB/s."""
    read_ceiling_tbs: float | None
    """Measured ceiling of a read-only streaming kernel, TB/s (None: not measured)."""
    ceiling_note: str = ""
    """Where the measured ceiling comes from."""
    aliases: tuple[str, ...] = ()
    """Other spellings of the name that mean this same model."""
    fp32_datasheet_tflops: float | None = None
    """CUDA-core fp32 (FMA) peak from the datasheet, TFLOP/s: the roofline's FP32 roof."""
    fp64_datasheet_tflops: float | None = None
    """CUDA-core fp64 (FMA) peak from the datasheet, TFLOP/s."""
    tensor_datasheet_tflops: float | None = None
    """Dense (no sparsity) bf16 tensor-core peak from the datasheet, TFLOP/s."""
    gemm_ceiling_tflops: float | None = None
    """Measured dense bf16 GEMM rate (cuBLAS), TFLOP/s: the roofline's tensor-core roof
    (None: not measured). A run's sidecar may record its own (``gemm_ceiling_tflops``)."""
    gemm_note: str = ""
    """Where the measured GEMM rate comes from."""

    @property
    def ceiling_tbs(self) -> float:
        """The bandwidth to compare decode attention against: measured if known, else datasheet."""
        return self.read_ceiling_tbs or self.dram_datasheet_tbs

    @property
    def ceiling_is_measured(self) -> bool:
        return self.read_ceiling_tbs is not None


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        name="NVIDIA H200",
        sms=132,
        l2_mb=60,
        dram_datasheet_tbs=4.8,
        read_ceiling_tbs=4.53,
        ceiling_note=("median of 10 runs of paprof's streaming-read kernel (2 GiB, 16-byte "
                      "loads) on the project's H200, 2026-11-29: 4.52 to 4.62 TB/s"),
        aliases=("H200", "NVIDIA H200 SXM", "NVIDIA H200 141GB HBM3e"),
        fp32_datasheet_tflops=67,
        fp64_datasheet_tflops=34,
        tensor_datasheet_tflops=989,
        gemm_ceiling_tflops=726,
        gemm_note=("torch.matmul (cuBLAS) bf16 8192^3 on the project's H200, 2026-12-01: "
                   "medians of 20 CUDA-event launches, 743 and 709 TFLOP/s in two rounds "
                   "(4096^3: 706 and 722, ~714)"),
    ),
    GpuSpec(
        name="NVIDIA H100 80GB HBM3",  # the SXM5 board
        sms=132,
        l2_mb=50,
        dram_datasheet_tbs=3.35,
        read_ceiling_tbs=None,
        aliases=("H100", "NVIDIA H100 SXM", "NVIDIA H100 SXM5 80GB"),
        fp32_datasheet_tflops=67,
        fp64_datasheet_tflops=34,
        tensor_datasheet_tflops=989,
    ),
)
"""The table. Keep one row per GPU model."""


def slug(name: str) -> str:
    """``"NVIDIA H200"`` -> ``"nvidia-h200"`` (the run store's GPU folder name)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


_BY_SLUG = {slug(n): spec for spec in GPUS for n in (spec.name, *spec.aliases)}


def lookup(name: str | None) -> GpuSpec | None:
    """The row for a GPU name (any spelling in its ``aliases``, case-insensitive), or None."""
    if not name:
        return None
    return _BY_SLUG.get(slug(str(name)))


@dataclass(frozen=True)
class Ceiling:
    """The bandwidth a run is measured against, and where that figure comes from."""

    tbs: float
    source: str
    measured: bool
    datasheet_tbs: float | None = None

    @property
    def gbs(self) -> float:
        return self.tbs * 1e3


def ceiling_for(gpu: str | None, sidecar: dict | None = None) -> Ceiling | None:
    """The read-bandwidth ceiling for one run: the sidecar's recorded one, else the table's."""
    spec = lookup(gpu)
    recorded = (sidecar or {}).get("read_ceiling_tbs")
    if recorded:
        return Ceiling(
            tbs=float(recorded),
            source=f"measured on this machine, recorded with the run ({gpu or 'unknown GPU'})",
            measured=True,
            datasheet_tbs=spec.dram_datasheet_tbs if spec else None,
        )
    if spec is None:
        return None
    if spec.ceiling_is_measured:
        return Ceiling(spec.read_ceiling_tbs, f"measured: {spec.ceiling_note}", True,
                       spec.dram_datasheet_tbs)
    return Ceiling(spec.dram_datasheet_tbs, f"{spec.name} datasheet", False,
                   spec.dram_datasheet_tbs)
