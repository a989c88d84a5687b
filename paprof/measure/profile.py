"""Profiling a variant: verify it without ncu, profile it under ncu, store the run.

``profile_variant`` is the library call behind ``paprof run``; ``profile_variants``
does several with one progress display and keeps going past a failed verification.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from paprof.names import slug
from paprof.errors import ShapeError, UserError, VerificationError
from paprof.family import CommandVariant, Variant, checked_work
from paprof import phases as ph
from paprof import progress
from paprof.measure import sass_hash
from paprof.measure import ahead, environment, provenance, session, top_kernels
from paprof.read import store, store_files
from paprof.measure.argv import NcuSettings, ncu_argv, verify_argv
from paprof.read.locate import find_ncu
from paprof.safetext import shown
from paprof.measure.ncu_log import ProfiledKernel
from paprof.measure.presets import get_preset
from paprof.measure.runner import run_ncu
from paprof.read.record import REPORT_BYTES, SCHEMA, Origin, RunRecord
from paprof import registry
from paprof.parallel import death_signal

Status = Callable[[str], None]
"""Receives one line of progress text ("ncu: paged_decode_v3 launch 0: 50%")."""


@dataclass
class LauncherOutcome:
    returncode: int
    output: str
    """stdout and stderr together."""


def run_launcher(argv: Sequence[str], env: dict) -> LauncherOutcome:
    """Run the launcher without ncu (the GPU step that tests replace). It dies with this
    process, even killed with SIGKILL (Linux), rather than run on under pid 1."""

    done = subprocess.run(
        list(argv), env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
        preexec_fn=death_signal(signal.SIGKILL),
    )
    return LauncherOutcome(done.returncode, (done.stdout or "") + (done.stderr or ""))


def child_env() -> dict:
    """The environment for the launcher: ours, with paprof importable."""
    env = dict(os.environ)
    root = str(provenance.REPO_ROOT)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in parts if p != root])
    return env


def _last_line(text: str) -> str:
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return lines[-1] if lines else ""


def verify(variant: Variant, params, settings: NcuSettings, result: Path, env: dict) -> dict:
    """Check and event-time the variant outside ncu; its result JSON as a dict.

    Raises ``VerificationError`` (launcher exit 1: wrong answer) or ``UserError``.
    """
    outcome = run_launcher(verify_argv(settings, variant, params, result), env)
    said = _last_line(outcome.output)
    if outcome.returncode == 1 and "Traceback (most recent call last)" in outcome.output:
        # Python's exit status of an uncaught exception, not the launcher's mismatch
        raise UserError(f"the launcher for {variant.name} failed (exit 1): {said or 'no message'}")
    if outcome.returncode == 1:
        said = said or "output differs from the reference"
        raise VerificationError(f"{variant.name} failed verification: {said}")
    if outcome.returncode != 0:
        code, said = outcome.returncode, said or "no message"
        skipped = _skipped(result)
        if skipped:  # the variant turned the shape down when built or first run
            raise ShapeError(skipped)
        raise UserError(f"the launcher for {variant.name} failed (exit {code}): {said}")
    try:
        data = json.loads(Path(result).read_text())
    except (OSError, ValueError) as err:
        raise UserError(
            f"the launcher for {variant.name} wrote no readable result ({result}): {err}"
        ) from None
    if (data.get("check") or {}).get("passed") is False:
        raise VerificationError(f"{variant.name} failed verification: {data['check']}")
    return data


def _skipped(result: Path) -> str | None:
    """The reason the launcher wrote when the variant turned the shape down, if any."""
    try:
        data = json.loads(Path(result).read_text())
    except (OSError, ValueError):
        return None
    reason = data.get("skipped") if isinstance(data, dict) else None
    return str(reason) if reason else None


def _kernels_per_launch(result: dict) -> int | None:
    """Kernels per launch as the launcher listed them; None when it could not know (a
    callable launches whatever its framework launches)."""
    kernels = result.get("kernels")
    return len(kernels) if isinstance(kernels, list) and kernels else None


def _kernel_status(say: Status) -> Callable[[ProfiledKernel], None]:
    def show(k: ProfiledKernel) -> None:
        launch = f" launch {k.launch}" if k.launch is not None else ""
        passes = f", {k.passes} passes" if k.passes is not None else ""
        say(f"ncu: {k.kernel}{launch}: {k.percent}%{passes}")

    return show


def source_state(variant: Variant, source_dir: Path | None) -> dict:
    """The repository and commit of the variant's own source (the user's, not paprof's).

    ``source_dir`` is the family's folder (a command: the current folder). Inside paprof's
    own checkout ``$PAPROF_GIT_COMMIT`` may name the commit (a copy without ``.git``)."""
    folder = Path(source_dir or Path.cwd()).resolve()
    inside_paprof = folder.is_relative_to(provenance.REPO_ROOT)
    commit, dirty = provenance.git_state(folder, environ=None if inside_paprof else {})
    top = provenance.git_toplevel(folder)
    return {"repo": str(top) if top else None, "path": str(folder), "commit": commit,
            "dirty": dirty}


def build_sidecar(
    variant: Variant,
    params,
    work: dict | None,
    settings: NcuSettings,
    result: dict,
    prov: Origin,
    command: list[str],
    profiled: list[ProfiledKernel],
    paths: store.RunPaths,
    source: dict,
    gate_metrics=(),
    family_notes=(),
    noise=None,
    phases: Sequence[ph.Phase] = (),
) -> RunRecord:
    """The run's record, written as its sidecar (schema 2, docs/CONTRACTS.md). ``noise``:
    the ``code`` and ``environment`` records (``paprof.measure.sass_hash``, ``environment``), when
    taken; ``phases``: where the run's time went (``paprof.phases``)."""
    passes = [k.passes for k in profiled if k.passes is not None]
    preset = get_preset(settings.preset)
    check = result.get("check")
    return RunRecord.from_sidecar({
        "schema": SCHEMA,
        "family": variant.family,
        "variant": variant.id,
        "kind": variant.kind,
        "kernel_regex": variant.kernel_regex_for(params) if params is not None else variant.kernel_regex,
        "idea": variant.idea,
        "shape": params.spec() if params is not None else "",
        "shape_slug": params.slug() if params is not None else store.COMMAND_SLUG,
        "params": params.to_dict() if params is not None else {},
        "work": work,
        "gate_metrics": list(gate_metrics),
        "family_notes": list(family_notes),
        "gpu": prov.gpu,
        "gpu_slug": prov.gpu_slug,
        "driver": prov.driver,
        "ncu_version": prov.ncu_version,
        "clock_control": settings.clock_control,
        "preset": preset.name,
        "sections": list(preset.sections),
        "metrics": list(preset.metrics),
        "replay_passes": max(passes) if passes else None,
        "git_commit": prov.git_commit,
        "git_dirty": prov.git_dirty,
        "source": source,
        "verified": bool(check and check.get("passed")),
        "verification": check,
        "duration_us_event": result.get("duration_us_median"),
        "duration_us_event_all": result.get("duration_us_all"),
        "read_ceiling_tbs": result.get("read_ceiling_tbs"),
        "gemm_ceiling_tflops": result.get("gemm_ceiling_tflops"),
        "gemm_ceiling": result.get("gemm_ceiling"),
        "bandwidth_tbs": result.get("bandwidth_tbs"),
        "tflops": result.get("tflops"),
        "launch_details": result.get("launch_details") or {},
        "launch_words": result.get("launch_words") or {},
        "nvtx_range": variant.nvtx_range,
        # the range pushed once a step (paprof.model.steps): the launcher pushes the
        # variant's once a step under ncu; a command's own --nvtx-range is its step
        "step_range": variant.nvtx_range,
        "command": command,
        "created": prov.created,
        "paprof_version": prov.paprof_version,
        "report": paths.report.name,
        "profiled_kernels": [k.to_dict() for k in profiled],
        "launches": settings.launches,
        "seed": settings.seed,
        "log": paths.log.name,
        **(noise or {}),
        ph.KEY: [p.to_dict() for p in phases],
    }, label=variant.id, path=paths.sidecar)


def _slug_of(params) -> str:
    return params.slug() if params is not None else store.COMMAND_SLUG


def _early_refusal(runs_dir: Path, variant: Variant, params, replace: bool,
                   option: str = "--force") -> None:
    """Refuse before any GPU work when every GPU has one name and the run exists."""
    if replace:
        return
    names = {name for name, _ in provenance.query_gpus()}
    if len(names) == 1:
        gpu_slug = slug(names.pop())
        paths = store.run_paths(runs_dir, gpu_slug, variant.family, variant.id, _slug_of(params))
        store.refuse_existing(paths, replace, option)


def profile_variant(
    variant: Variant,
    params,
    settings: NcuSettings = NcuSettings(),
    runs_dir: Path | str = "runs",
    replace: bool = False,
    progress: Status | None = None,
    family=None,
    replace_option: str = "--force",
    checked: ahead.Checked | None = None,
    hashes: ahead.HashesAhead | None = None,
    part: session.Part | None = None,
) -> store.Run:
    """Verify ``variant`` at ``params`` outside ncu, then profile it and store the run.

    ``family`` (the variant's ``Family``) gives the work model and the source folder; a
    ``CommandVariant`` has neither (``params`` None) and is profiled unverified.
    ``checked``: the variant was already checked and timed with others in one process
    (``ahead.check_all``); ``hashes``: its SASS hash is being compiled ahead
    (``ahead.HashesAhead``); ``part``: it was profiled with others in one ncu session
    (``session.profile_together``), this is its part of the report, stored instead of
    running ncu. Each phase's time goes into the record (``paprof.phases``).
    Raises ``ShapeError`` (the variant cannot take the parameters), ``VerificationError``
    (wrong answer: nothing is stored) or ``UserError`` (no ncu, no GPU, counters not
    permitted, the run exists and ``replace`` is False ...).
    """
    say = progress or (lambda text: None)
    runs_dir = Path(runs_dir)
    is_command = isinstance(variant, CommandVariant)
    if not is_command:
        variant.check(params)
        if family is None:
            family = registry.family_of(variant)
    preset = get_preset(settings.preset)
    settings = dataclasses.replace(settings, ncu=settings.ncu or find_ncu())
    holds_to_gemm = getattr(family, "holds_to_gemm", None)
    if not is_command and holds_to_gemm is not None and holds_to_gemm(checked_work(family, params)):
        settings = dataclasses.replace(settings, measure_gemm_ceiling=True)  # the run names it
    _early_refusal(runs_dir, variant, params, replace, replace_option)
    env = child_env()
    if preset.lineinfo:
        env["PAPROF_LINEINFO"] = "1"
    phases: list[ph.Phase] = []
    with environment.Watch() as watch:  # clocks, throttling, other processes: timing and ncu
        if is_command:
            say("running the command under ncu (not verified: paprof has no reference for it)")
            result: dict = {}
            settings = dataclasses.replace(settings, kernels_per_launch=None)
        elif checked is not None:
            result, done = checked.result(variant)
            phases += done
            settings = dataclasses.replace(settings, kernels_per_launch=_kernels_per_launch(result))
        else:
            with tempfile.TemporaryDirectory(prefix="paprof-verify-") as scratch:
                say(f"compiling, checking and timing {settings.time_launches} launches (no ncu)")
                t0 = time.perf_counter()
                result = verify(variant, params, settings, Path(scratch) / "result.json", env)
                phases += ahead.launcher_phases(result, time.perf_counter() - t0)
            settings = dataclasses.replace(settings, kernels_per_launch=_kernels_per_launch(result))
        arch = result.get("arch") or getattr(family, "arch", None)
        hashed = None  # compiled ahead: taken once ncu is done
        if is_command:
            hashed = sass_hash.not_taken("a --cmd program: paprof does not compile it")
        elif hashes is None:  # after the timing (nvcc would share the CPU with it), for the GPU it ran on
            say("hashing the SASS")
            with ph.Clock(phases).phase(ph.HASH):
                hashed = sass_hash.hash_sass(variant, params, arch)
        work = checked_work(family, params).to_dict() if family is not None else None
        with ph.Clock(phases).phase(ph.PROVENANCE):  # git, nvidia-smi, ncu --version
            source = source_state(variant, getattr(family, "folder", None))
            prov = provenance.collect(settings.ncu, gpu=result.get("gpu"))
        paths = store.run_paths(runs_dir, prov.gpu_slug, variant.family, variant.id,
                                _slug_of(params))
        with store.writing(paths, replace, replace_option) as pending:
            scratch_result = None if is_command else pending.scratch("result.json")
            selection = None
            if is_command and settings.cover is not None:  # time every launch, keep the top
                settings, selection, timed = top_kernels.time_and_choose(
                    settings, variant, pending.scratch("timing.ncu-rep"), pending.log, env, say,
                    shown_log=paths.log)
                phases += timed
            if part is not None:  # profiled in a shared session: its part is its report
                argv, profiled = _store_part(part, pending.report, pending.log)
                phases += part.phases
            else:
                def full_pass(attempt: NcuSettings):
                    say("ncu: starting")
                    timer = ahead.NcuClock(_kernel_status(say))
                    argv = ncu_argv(attempt, variant, params, pending.report, scratch_result)
                    return run_ncu(argv, pending.log, pending.report, on_kernel=timer, env=env,
                                   shown_log=paths.log), timer, argv  # ncu writes in a private folder

                # a command's every kernel (--all: no timing pass chose its processes) tries
                # its own process first; elsewhere one try under the settings' processes
                (ncu, timer, argv), _target, spent = top_kernels.own_process_first(
                    settings, full_pass, say, "ncu")
                phases += [ph.Phase(ph.NCU_ALONE, s) for s in spent]
                phases += timer.phases(ncu.log.kernels)
                profiled = ncu.log.kernels
            watch.stop()
            if hashed is None:
                hashed, done = hashes.get(variant, arch)
                phases += done
            command = [str(paths.report) if a == str(pending.report) else a for a in argv]
            noise = {sass_hash.KEY: sass_hash.record(hashed, result.get("launches")),
                     # batched: what the GPU did while the batch timed the variant
                     environment.KEY: watch.record if checked is None else checked.environment}
            sidecar = build_sidecar(variant, params, work, settings, result, prov, command,
                                    profiled, paths, source,
                                    getattr(family, "gate_metrics", ()),
                                    getattr(family, "notes", ()), noise, phases)
            if selection is not None:  # what the full pass did profile, against the plan
                sidecar = sidecar.with_values(selection={**selection,
                                                         "launches_profiled": len(profiled)})
            if part is not None:
                sidecar = sidecar.with_values(**{session.KEY: part.record})
            store.write_sidecar(pending.sidecar, sidecar)
            size = pending.report.stat().st_size
    sidecar = sidecar.with_values(**{REPORT_BYTES: size})  # as writing() stored it
    return store.Run(paths.report, sidecar)


def _store_part(part: session.Part, report: Path, log: Path) -> tuple[list[str], list[ProfiledKernel]]:
    """A shared session's part as the run's report (at ``report``, the store's temporary
    name) and the session's log as its log: the session's ncu command line and this
    variant's profiled kernels."""
    shutil.copyfile(part.report, report)
    with os.fdopen(store_files.open_write(log), "wb") as out:  # never through a planted link
        out.write(f"# one ncu session for {', '.join(part.record.get('variants', []))}: "
                  f"this run's part is results {part.record.get('results')} of its report\n".encode())
        out.write(part.log.read_bytes())
    return part.argv, part.kernels


@dataclass
class Outcome:
    """One variant's fate in ``profile_variants``."""

    variant: Variant
    run: store.Run | None = None
    failed: VerificationError | None = None
    """Its verification failed: nothing was stored."""
    skipped: ShapeError | None = None
    """It cannot take the shape."""


def profile_variants(
    variants: Sequence[Variant],
    params,
    settings: NcuSettings = NcuSettings(),
    runs_dir: Path | str = "runs",
    replace: bool = False,
    console: Console | None = None,
    family=None,
    replace_option: str = "--force",
) -> list[Outcome]:
    """Profile each variant in turn under one progress display (on stderr).

    A failed verification or a shape a variant cannot take is recorded and the next
    variant runs; if every variant was skipped, the first ``ShapeError`` is raised.
    Other errors (no ncu, no GPU, an existing run) stop the loop.
    """
    console = console or Console(stderr=True)
    if settings.ncu is None:
        settings = dataclasses.replace(settings, ncu=find_ncu())
    outcomes: list[Outcome] = []
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[variant]}"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    live = console.is_terminal  # no live display (and no stray newlines) in logs and pipes
    lines = None if live else progress.LogLines(console)  # where it stands, in a log: a line now and then
    with Progress(*columns, console=console, transient=True, disable=not live) as bar:
        task = bar.add_task("", total=len(variants), variant="")
        bar.update(task, variant="all")

        def describe(text: str) -> None:  # kernel names and messages: never markup, no escapes
            bar.update(task, description=escape(shown(text)))
            if lines is not None:
                lines(text)

        probes = provenance.probed_once()  # the GPU, its driver, ncu, git: asked once
        probes.__enter__()
        hashes = scratch = None
        try:
            checked, hashes = _paid_once(variants, params, settings, runs_dir, replace, family,
                                         replace_option, describe)

            def show(variant: Variant, kernel: ProfiledKernel) -> None:  # a session's progress
                bar.update(task, variant=escape(shown(variant.name)))
                _kernel_status(describe)(kernel)

            parts, scratch = _one_session(variants, params, settings, checked, family, show, describe)
            for variant in variants:
                bar.update(task, variant=escape(shown(variant.name)), description="")
                outcome = Outcome(variant)
                try:
                    outcome.run = profile_variant(variant, params, settings, runs_dir, replace, describe,
                                                  family=family, replace_option=replace_option,
                                                  checked=checked, hashes=hashes,
                                                  part=parts.get(variant.id) if parts else None)
                except VerificationError as err:
                    outcome.failed = err
                except ShapeError as err:
                    outcome.skipped = err
                outcomes.append(outcome)
                bar.advance(task)
        finally:
            probes.__exit__(None, None, None)
            if hashes is not None:
                hashes.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
    if outcomes and all(o.skipped for o in outcomes):
        raise outcomes[0].skipped
    return outcomes


RUN_ALONE = "PAPROF_RUN_ALONE"
"""Set to 1: ``profile_variants`` runs each variant alone (its own launcher process, its
SASS hash after its timing), as before the fixed costs were paid once."""


def _paid_once(variants, params, settings: NcuSettings, runs_dir, replace: bool, family,
               replace_option: str, say: Status):
    """For several variants of one family at one shape: every check and timing in one
    launcher process and the SASS hashes compiled ahead, in parallel (``ahead``), as
    ``(checked, hashes)``; ``(None, None)`` where each variant goes alone (one variant, a
    command, or ``PAPROF_RUN_ALONE=1``: each variant checked, timed and hashed in its own
    turn, as before 2026-12)."""
    if os.environ.get(RUN_ALONE, "0") not in ("", "0"):
        return None, None
    if params is None or any(isinstance(v, CommandVariant) for v in variants):
        return None, None
    if len({v.family for v in variants}) != 1:
        return None, None
    fits = []
    for variant in variants:
        try:
            variant.check(params)
        except ShapeError:
            continue  # profile_variant says so, in its turn
        _early_refusal(Path(runs_dir), variant, params, replace, replace_option)
        fits.append(variant)
    if len(fits) < 2:
        return None, None
    if family is None:

        family = registry.family_of(fits[0])
    holds_to_gemm = getattr(family, "holds_to_gemm", None)
    if holds_to_gemm is not None and holds_to_gemm(checked_work(family, params)):
        settings = dataclasses.replace(settings, measure_gemm_ceiling=True)
    env = child_env()
    if get_preset(settings.preset).lineinfo:
        env["PAPROF_LINEINFO"] = "1"
    hashes = ahead.HashesAhead(fits, params, getattr(family, "arch", None))
    try:
        say(f"checking and timing {len(fits)} variants in one process (no ncu)")
        with environment.Watch() as watch:
            checked = ahead.check_all(fits, params, settings, env, run_launcher)
        checked.environment = watch.record
    except BaseException:
        hashes.close()
        raise
    return checked, hashes


def _one_session(variants, params, settings: NcuSettings, checked: ahead.Checked | None, family,
                 show, say: Status) -> tuple[dict, Path | None]:
    """The variants the batch checked, profiled in one ncu session (``session``): ``({variant
    id: its part}, the scratch folder)``; ``({}, None)`` where each variant is profiled alone
    (the batch did not run, ``PAPROF_NCU_PER_VARIANT=1``, fewer than two variants whose
    kernels the batch listed, a session that failed as a whole)."""
    if checked is None or not session.wanted():
        return {}, None
    members, kernels = [], {}
    for variant in variants:
        try:
            result, _phases = checked.result(variant)
        except (ShapeError, VerificationError, UserError):
            continue  # profile_variant says so, in its turn
        count = _kernels_per_launch(result)
        if count is not None and not isinstance(variant, CommandVariant):
            members.append(variant)
            kernels[variant.id] = count
    if len(members) < 2:
        return {}, None
    settings = dataclasses.replace(settings, ncu=settings.ncu or find_ncu())
    env = child_env()
    if get_preset(settings.preset).lineinfo:
        env["PAPROF_LINEINFO"] = "1"
    return session.profile_together(members, params, settings, env, kernels, show, say)
