"""THE metric catalogue: every table column that comes from Nsight Compute.

One :class:`Metric` per column: the ncu metric it reads (or, for a derived column, the
formula over other columns), its unit, the ncu section that collects it and a one-line
meaning. The loader, the bottleneck rules, the presets and the reports all read this
module; no other module spells an ncu metric name.

Every ``ncu_name`` of a metric whose section is in :data:`DEFAULT_SECTIONS` was checked
against the names ncu 2025.3.1 recorded on the H200 with those sections
(``tests/data/ncu-2025.3.1-h200-default-sections-metrics.txt``). Note that DRAM
throughput % is ``gpu__dram_throughput...``, not ``dram__throughput...`` (absent there).

Traffic per memory level (the ``level`` of an entry): bytes, requests, sectors and hit
rates between the SM and L1 (global loads and stores), in shared memory, between L1 and
L2, between L2 and DRAM. Their sections are in :data:`TRAFFIC_SECTIONS` (paprof's
``default`` preset collects them, ``basic`` does not); every name was checked against the
metric groups ncu 2025.3.1 recorded on the H200 for those sections
(``tests/data/ncu-2025.3.1-h200-traffic-sections-metrics.txt``).

DRAM bytes: the basic sections record no byte *counter* for DRAM, only the rate
``dram__bytes.sum.per_second``. So ``dram_bytes`` is ``dram_bytes_read + dram_bytes_write``
when the report has those counters (section ``MemoryWorkloadAnalysis_Chart``, in paprof's
``default`` preset and ncu's ``full`` set), else ``dram_bytes_per_second * duration``.
Both count reads plus writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Sections of paprof's ``basic`` preset, ncu's default set before paprof added the traffic
#: sections (the H200 metric list in tests/data was recorded with exactly these).
DEFAULT_SECTIONS = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "MemoryWorkloadAnalysis",
    "WorkloadDistribution",
    "ComputeWorkloadAnalysis",
    "SchedulerStats",
    "WarpStateStats",
)

#: Sections that ``default`` adds to them for the traffic per memory level and the
#: instruction counts (each catalogue entry of these sections was checked against the
#: metric groups ncu recorded on the H200 with them).
TRAFFIC_SECTIONS = (
    "MemoryWorkloadAnalysis_Tables",
    "MemoryWorkloadAnalysis_Chart",
    "InstructionStats",
)

#: The memory levels of the traffic entries (``Metric.level``), from the SM outwards.
LEVELS = ("SM<->L1", "shared memory", "L1<->L2", "L2<->DRAM", "instructions")

#: The section name for device attributes, which ncu records with any section.
DEVICE = "(device attributes)"
#: The section name for derived columns: computed by paprof from other columns.
DERIVED = "(derived)"
#: The section name for the work model: the family's bytes and FLOPs, from the run's
#: sidecar (schema 2); absent for a report paprof did not write.
WORK = "(work model)"

#: How :func:`paprof.model.load.variant_rows` combines the kernels of one variant
#: (``RECOMPUTED``: computed again from the combined row's inputs, as a ratio must be).
SUM, WEIGHTED, DOMINANT, RECOMPUTED = "sum", "weighted", "dominant", "recomputed"


@dataclass(frozen=True)
class Metric:
    """One table column read from an ncu report or derived from other columns."""

    column: str
    """Column name in the DataFrame (snake_case, unit in the name where not obvious)."""

    ncu_name: str | None
    """The ncu metric read by name; ``None`` for a derived column."""

    unit: str
    """Unit of the column's values (after ``scale``): ``us``, ``%``, ``byte``, ``count``..."""

    section: str
    """The ncu section (``--section`` identifier) that collects the metric; for a derived
    column :data:`DERIVED`. The loader names it when the metric is absent."""

    meaning: str
    """One line a user reads in a legend or tooltip."""

    scale: float = 1.0
    """Factor from ncu's unit (``ncu_unit``) to ``unit``: 1e-3 for ns -> us."""

    ncu_unit: str | None = None
    """The base unit ncu stores the metric in (``nsecond``, ``byte/second``...); the loader
    reads raw values and never asks the report (see ``ncu_reader.read_metric``)."""

    combine: str = DOMINANT
    """How a multi-kernel variant's row combines its kernels: ``sum`` (durations, cycles,
    bytes), ``weighted`` (percentages and rates, weighted by duration), ``dominant``
    (taken from the longest kernel: launch configuration, occupancy) or ``recomputed``
    (a ratio, computed again from the combined inputs)."""

    formula: str | None = None
    """For a derived column: how it is computed, in words."""

    inputs: tuple[str, ...] = field(default=())
    """For a derived column: the columns it is computed from."""

    text: bool = False
    """True for a string-valued metric (read with ``as_string``), else a float."""

    level: str | None = None
    """For a traffic counter, the memory level it measures (one of :data:`LEVELS`); the
    reports' "traffic per level" table groups its rows by it."""

    aliases: tuple[str, ...] = field(default=())
    """Other spellings of the same quantity that older Nsight Compute versions record
    (read, in order, when ``ncu_name`` is absent), so that one set of counters gets one
    column, and so one label, whatever version wrote the report."""

    @property
    def names(self) -> tuple[str, ...]:
        """``ncu_name`` then its aliases: every name the loader asks a report for."""
        return ((self.ncu_name,) if self.ncu_name else ()) + self.aliases

    @property
    def derived(self) -> bool:
        """True when paprof computes the column rather than reading one ncu metric."""
        return self.ncu_name is None

    @property
    def in_default_sections(self) -> bool:
        """True when ncu's default sections (or any section, for device attributes)
        collect the metric."""
        return self.section in DEFAULT_SECTIONS or self.section == DEVICE


SOL, LAUNCH, OCC = "SpeedOfLight", "LaunchStats", "Occupancy"
MWA, SCHED, WARP = "MemoryWorkloadAnalysis", "SchedulerStats", "WarpStateStats"
MWA_CHART = "MemoryWorkloadAnalysis_Chart"
MWA_TABLES = "MemoryWorkloadAnalysis_Tables"

_PCT = dict(unit="%", combine=WEIGHTED)

# Measured metrics, in the order of the DataFrame schema where they belong to it.
_MEASURED = (
    Metric("gpu", "device__attribute_display_name", "text", DEVICE,
           "GPU name as the report records it (used when no sidecar names the GPU)",
           text=True),
    Metric("duration_us", "gpu__time_duration.sum", "us", SOL,
           "Kernel duration measured by ncu", scale=1e-3, ncu_unit="nsecond",
           combine=SUM),
    Metric("elapsed_cycles", "gpc__cycles_elapsed.max", "cycle", SOL,
           "Elapsed GPU (GPC) clock cycles of the kernel", ncu_unit="cycle", combine=SUM),
    Metric("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="Compute (SM) throughput: the busiest SM sub-unit, % of peak",
           **_PCT),
    Metric("memory_throughput_pct",
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="Memory throughput: the max over DRAM, L1 and L2, % of peak "
           "(not by itself evidence of DRAM bounds)", **_PCT),
    Metric("dram_throughput_pct", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="DRAM throughput, % of peak",
           aliases=("dram__throughput.avg.pct_of_peak_sustained_elapsed",), **_PCT),
    Metric("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active",
           section=SOL, meaning="L1/TEX cache throughput, % of peak (of active cycles)",
           **_PCT),
    Metric("l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="L2 cache throughput, % of peak", **_PCT),
    Metric("dram_active_cycles", "dram__cycles_active.avg", "cycle", MWA,
           "DRAM cycles with a transfer, average per DRAM unit (tracks unique bytes moved)",
           ncu_unit="cycle", combine=SUM),
    Metric("registers_per_thread", "launch__registers_per_thread", "register", LAUNCH,
           "Registers allocated per thread", ncu_unit="register/thread"),
    Metric("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct",
           "%", OCC, "Theoretical occupancy: resident warps the limits allow, % of max"),
    Metric("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "%", OCC, "Achieved occupancy: warps resident on average, % of max"),
    Metric("block_limit_registers", "launch__occupancy_limit_registers", "block", OCC,
           "Blocks per SM the register use allows", ncu_unit="block"),
    Metric("block_limit_shared_mem", "launch__occupancy_limit_shared_mem", "block", OCC,
           "Blocks per SM the shared memory use allows", ncu_unit="block"),
    Metric("block_limit_warps", "launch__occupancy_limit_warps", "block", OCC,
           "Blocks per SM the warps per block allow", ncu_unit="block"),
    Metric("block_limit_blocks", "launch__occupancy_limit_blocks", "block", OCC,
           "Blocks per SM the hardware's resident-block limit allows", ncu_unit="block"),
    Metric("waves_per_sm", "launch__waves_per_multiprocessor", "wave", LAUNCH,
           "Grid size over the blocks all SMs can hold at once (< 1: the GPU is not full)"),
    Metric("grid_size", "launch__grid_size", "block", LAUNCH,
           "Blocks in the grid", ncu_unit="block"),
    Metric("block_size", "launch__block_size", "thread", LAUNCH,
           "Threads per block", ncu_unit="thread"),
    # --- beyond the documented schema (docs/architecture.md): inputs of derived columns and of the rules ---
    Metric("dram_bytes_per_second", "dram__bytes.sum.per_second", "byte/s", MWA,
           "DRAM bytes (read + write) per second", ncu_unit="byte/second",
           combine=WEIGHTED),
    Metric("dram_bytes_read", "dram__bytes_read.sum", "byte", MWA_CHART,
           "DRAM bytes read into L2 (paprof's default preset, ncu's full set; not in the "
           "basic sections)", ncu_unit="byte", combine=SUM, level="L2<->DRAM"),
    Metric("dram_bytes_write", "dram__bytes_write.sum", "byte", MWA_CHART,
           "DRAM bytes written from L2 (paprof's default preset, ncu's full set; not in the "
           "basic sections)", ncu_unit="byte", combine=SUM, level="L2<->DRAM"),
    Metric("shared_mem_static_bytes", "launch__shared_mem_per_block_static", "byte",
           LAUNCH, "Static shared memory per block", ncu_unit="byte/block"),
    Metric("shared_mem_dynamic_bytes", "launch__shared_mem_per_block_dynamic", "byte",
           LAUNCH, "Dynamic shared memory per block", ncu_unit="byte/block"),
    Metric("sm_count", "launch__sm_count", "SM", LAUNCH,
           "SMs of the GPU the kernel ran on", ncu_unit="sm",
           aliases=("device__attribute_multiprocessor_count",)),
    Metric("sm_active_cycles", "sm__cycles_active.avg", "cycle", SOL,
           "Cycles an SM had at least one warp resident, average over SMs",
           ncu_unit="cycle", combine=SUM),
    Metric("lsu_pipe_pct", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="LSU pipe (loads, stores, shared memory): instructions "
           "executed, % of peak", **_PCT),
    Metric("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="FMA pipe (fp32 multiply-add) busy cycles, % of peak",
           **_PCT),
    Metric("alu_pipe_pct", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="ALU pipe (integer, logic, compare) busy cycles, % of peak",
           **_PCT),
    Metric("fp64_pipe_pct", "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="FP64 pipe busy cycles, % of peak", **_PCT),
    Metric("xu_pipe_pct", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="XU pipe (exp, rsqrt, conversions): instructions executed, "
           "% of peak", **_PCT),
    Metric("tensor_pipe_pct",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="Tensor-core pipe busy cycles, % of peak", **_PCT),
    Metric("issue_slots_busy_pct", "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
           section=SOL, meaning="Instructions issued, % of the schedulers' peak issue rate",
           # ncu 2020.3-2023.2's SpeedOfLight: the share of cycles with an issue (one
           # instruction a cycle at most, so the same ratio)
           aliases=("sm__issue_active.avg.pct_of_peak_sustained_elapsed",
                    "sm__issue_active.avg.pct_of_peak_sustained_active"), **_PCT),
    Metric("issue_active_pct", "smsp__issue_active.avg.pct_of_peak_sustained_active",
           section=SCHED, meaning="Active cycles in which a scheduler issued an instruction",
           **_PCT),
    Metric("warps_active_per_scheduler", "smsp__warps_active.avg.per_cycle_active",
           "warp", SCHED, "Warps resident per scheduler per active cycle",
           combine=WEIGHTED),
    Metric("warps_eligible_per_scheduler", "smsp__warps_eligible.avg.per_cycle_active",
           "warp", SCHED, "Warps ready to issue per scheduler per active cycle",
           combine=WEIGHTED),
    Metric("warp_cycles_per_issue", "smsp__average_warp_latency_per_inst_issued.ratio",
           "cycle", WARP, "Cycles a warp waits between two issued instructions",
           combine=WEIGHTED),
    # The warp-time identity's inputs (paprof.model.decompose): per scheduler,
    # active cycles x warps resident = instructions issued x cycles per issued instruction.
    Metric("smsp_cycles_active", "smsp__cycles_active.avg", "cycle", SCHED,
           "Cycles a scheduler had at least one warp resident, average over schedulers "
           "(elapsed minus these: schedulers left idle by the grid)", ncu_unit="cycle",
           combine=SUM),
    Metric("instructions_issued", "smsp__inst_issued.sum", "inst", "InstructionStats",
           "Warp-level instructions issued, all schedulers", combine=SUM,
           level="instructions"),
    Metric("threads_per_instruction", "smsp__thread_inst_executed_per_inst_executed.ratio",
           "thread", WARP, "Threads active per executed warp instruction (32: no divergence, "
           "no inactive lanes)", combine=WEIGHTED),
    Metric("barriers_per_block", "launch__barrier_count", "barrier", LAUNCH,
           "Named barriers the kernel uses per block (0: none)"),
    # Deterministic counts the regression gate takes exactly (recorded with the default
    # sections on the H200: tests/data's list).
    Metric("instructions_executed", "inst_executed", "inst", WARP,
           "Warp-level SASS instructions executed (the same count as InstructionStats' "
           "smsp__inst_executed.sum)", combine=SUM, level="instructions",
           aliases=("smsp__inst_executed.sum", "sm__inst_executed.sum")),
    Metric("spill_instructions", "sass__inst_executed_register_spilling", "inst", WARP,
           "Warp-level instructions executed that spill or restore registers (local or "
           "shared memory)", combine=SUM),
    Metric("l1_hit_rate_pct", "l1tex__t_sector_hit_rate.pct", "%", MWA,
           "L1/TEX sector hit rate (all accesses)", combine=WEIGHTED, level="L1<->L2"),
    Metric("l2_hit_rate_pct", "lts__t_sector_hit_rate.pct", "%", MWA,
           "L2 sector hit rate", combine=WEIGHTED, level="L2<->DRAM"),
    Metric("warps_active_per_sm", "sm__warps_active.avg.per_cycle_active", "warp", OCC,
           "Warps resident per SM per active cycle (achieved occupancy as a warp count)",
           combine=WEIGHTED),
)

# Traffic per memory level (sections MemoryWorkloadAnalysis_Chart/_Tables, InstructionStats).
_TRAFFIC = (
    Metric("global_load_instructions", "smsp__sass_inst_executed_op_global_ld.sum", "inst",
           MWA_CHART, "Warp-level global load instructions executed (SM -> L1 requests)",
           combine=SUM, level="SM<->L1"),
    Metric("global_store_instructions", "smsp__sass_inst_executed_op_global_st.sum", "inst",
           MWA_CHART, "Warp-level global store instructions executed", combine=SUM,
           level="SM<->L1"),
    Metric("l1_global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
           "request", MWA_TABLES, "Global load requests L1/TEX received from the SMs",
           combine=SUM, level="SM<->L1"),
    Metric("l1_global_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
           "sector", MWA_TABLES, "32-byte sectors the global loads asked L1/TEX for "
           "(hits and misses)", combine=SUM, level="SM<->L1"),
    Metric("l1_global_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
           "sector", MWA_TABLES, "32-byte sectors the global stores wrote through L1/TEX",
           combine=SUM, level="SM<->L1"),
    Metric("l1_global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
           "request", MWA_CHART, "Global store requests L1/TEX received from the SMs",
           combine=SUM, level="SM<->L1"),
    Metric("global_atomic_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
           "request", MWA_TABLES, "Global atomic requests (with a return value) L1/TEX received",
           combine=SUM, level="SM<->L1"),
    Metric("global_reduction_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
           "request", MWA_CHART, "Global reduction requests (atomics without a return value)",
           combine=SUM, level="SM<->L1"),
        Metric("l1_global_load_hit_rate_pct",
           "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", "%", MWA_TABLES,
           "L1/TEX sector hit rate of global loads", combine=WEIGHTED, level="L1<->L2"),
    Metric("shared_load_instructions", "smsp__sass_inst_executed_op_shared_ld.sum", "inst",
           MWA_CHART, "Warp-level shared-memory load instructions executed", combine=SUM,
           level="shared memory"),
    Metric("shared_store_instructions", "smsp__sass_inst_executed_op_shared_st.sum", "inst",
           MWA_CHART, "Warp-level shared-memory store instructions executed", combine=SUM,
           level="shared memory"),
    Metric("shared_load_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "wavefront", MWA_TABLES, "Shared-memory load wavefronts (passes through the "
           "data banks; one per instruction without bank conflicts)", combine=SUM,
           level="shared memory"),
    Metric("shared_store_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
           "wavefront", MWA_TABLES, "Shared-memory store wavefronts", combine=SUM,
           level="shared memory"),
    Metric("shared_load_bank_conflicts",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "conflict", MWA_TABLES,
           "Shared-memory bank conflicts of loads (extra wavefronts)", combine=SUM,
           level="shared memory"),
    Metric("shared_store_bank_conflicts",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "conflict", MWA_TABLES,
           "Shared-memory bank conflicts of stores (extra wavefronts)", combine=SUM,
           level="shared memory"),
    Metric("l2_to_l1_bytes", "l1tex__m_xbar2l1tex_read_bytes.sum", "byte", MWA_CHART,
           "Bytes the crossbar delivered from L2 to the SMs' L1/TEX (each SM that reads a "
           "line counts it)", ncu_unit="byte", combine=SUM, level="L1<->L2"),
    Metric("l1_to_l2_bytes", "l1tex__m_l1tex2xbar_write_bytes.sum", "byte", MWA_CHART,
           "Bytes L1/TEX sent to L2 over the crossbar (stores, atomics)", ncu_unit="byte",
           combine=SUM, level="L1<->L2"),
    Metric("l2_read_sectors_from_l1", "lts__t_sectors_srcunit_tex_op_read.sum", "sector",
           MWA_TABLES, "32-byte sectors L2 looked up for L1/TEX reads (after the request "
           "coalescer merged the SMs' identical reads, so it can be under the crossbar's "
           "bytes / 32)", combine=SUM, level="L1<->L2"),
    Metric("l2_write_sectors_from_l1", "lts__t_sectors_srcunit_tex_op_write.sum", "sector",
           MWA_TABLES, "32-byte sectors L1/TEX wrote into L2", combine=SUM, level="L1<->L2"),
)

#: Warp stall reasons ncu's WarpStateStats section records (H200, ncu 2025.3.1), each as
#: "cycles per issued instruction a warp spends stalled for this reason".
STALL_REASONS = (
    "long_scoreboard", "barrier", "short_scoreboard", "mio_throttle", "lg_throttle",
    "math_pipe_throttle", "wait", "not_selected", "selected", "no_instruction",
    "branch_resolving", "dispatch_stall", "drain", "imc_miss", "membar", "misc",
    "sleeping", "tex_throttle", "gmma",
)

_STALLS = tuple(
    Metric(f"stall_{reason}",
           f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
           "cycle", WARP,
           f"Warp cycles per issued instruction stalled on {reason.replace('_', ' ')}",
           combine=WEIGHTED)
    for reason in STALL_REASONS
)

_DERIVED = (
    Metric("dram_bytes", None, "byte", DERIVED,
           "DRAM bytes moved (read + write)", combine=SUM,
           formula="dram_bytes_read + dram_bytes_write when the report has both, else "
           "dram_bytes_per_second x duration",
           inputs=("dram_bytes_read", "dram_bytes_write", "dram_bytes_per_second",
                   "duration_us")),
    Metric("achieved_bandwidth_gbs", None, "GB/s", DERIVED,
           "Achieved DRAM bandwidth (read + write), 1 GB = 1e9 bytes", combine=WEIGHTED,
           formula="dram_bytes / duration, in 1e9 bytes per second",
           inputs=("dram_bytes", "duration_us")),
    Metric("l1_global_load_bytes", None, "byte", DERIVED,
           "Bytes the global loads asked L1/TEX for (SM <- L1; re-reads that hit count "
           "each time)", combine=SUM, formula="32 x l1_global_load_sectors (a sector is 32 "
           "bytes)", inputs=("l1_global_load_sectors",), level="SM<->L1"),
    Metric("l1_global_store_bytes", None, "byte", DERIVED,
           "Bytes the global stores wrote through L1/TEX (SM -> L1)", combine=SUM,
           formula="32 x l1_global_store_sectors", inputs=("l1_global_store_sectors",),
           level="SM<->L1"),
    Metric("shared_mem_per_block_bytes", None, "byte", DERIVED,
           "Shared memory per block, static plus dynamic (without the driver's reserve)",
           formula="shared_mem_static_bytes + shared_mem_dynamic_bytes",
           inputs=("shared_mem_static_bytes", "shared_mem_dynamic_bytes")),
    Metric("occupancy_limiter", None, "text", DERIVED,
           "Which per-SM block limit is smallest: registers, shared_mem, warps or blocks",
           formula="the name of the smallest of block_limit_blocks, block_limit_warps, "
           "block_limit_registers, block_limit_shared_mem (ties: in that order, hardware "
           "caps first); empty when all are missing",
           inputs=("block_limit_blocks", "block_limit_warps", "block_limit_registers",
                   "block_limit_shared_mem"),
           text=True),
    Metric("top_stall_reason", None, "text", DERIVED,
           "The stall reason with the most warp cycles per issued instruction",
           formula="the reason of the largest stall_* column, ignoring 'selected' (that "
           "is issuing, not stalling); empty when none was recorded",
           inputs=tuple(m.column for m in _STALLS), text=True),
    Metric("top_stall_cycles", None, "cycle", DERIVED,
           "Warp cycles per issued instruction of the top stall reason", combine=WEIGHTED,
           formula="the value of the stall_* column named by top_stall_reason",
           inputs=tuple(m.column for m in _STALLS)),
)

# Ratios of the traffic counters, computed once on the table (``load.ratios``) for every
# reader: the report's traffic table, the notebook, the explanation.
_RATIOS = (
    Metric("bytes_per_global_load", None, "byte", DERIVED,
           "Bytes a global load instruction asked L1 for (16 x 32 lanes = 512 for 16-byte "
           "vector loads)", combine=RECOMPUTED,
           formula="l1_global_load_bytes / global_load_instructions",
           inputs=("l1_global_load_bytes", "global_load_instructions")),
    Metric("l1_load_per_dram_byte", None, "ratio", DERIVED,
           "Bytes the global loads asked L1 for, per DRAM byte (re-reads that hit count each "
           "time)", combine=RECOMPUTED, formula="l1_global_load_bytes / dram_bytes",
           inputs=("l1_global_load_bytes", "dram_bytes")),
    Metric("l2_to_sm_per_dram_byte", None, "ratio", DERIVED,
           "L2 -> SM bytes per DRAM byte: how many times a byte read from DRAM reaches the "
           "SMs", combine=RECOMPUTED, formula="l2_to_l1_bytes / dram_bytes",
           inputs=("l2_to_l1_bytes", "dram_bytes")),
    Metric("instructions_per_dram_byte", None, "ratio", DERIVED,
           "Warp instructions executed per DRAM byte", combine=RECOMPUTED,
           formula="instructions_executed / dram_bytes",
           inputs=("instructions_executed", "dram_bytes")),
    Metric("shared_bank_conflicts", None, "count", DERIVED,
           "Shared-memory bank conflicts, loads and stores", combine=RECOMPUTED,
           formula="shared_load_bank_conflicts + shared_store_bank_conflicts",
           inputs=("shared_load_bank_conflicts", "shared_store_bank_conflicts")),
)

_WORK = (
    Metric("work_bytes", None, "byte", WORK,
           "Bytes the problem must move at the least (the family's work model)",
           formula="the sidecar's work.bytes"),
    Metric("work_flops", None, "FLOP", WORK,
           "FLOPs the problem must do (the family's work model)",
           formula="the sidecar's work.flops"),
    Metric("work_tbs", None, "TB/s", WORK,
           "Useful bandwidth: the bytes the problem must move over the variant's duration",
           combine=WEIGHTED, formula="work_bytes / duration (a variant of several kernels: "
           "over their summed duration)", inputs=("work_bytes", "duration_us")),
    Metric("work_tflops", None, "TFLOP/s", WORK,
           "Useful arithmetic rate: the FLOPs the problem must do over the variant's duration",
           combine=WEIGHTED, formula="work_flops / duration (a variant of several kernels: "
           "over their summed duration)", inputs=("work_flops", "duration_us")),
)

# Roofline inputs (paprof.model.roofline): FLOPs from the SASS thread-instruction
# rates, bytes per memory level and every level's peak, as ncu's roofline sections record
# them on the H200 (ncu 2025.3.1, preset 'default'). ncu's hierarchical roofline counts L2
# traffic as the L2-to-SM crossbar bytes and L1 traffic as the L1/shared-memory writeback
# bytes (local, global and shared); the rates times the duration give the bytes.
ROOF, TENSOR_ROOF = "SpeedOfLight_RooflineChart", "SpeedOfLight_HierarchicalTensorRooflineChart"
_OPS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
_ROOFLINE = tuple(
    Metric(f"{kind}_{op}_per_cycle", _OPS.format(op), "inst/cycle", ROOF,
           f"Predicated-on {op.upper()} thread instructions per elapsed cycle, all SMs "
           f"({'2 FLOPs' if op.endswith('fma') else '1 FLOP'} each)", combine=WEIGHTED)
    for kind, ops in (("fp32", ("fadd", "fmul", "ffma")), ("fp64", ("dadd", "dmul", "dfma")))
    for op in ops
) + (
    Metric("smsp_cycles_elapsed", "smsp__cycles_elapsed.avg", "cycle", SOL,
           "Elapsed cycles per SM sub-partition (turns per-cycle rates into counts)",
           combine=SUM),
    Metric("fp32_peak_ffma_per_cycle", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
           "inst/cycle", ROOF, "Peak FFMA thread instructions per cycle, all SMs"),
    Metric("fp64_peak_dfma_per_cycle", "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
           "inst/cycle", ROOF, "Peak DFMA thread instructions per cycle, all SMs"),
    Metric("sm_clock_hz", "sm__cycles_elapsed.avg.per_second", "Hz", ROOF,
           "SM clock during the kernel", combine=WEIGHTED),
    Metric("dram_peak_bytes_per_cycle", "dram__bytes.sum.peak_sustained", "byte/cycle", ROOF,
           "Peak DRAM bytes per DRAM cycle"),
    Metric("dram_clock_hz", "dram__cycles_elapsed.avg.per_second", "Hz", SOL,
           "DRAM clock during the kernel", combine=WEIGHTED),
    Metric("l2_bytes_per_second", "derived__lts__lts2xbar_bytes.sum.per_second", "byte/s",
           TENSOR_ROOF, "L2-to-SM (crossbar) bytes per second: the roofline's L2 traffic",
           combine=WEIGHTED),
    Metric("l2_peak_bytes_per_cycle", "derived__lts__lts2xbar_bytes.sum.peak_sustained",
           "byte/cycle", TENSOR_ROOF, "Peak L2-to-SM bytes per L2 cycle"),
    Metric("l2_clock_hz", "lts__cycles_elapsed.avg.per_second", "Hz", TENSOR_ROOF,
           "L2 clock during the kernel", combine=WEIGHTED),
    Metric("l1_bytes_per_second", "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second",
           "byte/s", TENSOR_ROOF, "L1/shared-memory writeback bytes per second (local, global, "
           "shared): the roofline's L1 traffic", combine=WEIGHTED),
    Metric("l1_peak_bytes_per_cycle", "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained",
           "byte/cycle", TENSOR_ROOF, "Peak L1/shared-memory writeback bytes per L1 cycle, all SMs"),
    Metric("l1_clock_hz", "l1tex__cycles_elapsed.avg.per_second", "Hz", TENSOR_ROOF,
           "L1 clock during the kernel", combine=WEIGHTED),
) + tuple(
    Metric(f"tensor_{kind}_flops", f"sm__ops_path_tensor_src_{src}.sum", "FLOP", TENSOR_ROOF,
           f"Tensor-core operations with {kind} inputs (one FLOP each)", combine=SUM)
    for kind, src in (("fp16", "fp16"), ("bf16", "bf16_dst_fp32"), ("tf32", "tf32_dst_fp32"))
) + (
    Metric("tensor_peak_flops",
           "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained_elapsed.per_second",
           "FLOP/s", TENSOR_ROOF, "Peak dense bf16 tensor-core (wgmma) FLOPs per second at the "
           "kernel's clock"),
)

# SourceCounters (paprof.model.source): the warp-state samples. Per instruction (by PC)
# the sample count, each stall reason's samples and the instructions executed are
# instanced metrics that the per-kernel row does not hold; the row holds the totals.
SOURCE = "SourceCounters"
_SOURCE = (
    Metric("pc_samples", "smsp__pcsamp_sample_count", "sample", SOURCE,
           "Warp-state samples taken (SourceCounters; their per-line split is the hot-spot table)",
           combine=SUM),
    Metric("pc_sample_interval_cycles", "smsp__pcsamp_interval_cycles", "cycle", SOURCE,
           "Cycles between two warp-state samples of an SM"),
)
#: The ncu section each of ncu's rules belongs to (a rule result's section, as ncu 2025.3.1
#: wrote it in the shipped H200 reports and the zoo's): the rules a preset that leaves a
#: section out (or collects only some of its metrics, ``--metrics``) no longer gets.
RULE_SECTIONS: dict[str, str] = {
    "AchievedOccupancy": OCC, "TheoreticalOccupancy": OCC,
    "CPIStall": WARP, "ThreadDivergence": WARP,
    "Compute": SOL, "Memory": SOL, "SOLBottleneck": SOL,
    "FPInstructions": "InstructionStats",
    "HighPipeUtilization": "ComputeWorkloadAnalysis", "SlowPipeLimiter": "ComputeWorkloadAnalysis",
    "IssueSlotUtilization": SCHED,
    "LaunchConfiguration": LAUNCH,
    "MemoryApertureUsage": MWA_CHART, "MemoryL2Compression": MWA_CHART,
    "MemoryCacheAccessPattern": MWA_TABLES, "SharedMemoryConflicts": MWA_TABLES,
    "SOLFPRoofline": "SpeedOfLight_RooflineChart",
    "WorkloadImbalance": "WorkloadDistribution",
}

#: Sections only an opt-in preset collects (``source``): their columns are absent from
#: most runs, and that absence is not worth a note.
OPT_IN_SECTIONS = (SOURCE,)

#: Per-PC (instanced) SourceCounters metrics: samples, instructions executed, and the
#: prefix of each stall reason's samples (``..._<reason>``; ``..._<reason>_not_issued``
#: counts only the samples in which no instruction issued).
PC_SAMPLES = "smsp__pcsamp_sample_count"
PC_EXECUTED = "inst_executed"
PC_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
PC_NOT_ISSUED_SUFFIX = "_not_issued"

#: The catalogue entries the roofline and the hot spots read, kept on each compared variant.
ROOFLINE_INPUTS: tuple[Metric, ...] = _ROOFLINE + _SOURCE

# -- what executed: instructions by class, from InstructionStats' per-opcode counts --------
#: The instanced metric the classes are summed from: warp instructions executed by SASS
#: opcode (InstructionStats; ``{"FFMA": 1048576, "LDG": ...}``).
OPCODE_METRIC = "sass__inst_executed_per_opcode"


@dataclass(frozen=True)
class OpcodeClass:
    """One class of executed SASS instructions: a table column (``inst_<key>``, warp
    instructions executed) summed over the opcodes it names."""

    key: str
    words: str
    """How a sentence names the class: "tensor-core MMA"."""
    opcodes: tuple[str, ...]
    """Opcode heads (as the per-opcode metric keys them, no modifiers); the catch-all
    class ``other`` names none."""
    unit: str
    """The hardware that executes it, for evidence: a pipe column or a memory space."""
    side: str = ""
    """For loads and stores: ``load``, ``store`` or ``atomic``; empty otherwise."""

    @property
    def column(self) -> str:
        return f"inst_{self.key}"


OPCODE_CLASSES: tuple[OpcodeClass, ...] = (
    OpcodeClass("fp32", "FP32 math (FFMA, FADD, FMUL)",
                ("FFMA", "FADD", "FMUL", "FMNMX", "FSET", "FSETP", "FSEL", "FCHK", "FSWZADD",
                 "FMNMX3", "FADD2", "FFMA2", "FMUL2"), "fma_pipe_pct"),
    OpcodeClass("fp16", "packed FP16/BF16 math (HFMA2, HADD2, HMUL2)",
                ("HFMA2", "HADD2", "HMUL2", "HSET2", "HSETP2", "HMNMX2"), "fma_pipe_pct"),
    OpcodeClass("tensor", "warp-level tensor-core MMA (HMMA, IMMA)",
                ("HMMA", "IMMA", "BMMA", "DMMA", "OMMA", "QMMA"), "tensor_pipe_pct"),
    OpcodeClass("gmma", "warpgroup tensor-core MMA (HGMMA, wgmma)",
                ("HGMMA", "IGMMA", "QGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCMMA"),
                "tensor_pipe_pct"),
    OpcodeClass("fp64", "FP64 math (DFMA, DADD, DMUL)",
                ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX", "DSET"), "fp64_pipe_pct"),
    OpcodeClass("xu", "special functions on the XU pipe (MUFU: reciprocal, exp, sin, rsqrt)",
                ("MUFU",), "xu_pipe_pct"),
    OpcodeClass("conversion", "conversions (I2F, F2I, F2F)",
                ("I2F", "F2I", "F2F", "I2I", "FRND", "F2FP", "I2FP", "F2IP", "I2IP"), "xu_pipe_pct"),
    OpcodeClass("integer", "integer and address arithmetic (IMAD, IADD3, LOP3, SHF)",
                ("IMAD", "IADD3", "IADD", "IMUL", "ISETP", "ISET", "LOP3", "LOP", "SHF", "SHL",
                 "SHR", "IABS", "IMNMX", "LEA", "POPC", "FLO", "BREV", "BMSK", "SGXT", "VIADD",
                 "VIMNMX", "VIMNMX3", "IDP", "IDP4A", "IADD32I", "IMUL32I", "VABSDIFF",
                 "VABSDIFF4", "VIADDMNMX", "IMAD32I"), "alu_pipe_pct"),
    OpcodeClass("uniform", "uniform-datapath instructions (ULDC, UIMAD, ...)", (), "alu_pipe_pct"),
    OpcodeClass("global_load", "global loads (LDG)", ("LDG", "LD"), "l1", "load"),
    OpcodeClass("global_store", "global stores (STG)", ("STG", "ST"), "l1", "store"),
    OpcodeClass("shared_load", "shared-memory loads (LDS, LDSM)", ("LDS", "LDSM"), "shared", "load"),
    OpcodeClass("shared_store", "shared-memory stores (STS, STSM)", ("STS", "STSM"), "shared", "store"),
    OpcodeClass("local_load", "local-memory loads (LDL)", ("LDL",), "local", "load"),
    OpcodeClass("local_store", "local-memory stores (STL)", ("STL",), "local", "store"),
    OpcodeClass("atomic", "atomics and reductions (ATOM, ATOMG, RED)",
                ("ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDUX", "REDAS", "ATOMGS"), "l1",
                "atomic"),
    OpcodeClass("async_copy", "asynchronous copies (LDGSTS, TMA)",
                ("LDGSTS", "LDGDEPBAR", "UBLKCP", "UTMALDG", "UTMASTG", "UTMAPF", "UBLKRED",
                 "UTMAREDG", "UBLKPF", "UTMACCTL", "UTMACMDFLUSH"), "l1", "load"),
    OpcodeClass("constant", "constant loads (LDC)", ("LDC", "ULDC"), "l1", "load"),
    OpcodeClass("control", "branches and control flow (BRA, BSSY, BSYNC)",
                ("BRA", "BRX", "BSSY", "BSYNC", "EXIT", "CALL", "RET", "JMP", "JMX", "BREAK",
                 "BMOV", "WARPSYNC", "YIELD", "KILL", "NANOSLEEP", "BPT", "RTT", "ACQBULK",
                 "ELECT", "PREEXIT"), "cbu"),
    OpcodeClass("barrier", "barriers and fences (BAR, MEMBAR, SYNCS)",
                ("BAR", "BARX", "MEMBAR", "DEPBAR", "SYNCS", "ARRIVES", "WARPGROUP", "FENCE",
                 "ERRBAR", "CCTL", "CCTLL", "CGAERRBAR"), "cbu"),
    OpcodeClass("movement", "data movement and shuffles (MOV, SHFL, SEL, S2R)",
                ("MOV", "MOV32I", "SHFL", "SEL", "S2R", "S2UR", "CS2R", "P2R", "R2P", "PRMT",
                 "R2UR", "VOTE", "VOTEU", "MATCH", "PLOP3", "PSETP", "UMOV", "USEL", "UPRMT"),
                "alu_pipe_pct"),
    OpcodeClass("other", "other instructions", (), ""),
)
"""Every opcode falls into exactly one class (``other`` for the rest; opcodes starting
with ``U`` not listed elsewhere are ``uniform``): the classes sum to the warp instructions
executed."""

_OPCODE_OF: dict[str, str] = {op: c.key for c in OPCODE_CLASSES for op in c.opcodes}
#: Opcode classes by key.
OPCODE_CLASS: dict[str, OpcodeClass] = {c.key: c for c in OPCODE_CLASSES}


def opcode_class(opcode: str) -> str:
    """The class key of a SASS opcode head (``FFMA`` -> ``fp32``)."""
    head = opcode.split(".", 1)[0].upper()
    key = _OPCODE_OF.get(head)
    if key is not None:
        return key
    return "uniform" if head.startswith("U") else "other"


def classify_opcodes(counts: dict | None) -> dict[str, float]:
    """``{inst_<key>: warp instructions}`` for every class (0 for a class with none) from
    the per-opcode counts; every class NaN when ``counts`` is None (no InstructionStats)."""
    if counts is None:
        return {c.column: float("nan") for c in OPCODE_CLASSES}
    out = {c.column: 0.0 for c in OPCODE_CLASSES}
    columns = _COLUMN_OF_OPCODE
    for opcode, value in counts.items():
        column = columns.get(opcode)
        if column is None:
            if len(columns) >= 4096:  # bounded: a report's opcodes are a few dozen
                columns.clear()
            column = columns[opcode] = f"inst_{opcode_class(opcode)}"
        out[column] += float(value)
    return out


_COLUMN_OF_OPCODE: dict[str, str] = {}
"""``classify_opcodes``' column of each opcode seen (every report names the same few)."""


_OPCODES = tuple(
    Metric(c.column, None, "inst", DERIVED,
           f"Warp instructions executed of the class {c.words} (InstructionStats, by opcode)",
           combine=SUM, formula=f"sum of {OPCODE_METRIC} over the class's opcodes",
           level="instructions")
    for c in OPCODE_CLASSES)

#: The instruction-class columns, in class order.
OPCODE_COLUMNS: tuple[str, ...] = tuple(c.column for c in OPCODE_CLASSES)


#: The whole catalogue: measured metrics, traffic per level, stall reasons, derived
#: columns, the work model, the roofline's inputs and the source counters' totals.
CATALOGUE: tuple[Metric, ...] = (_MEASURED + _TRAFFIC + _STALLS + _DERIVED + _RATIOS + _WORK
                                  + _ROOFLINE + _SOURCE + _OPCODES)

#: The traffic ratios (``_RATIOS``), in catalogue order.
RATIO_COLUMNS: tuple[str, ...] = tuple(m.column for m in _RATIOS)

#: Catalogue entries by column name.
BY_COLUMN: dict[str, Metric] = {m.column: m for m in CATALOGUE}

#: The entries read from a report (not derived, not the work model).
MEASURED: tuple[Metric, ...] = tuple(m for m in CATALOGUE if not m.derived)

#: Bytes in a sector, the unit L1/TEX and L2 count traffic in.
SECTOR_BYTES = 32

#: The traffic columns, grouped by level (LEVELS' order), each level's in catalogue order.
TRAFFIC_COLUMNS: tuple[str, ...] = tuple(
    m.column for level in LEVELS for m in CATALOGUE if m.level == level)

#: Names of the block limits, keyed by column, in tie-break order: the hardware caps
#: (resident blocks, warps) before the resources a kernel chooses (registers, shared
#: memory). ncu agrees: 1-warp CTAs on the H200 tie blocks and shared memory at 32 (the
#: driver's 1 KB per block in a 32 KB carveout) and its rule names the block limit first.
BLOCK_LIMITS = {
    "block_limit_blocks": "blocks",
    "block_limit_warps": "warps",
    "block_limit_registers": "registers",
    "block_limit_shared_mem": "shared_mem",
}


#: The DataFrame's first columns, exactly as docs/architecture.md orders them.
DESIGN_COLUMNS = (
    "variant", "family", "kernel", "launch", "step", "shape", "gpu",
    "duration_us", "elapsed_cycles", "sm_throughput_pct", "memory_throughput_pct",
    "dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct",
    "dram_active_cycles", "dram_bytes", "achieved_bandwidth_gbs", "registers_per_thread",
    "shared_mem_per_block_bytes", "theoretical_occupancy_pct", "achieved_occupancy_pct",
    "block_limit_registers", "block_limit_shared_mem", "block_limit_warps",
    "block_limit_blocks", "occupancy_limiter", "waves_per_sm", "grid_size", "block_size",
    "bottleneck",
)

#: Columns after the documented ones, before the remaining catalogue columns.
TRAILING_COLUMNS = ("bottleneck_evidence", "rules", "report_path", "sidecar", "steps_from")



# -- the static gate's instruction classes ------------------------------------------------
@dataclass(frozen=True)
class InstructionClass:
    """One class of SASS instructions the static gate counts per kernel in the cubin
    (``cuobjdump -sass``, no GPU), as the gate metric ``sass_<name>`` (unit ``inst``).
    Not a table column: no report holds it."""

    name: str
    opcodes: tuple[str, ...]
    """Opcode heads it counts (before the first ``.``); empty: every instruction but NOP."""
    meaning: str
    wide: bool = False
    """Only the 128-bit forms (``.128`` in the opcode) of ``opcodes``."""

    @property
    def column(self) -> str:
        return f"sass_{self.name}"

    @property
    def label(self) -> str:
        return f"SASS {self.name.upper().replace('_', '.')} instructions"


def _wide(name: str, opcode: str, what: str) -> tuple[InstructionClass, InstructionClass]:
    return (InstructionClass(name, (opcode,), what),
            InstructionClass(f"{name}_128", (opcode,), f"128-bit {what} (vector width)", wide=True))


INSTRUCTION_CLASSES: tuple[InstructionClass, ...] = (
    InstructionClass("total", (), "every instruction but NOP"),
    *_wide("ldg", "LDG", "global loads"),
    *_wide("stg", "STG", "global stores"),
    *_wide("lds", "LDS", "shared-memory loads"),
    *_wide("sts", "STS", "shared-memory stores"),
    InstructionClass("ldl", ("LDL",), "local-memory loads (spill restores, local arrays)"),
    InstructionClass("stl", ("STL",), "local-memory stores (spills, local arrays)"),
    InstructionClass("ldgsts", ("LDGSTS",), "asynchronous global-to-shared copies"),
    InstructionClass("hmma", ("HMMA",), "tensor-core matrix multiply-adds (warp level)"),
    InstructionClass("hgmma", ("HGMMA",), "Hopper warpgroup matrix multiply-adds"),
    InstructionClass("ffma", ("FFMA",), "fp32 fused multiply-adds"),
    InstructionClass("fmul", ("FMUL",), "fp32 multiplies"),
    InstructionClass("fadd", ("FADD",), "fp32 adds"),
    InstructionClass("mufu", ("MUFU",), "special-function unit (exp, rcp, rsqrt, ...)"),
    InstructionClass("bar", ("BAR",), "barriers (__syncthreads)"),
    InstructionClass("shfl", ("SHFL",), "warp shuffles"),
    InstructionClass("bra", ("BRA",), "branches"),
)
"""What the static gate counts in a kernel's SASS, in the gate's order: all instructions,
global/shared/local loads and stores (and their 128-bit share), async copies, tensor-core
MMAs (``HMMA``, Hopper's ``HGMMA``), fp32 arithmetic, the special function unit, barriers,
shuffles and branches."""

INSTRUCTION_UNIT = "inst"
"""The unit of an instruction-class count."""

def metric(column: str) -> Metric:
    """The catalogue entry of ``column`` (KeyError naming the known columns if none)."""
    try:
        return BY_COLUMN[column]
    except KeyError:
        raise KeyError(f"no catalogue column {column!r}; known: {', '.join(BY_COLUMN)}")


def ncu_metric_names(sections: tuple[str, ...] | None = None) -> list[str]:
    """The ncu metric names the catalogue reads, optionally only those of ``sections``.

    Presets use this to add ``--metrics`` for catalogue metrics their sections lack.
    """
    return [m.ncu_name for m in MEASURED if sections is None or m.section in sections]


#: Every other spelling the catalogue knows -> its column.
ALIASES: dict[str, str] = {alias: m.column for m in CATALOGUE for alias in m.aliases}


def sections_for(columns) -> list[str]:
    """The ncu sections needed to fill ``columns`` (derived columns: their inputs')."""
    found: list[str] = []

    def visit(column: str) -> None:
        entry = BY_COLUMN.get(column)
        if entry is None:
            return
        if entry.derived:
            for name in entry.inputs:
                visit(name)
        elif entry.section != DEVICE and entry.section not in found:
            found.append(entry.section)

    for column in columns:
        visit(column)
    return found
