"""ncu's command line, built by pure functions from a settings dataclass.

Nothing here runs anything or looks at the disk, so tests can assert exact lists.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from paprof.family import CommandVariant, Variant
from paprof.measure.ahead import batch_argv
from paprof.measure.presets import get_preset
from paprof.read.store import REPORT_SUFFIX

LAUNCHER_MODULE = "paprof.measure.kernels.launch"
CLOCK_CONTROLS = ("none", "base")


@dataclass(frozen=True)
class NcuSettings:
    """How ``paprof run`` profiles one variant."""

    ncu: str | None = None
    """Path of the ncu executable; None: ``locate.find_ncu()`` when the run starts."""
    preset: str = "default"
    """Section preset name (``presets.PRESETS``): ``default``, ``memory`` or ``full``."""
    clock_control: str = "none"
    """ncu ``--clock-control``: ``none`` keeps the GPU's own boost clocks (what users get);
    ``base`` locks them to base clocks (steadier, slower, not what production sees)."""
    launches: int = 1
    """Launches of the variant to profile (the launcher's ``--profile-launches``)."""
    kernels_per_launch: int | None = 1
    """Kernels one launch of the variant runs (split-KV: partial + merge). ncu's
    ``--launch-count`` is ``launches * kernels_per_launch``; ``profile_variant`` fills it
    in from the verification run. None (a callable or a command, whose kernels paprof
    does not know): no ``--launch-count``, every kernel in the NVTX range is profiled."""
    nvtx_filter: bool = True
    """Profile only kernels inside the variant's NVTX range (``--nvtx --nvtx-include``)."""
    kernel_filter: bool = True
    """Profile only kernels whose name matches the variant's ``kernel_regex`` (``-k``)."""
    time_launches: int = 20
    """CUDA-event-timed launches in the verification run (outside ncu)."""
    measure_ceiling: bool = False
    """Also measure the read ceiling in the verification run (the launcher's
    ``--ceiling``): recorded in the sidecar as ``read_ceiling_tbs``."""
    measure_gemm_ceiling: bool = False
    """Also measure the GEMM ceiling in the verification run (the launcher's
    ``--gemm-ceiling``): recorded as ``gemm_ceiling_tflops``. ``profile_variant`` turns it
    on for work a family holds to that ceiling (``Family.holds_to_gemm``)."""
    seed: int | None = None
    """Input seed passed to the launcher (``--seed``); None: the launcher's default."""
    python: str = sys.executable
    """The Python that runs the launcher."""
    cover: float | None = None
    """A command only: time every launch in its range first (``metrics`` alone, one
    pass a launch), then profile only the kernels that make up this fraction of the
    step's time (``paprof.measure.top_kernels``). None: profile every kernel."""
    top: int | None = None
    """With ``cover``: profile at most this many kernels (by name)."""
    metrics: tuple[str, ...] = ()
    """Collect only these metrics (``--metrics``) instead of the preset's sections: the
    timing pass."""
    kernel_names: tuple[str, ...] | None = None
    """Profile only the launches of these kernels (function names, matched whole by
    ``-k regex:``) instead of the variant's ``kernel_regex``: the chosen top kernels."""
    name_base: str = "function"
    """ncu's ``--kernel-name-base`` for ``kernel_names``: ``function`` (the names reports
    give), or ``mangled`` (one per function: a few launches of each configuration are
    counted per function, PyTorch's template instances apart)."""
    per_config: int | None = None
    """Profile the first K launches of each launch configuration only (ncu's
    ``--filter-mode per-launch-config --launch-count K``): set by the timing pass, which
    counts the launches each one stands for (``paprof.measure.top_kernels``)."""
    target_processes: str = "all"
    """ncu's ``--target-processes``: ``all`` (the program and its child processes: a
    launcher script, ``torchrun``), ``application-only`` (the program's own process), or
    ``auto`` (a ``--cmd`` program: ncu tries the program's own process first and takes
    its children only where that launched nothing in the range: in the timing pass,
    whose choice the full pass keeps, or in the one pass of ``--all``. Every process ncu
    connects to slows each profiled launch: PyTorch's ``torch.compile`` starts a Python
    process of its own, and under ``all`` the 8-layer GPT step's timing pass took 117 s
    on the H200 where the program's own process alone took 48 s. Where nothing tries,
    ``auto`` is ``all``)."""
    every_launch: bool = False
    """A command's top kernels: profile every launch of them (``--profile-every-launch``), not a
    few of each launch configuration standing for the others."""

    @property
    def launch_count(self) -> int | None:
        if self.kernels_per_launch is None:
            return None
        return self.launches * max(1, self.kernels_per_launch)


def report_path(path: Path | str) -> Path:
    """``path`` with the ``.ncu-rep`` suffix ncu would otherwise append itself."""
    path = Path(path)
    return path if path.name.endswith(REPORT_SUFFIX) else path.with_name(path.name + REPORT_SUFFIX)


def launcher_argv(
    variant: Variant,
    params,
    *,
    python: str,
    result: Path | str,
    profile_launches: int,
    time_launches: int,
    seed: int | None = None,
    check: bool = True,
    ceiling: bool = False,
    gemm_ceiling: bool = False,
) -> list[str]:
    """``python -m paprof.measure.kernels.launch ...`` for one variant and its parameters.

    ``check=False`` skips the float64 reference: the run under ncu does, because the
    verification run just before checked the same kernel (and under ncu every CuPy
    kernel of the reference would be intercepted, which costs seconds).
    """
    argv = [
        python, "-m", LAUNCHER_MODULE,
        "--variant", variant.id,
        "--family", variant.family,
        "--shape", params.spec(),
        "--profile-launches", str(profile_launches),
        "--result", str(result),
        "--time", str(time_launches),
    ]  # fmt: skip
    if seed is not None:
        argv += ["--seed", str(seed)]
    if not check:
        argv.append("--no-check")
    if ceiling:
        argv.append("--ceiling")
    if gemm_ceiling:
        argv.append("--gemm-ceiling")
    return argv


def verify_argv(
    settings: NcuSettings, variant: Variant, params, result: Path | str
) -> list[str]:
    """The launcher run WITHOUT ncu: check against the reference and event-time it."""
    return launcher_argv(
        variant,
        params,
        python=settings.python,
        result=result,
        profile_launches=0,
        time_launches=settings.time_launches,
        seed=settings.seed,
        ceiling=settings.measure_ceiling,
        gemm_ceiling=settings.measure_gemm_ceiling,
    )


def nvtx_include(range_name: str) -> str:
    """ncu's ``--nvtx-include`` for a push/pop range: ``NAME/`` (``domain@NAME/`` kept)."""
    return range_name if range_name.endswith("/") else f"{range_name}/"


_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}")


def names_regex(names) -> str:
    """``-k regex:`` for exactly these kernel names: ``^(a|b)$``, each name escaped (ncu's
    default ``--kernel-name-base function`` is the name its reports give)."""
    escaped = ("".join("\\" + c if c in _REGEX_SPECIAL else c for c in name) for name in names)
    return "^(" + "|".join(escaped) + ")$"


TARGET_PROCESSES = ("auto", "all", "application-only")
"""``NcuSettings.target_processes``' values (``run --target-processes``)."""


def target_processes(settings: NcuSettings) -> str:
    """The ``--target-processes`` ncu is given: ``auto`` is ``all`` where nothing tried
    the program's own process first (``paprof.measure.top_kernels`` does)."""
    if settings.target_processes not in TARGET_PROCESSES:
        raise ValueError(f"target_processes must be one of {TARGET_PROCESSES}, "
                         f"got {settings.target_processes!r}")
    return "all" if settings.target_processes == "auto" else settings.target_processes


def _ncu_head(settings: NcuSettings, output: Path | str) -> list[str]:
    """ncu, its report, the clocks, every process, what it collects."""
    if settings.ncu is None:
        raise ValueError("settings.ncu is None: resolve it with locate.find_ncu() first")
    if settings.clock_control not in CLOCK_CONTROLS:
        raise ValueError(
            f"clock_control must be one of {CLOCK_CONTROLS}, got {settings.clock_control!r}"
        )
    argv = [
        settings.ncu,
        "-o", str(report_path(output)),
        "--force-overwrite",
        "--clock-control", settings.clock_control,
        "--target-processes", target_processes(settings),
    ]  # fmt: skip
    if settings.metrics:  # the timing pass: no section, one pass a launch
        return argv + ["--metrics", ",".join(settings.metrics)]
    return argv + get_preset(settings.preset).ncu_args()


def ncu_argv(
    settings: NcuSettings,
    variant: Variant,
    params,
    output: Path | str,
    result: Path | str | None,
) -> list[str]:
    """ncu profiling the launcher (or, for a command variant, the user's program);
    ``output`` is the (temporary) report path.

    ``--force-overwrite`` is safe because the output is always a fresh temporary name
    that the run store renames at the end; a stored run is never overwritten by ncu.
    """
    argv = _ncu_head(settings, output)
    if settings.nvtx_filter:
        argv += ["--nvtx", "--nvtx-include", nvtx_include(variant.nvtx_range)]
    regex = variant.kernel_regex_for(params) if params is not None else variant.kernel_regex
    if settings.kernel_names is not None:  # chosen by the timing pass, within the regex
        argv += ["--kernel-name-base", settings.name_base, "-k", f"regex:{names_regex(settings.kernel_names)}"]
    elif settings.kernel_filter and regex:
        argv += ["-k", f"regex:{regex}"]
    if settings.per_config:  # a few launches of each configuration stand for the others
        argv += ["--filter-mode", "per-launch-config", "--launch-count", str(settings.per_config)]
    elif settings.launch_count is not None:
        argv += ["--launch-count", str(settings.launch_count)]
    if isinstance(variant, CommandVariant):
        return argv + list(variant.command)
    argv += launcher_argv(
        variant,
        params,
        python=settings.python,
        result=result,
        profile_launches=settings.launches,
        time_launches=0,
        seed=settings.seed,
        check=False,
    )
    return argv


def session_argv(
    settings: NcuSettings,
    variants,
    params,
    output: Path | str,
    result: Path | str,
    counts,
) -> list[str]:
    """One ncu session profiling ``variants`` (one family, one shape, each a
    ``CudaVariant`` whose kernels the batch listed) in one launcher process
    (``paprof.measure.kernels.batch --profile-launches``): the launches inside any of their
    NVTX ranges, of kernels any of their regexes matches, ``sum(counts)`` in all
    (``counts``: each variant's ``launch_count``). ``paprof.read.ncu_split`` tells them apart
    by their range."""
    argv = _ncu_head(settings, output) + ["--nvtx"]
    for variant in variants:
        argv += ["--nvtx-include", nvtx_include(variant.nvtx_range)]
    regexes = [variant.kernel_regex_for(params) for variant in variants]
    if settings.kernel_filter and all(regexes):
        argv += ["-k", "regex:" + "|".join(f"({r})" for r in dict.fromkeys(regexes))]
    argv += ["--launch-count", str(sum(counts))]
    probe = dataclasses.replace(settings, time_launches=0, measure_ceiling=False,
                                measure_gemm_ceiling=False)
    return argv + batch_argv(probe, variants, params, result) + [
        "--no-check", "--profile-launches", str(settings.launches)]
