"""The hierarchical roofline: where each variant sits under the GPU's roofs.

Roofs: the bandwidth of DRAM, L2 and L1/shared memory (bytes/s) and the compute peaks
(FP32 FMA, tensor core; FP64 when a variant uses it) in FLOP/s. Each figure is the
measured one where paprof measures it (the DRAM read ceiling and the bf16 GEMM ceiling:
the run's sidecar, else :mod:`paprof.model.gpus`), else the datasheet's (``gpus.py``),
else ncu's peak at the kernel's own clock (the report's ``peak_sustained`` times the clock:
the only figure for L2 and L1, which datasheets do not give). Each roof says which.

Points: for each variant and memory level, the arithmetic intensity (FLOPs over the bytes
that level moved) and the FLOP rate achieved (FLOPs over the duration). FLOPs are what
the SASS executed, counted as ncu's roofline sections count them: FADD + FMUL + 2 x FFMA
thread instructions (FP64 likewise) plus the tensor cores' operations. Bytes: DRAM read +
write; at L2 the L2-to-SM crossbar bytes; at L1 the L1/shared-memory writeback bytes. The
``work`` point is the family's work model: the FLOPs and bytes the problem needs at the
least, over the same duration.

A point is bound by its level's memory roof when its intensity is below the ridge point
(compute roof / bandwidth), else by the compute roof. A variant's binding level is the
one whose attainable rate, min(compute, bandwidth x intensity), is lowest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.model.numbers import finite
from paprof.model.gpus import lookup

MEASURED, DATASHEET, NCU_PEAK = "measured", "datasheet", "ncu peak"
"""Where a roof's figure comes from."""

LEVELS = {"dram": "DRAM", "l2": "L2", "l1": "L1/shared"}
"""The memory levels, outermost first: key -> name."""
WORK = "work"
"""The level key of the work-model point (its bytes are DRAM bytes)."""
LEVEL_NAMES = {**LEVELS, WORK: "work model"}

COMPUTE = {"fp32": "FP32 FMA", "tensor": "Tensor core (bf16 dense)", "fp64": "FP64 FMA"}
"""The compute roofs: key -> name. A family's ``flop_kind`` is one of the keys."""


@dataclass(frozen=True)
class Roof:
    """One ceiling: a bandwidth (``memory``, bytes/s) or a FLOP rate (``compute``)."""

    key: str
    name: str
    kind: str
    """``memory`` or ``compute``."""
    rate: float
    """Bytes per second (memory) or FLOPs per second (compute)."""
    source: str
    """``measured``, ``datasheet`` or ``ncu peak``."""
    note: str = ""
    """Where the figure comes from, in words."""


@dataclass(frozen=True)
class Bound:
    """What holds one point down: the roof, and the rate it allows at that intensity."""

    roof: str
    """Key of the bounding roof (a memory level or a compute key)."""
    attainable: float
    """FLOP/s the roofs allow at the point's intensity."""
    ridge: float
    """FLOP/byte where the point's memory roof meets its compute roof."""


@dataclass(frozen=True)
class Point:
    """One variant at one level: FLOPs, bytes and seconds, and what bounds it."""

    level: str
    flops: float
    bytes: float
    seconds: float
    bound: Bound | None = None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte."""
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def flop_rate(self) -> float | None:
        """FLOPs per second."""
        return self.flops / self.seconds if self.seconds > 0 else None

    @property
    def of_attainable(self) -> float | None:
        """Achieved over attainable, in %."""
        if self.bound is None or not self.bound.attainable or self.flop_rate is None:
            return None
        return self.flop_rate / self.bound.attainable * 100


@dataclass
class VariantRoofline:
    """One variant's points."""

    label: str
    compute: str
    """Key of the compute roof its executed FLOPs are held to (the pipe that did most)."""
    points: list[Point]
    flops: dict[str, float | None] = field(default_factory=dict)
    """Executed FLOPs per pipe (``fp32``, ``fp64``, ``tensor``; None: not recorded)."""
    work_compute: str | None = None
    """Key of the compute roof of the work model (its ``flop_kind``)."""

    def point(self, level: str) -> Point | None:
        return next((p for p in self.points if p.level == level), None)

    @property
    def binding(self) -> Point | None:
        """The measured point with the lowest attainable rate: the level that binds."""
        bound = [p for p in self.points if p.level in LEVELS and p.bound is not None]
        return min(bound, key=lambda p: p.bound.attainable) if bound else None


@dataclass
class Roofline:
    """The roofs and every variant's points."""

    roofs: dict[str, Roof]
    variants: list[VariantRoofline]
    notes: list[str] = field(default_factory=list)

    def variant(self, label: str) -> VariantRoofline:
        return next(v for v in self.variants if v.label == label)


# -- the arithmetic ---------------------------------------------------------------------
def ridge(bandwidth: float, peak: float) -> float:
    """FLOPs per byte where a bandwidth roof (bytes/s) meets a compute roof (FLOP/s)."""
    return peak / bandwidth


def attainable(intensity: float, bandwidth: float, peak: float) -> float:
    """The FLOP rate the two roofs allow at ``intensity``: min(peak, bandwidth x intensity)."""
    return min(peak, bandwidth * intensity)


def bound(intensity: float, memory: Roof, compute: Roof) -> Bound:
    """Which of the two roofs holds a point of ``intensity`` down (below the ridge point:
    the memory roof; at or above it: the compute roof)."""
    at = ridge(memory.rate, compute.rate)
    key = memory.key if intensity < at else compute.key
    return Bound(key, attainable(intensity, memory.rate, compute.rate), at)


def kernel_counts(values: dict) -> dict[str, float | None]:
    """One kernel's executed FLOPs per pipe, bytes per level and seconds, from its row
    (catalogue columns); None where the report lacks an input.

    FLOPs: (FADD + FMUL + 2 FFMA per elapsed cycle, all SMs) x elapsed cycles per SM
    sub-partition, as ncu's roofline counts them; tensor: the operations of every input
    type. Bytes: DRAM read + write (``dram_bytes``), L2 and L1 rates x the duration.
    """
    g = {k: finite(v) for k, v in values.items()}
    duration = g.get("duration_us")
    seconds = duration * 1e-6 if duration else None
    cycles = g.get("smsp_cycles_elapsed")

    def pipe(kind, add, mul, fma):
        parts = [g.get(f"{kind}_{op}_per_cycle") for op in (add, mul, fma)]
        if cycles is None or any(p is None for p in parts):
            return None
        return (parts[0] + parts[1] + 2 * parts[2]) * cycles

    tensor = [g.get(f"tensor_{t}_flops") for t in ("fp16", "bf16", "tf32")]
    out = {
        "seconds": seconds,
        "fp32": pipe("fp32", "fadd", "fmul", "ffma"),
        "fp64": pipe("fp64", "dadd", "dmul", "dfma"),
        "tensor": None if any(t is None for t in tensor) else sum(tensor),
        "dram": g.get("dram_bytes"),
    }
    for level in ("l2", "l1"):
        rate = g.get(f"{level}_bytes_per_second")
        out[level] = rate * seconds if (rate is not None and seconds) else None
    return out


def variant_counts(kernels: list[dict]) -> dict[str, float | None]:
    """The kernels' counts summed (a count some kernel lacks is None)."""
    each = [kernel_counts(k) for k in kernels]
    if not each:
        return {}
    return {key: (None if any(c[key] is None for c in each) else sum(c[key] for c in each))
            for key in each[0]}


# -- the roofs ---------------------------------------------------------------------------
def _median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None and x > 0)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _ncu_peaks(values: list[dict]) -> dict[str, float | None]:
    """Each roof at the kernels' clock, as the reports give it (median over the variants)."""
    def each(f):
        out = []
        for v in values:
            g = {k: finite(x) for k, x in v.items()}
            try:
                out.append(f(g))
            except (TypeError, KeyError):  # an input is None or absent
                continue
        return _median(out)

    return {
        "dram": each(lambda g: g["dram_peak_bytes_per_cycle"] * g["dram_clock_hz"]),
        "l2": each(lambda g: g["l2_peak_bytes_per_cycle"] * g["l2_clock_hz"]),
        "l1": each(lambda g: g["l1_peak_bytes_per_cycle"] * g["l1_clock_hz"]),
        "fp32": each(lambda g: 2 * g["fp32_peak_ffma_per_cycle"] * g["sm_clock_hz"]),
        "fp64": each(lambda g: 2 * g["fp64_peak_dfma_per_cycle"] * g["sm_clock_hz"]),
        "tensor": each(lambda g: g["tensor_peak_flops"]),
    }


_AT_CLOCK = "the report's peak per cycle at the kernel's clock"


def roofs_for(variants) -> dict[str, Roof]:
    """The roofs for ``variants`` (``VariantResult`` objects): measured, else datasheet,
    else ncu's peak. The first variant with a GPU name and a sidecar decides the table row
    and the recorded ceilings (a comparison across GPUs is warned about elsewhere)."""
    gpu = next((v.gpu for v in variants if v.gpu), None)
    spec = lookup(gpu)
    sidecar = next((v.sidecar for v in variants if v.sidecar), None) or {}
    ceiling = next((v.ceiling for v in variants if v.ceiling is not None), None)
    peaks = _ncu_peaks([v.values for v in variants])
    roofs: dict[str, Roof] = {}

    def put(key, name, kind, *choices):
        for rate, source, note in choices:
            if rate:
                roofs[key] = Roof(key, name, kind, float(rate), source, note)
                return

    put("dram", LEVELS["dram"], "memory",
        (ceiling.tbs * 1e12 if ceiling else None,
         MEASURED if ceiling and ceiling.measured else DATASHEET, ceiling.source if ceiling else ""),
        (peaks["dram"], NCU_PEAK, _AT_CLOCK))
    put("l2", LEVELS["l2"], "memory", (peaks["l2"], NCU_PEAK, "L2-to-SM crossbar, " + _AT_CLOCK))
    put("l1", LEVELS["l1"], "memory", (peaks["l1"], NCU_PEAK, "L1/shared-memory writeback, " + _AT_CLOCK))
    sheet = f"{spec.name} datasheet" if spec else ""
    put("fp32", COMPUTE["fp32"], "compute",
        ((spec.fp32_datasheet_tflops or 0) * 1e12 if spec else None, DATASHEET, sheet),
        (peaks["fp32"], NCU_PEAK, _AT_CLOCK))
    recorded = finite(sidecar.get("gemm_ceiling_tflops"))
    put("tensor", COMPUTE["tensor"], "compute",
        ((recorded or 0) * 1e12, MEASURED, f"bf16 GEMM measured on this machine, recorded with the run ({gpu})"),
        ((spec.gemm_ceiling_tflops or 0) * 1e12 if spec else None, MEASURED,
         f"bf16 GEMM: {spec.gemm_note}" if spec else ""),
        ((spec.tensor_datasheet_tflops or 0) * 1e12 if spec else None, DATASHEET, sheet + " (dense bf16)"),
        (peaks["tensor"], NCU_PEAK, "dense bf16 wgmma, " + _AT_CLOCK))
    put("fp64", COMPUTE["fp64"], "compute",
        ((spec.fp64_datasheet_tflops or 0) * 1e12 if spec else None, DATASHEET, sheet),
        (peaks["fp64"], NCU_PEAK, _AT_CLOCK))
    return roofs


# -- the points ---------------------------------------------------------------------------
def _main_pipe(counts: dict) -> str:
    known = {k: counts.get(k) or 0.0 for k in ("fp32", "tensor", "fp64")}
    return max(known, key=lambda k: known[k])


def variant_roofline(v, roofs: dict[str, Roof]) -> VariantRoofline | None:
    """The points of one ``VariantResult``; None when it has neither executed FLOPs nor a
    work model with FLOPs."""
    kernels = [k.values for k in v.kernels] or [v.values]
    counts = variant_counts(kernels)
    seconds = counts.get("seconds")
    duration = finite(v.get("duration_us"))
    if seconds is None and duration:
        seconds = duration * 1e-6
    pipes = {k: counts.get(k) for k in ("fp32", "fp64", "tensor")}
    flops = sum(x for x in pipes.values() if x is not None) if any(x is not None for x in pipes.values()) else None
    compute = _main_pipe(pipes)
    points = []
    if flops and seconds:
        for level in LEVELS:
            moved = counts.get(level)
            if moved:
                points.append(_bounded(Point(level, flops, moved, seconds), roofs, level, compute))
    work = (v.sidecar or {}).get("work") if isinstance((v.sidecar or {}).get("work"), dict) else {}
    work_compute = {"fp32": "fp32", "tensor": "tensor", "fp64": "fp64"}.get(work.get("flop_kind") or "fp32", "fp32")
    w_flops, w_bytes = finite(v.get("work_flops")), finite(v.get("work_bytes"))
    if w_flops and w_bytes and seconds:
        points.append(_bounded(Point(WORK, w_flops, w_bytes, seconds), roofs, "dram", work_compute))
    if not points:
        return None
    return VariantRoofline(v.label, compute, points, pipes, work_compute if w_flops else None)


def _bounded(point: Point, roofs: dict[str, Roof], memory: str, compute: str) -> Point:
    if memory in roofs and compute in roofs and point.intensity:
        return Point(point.level, point.flops, point.bytes, point.seconds,
                     bound(point.intensity, roofs[memory], roofs[compute]))
    return point


def build(cmp) -> Roofline | None:
    """The roofline of a ``Comparison``; None when no variant has a point (no roofline
    sections in the reports and no work model with FLOPs, or runs on several GPUs: roofs
    belong to one GPU, and one chart of two GPUs' points under one GPU's roofs would put
    the faster GPU's points over its roofs)."""
    if len({v.gpu for v in cmp.variants if v.gpu}) > 1:
        return None
    roofs = roofs_for(cmp.variants)
    pairs = [(v, variant_roofline(v, roofs)) for v in cmp.variants]
    made = [m for _, m in pairs if m is not None]
    if not made:
        return None
    used = {m.compute for m in made if any(p.level in LEVELS for p in m.points)} | \
           {m.work_compute for m in made if m.work_compute}
    if "fp64" not in used:
        roofs.pop("fp64", None)
    notes = []
    lacking = [v.label for v, m in pairs if m is None or not any(p.level in LEVELS for p in m.points)]
    if lacking:
        notes.append(f"No executed-FLOP or per-level byte counts for {', '.join(lacking)} (the "
                     "reports lack ncu's roofline sections: preset 'default' records them); "
                     "only the work-model point is drawn.")
    if any(m.flops.get("tensor") is None and any(p.level in LEVELS for p in m.points) for m in made):
        notes.append("Tensor-core operations were not recorded for some variants "
                     "(SpeedOfLight_HierarchicalTensorRooflineChart); their FLOPs are the CUDA cores' only.")
    return Roofline(roofs, made, notes)
