"""Nsight Compute reports -> one tidy pandas DataFrame, a row per profiled kernel launch.

``load_reports(paths)`` takes ``.ncu-rep`` files and folders (searched recursively, as the
run store lays them out) and returns the documented columns (docs/architecture.md), then ``bottleneck_evidence``,
``rules``, ``report_path`` and ``sidecar``, then the rest of the metric catalogue
(:mod:`paprof.read.metrics`) and ``result_index``. ``df.attrs["missing"]`` maps each
column some row lacks to the ncu section that would supply it.

``variant_rows(df)`` sums a variant made of several kernels (split-KV partial + merge)
into one row per (variant, shape, report, launch).
"""

from __future__ import annotations

import math
import os
from array import array
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd

from paprof.model import numbers
from paprof.read import metrics as M
from paprof.read import ncu_reader
from paprof.model.bottleneck import DEFAULT_THRESHOLDS, Thresholds, classify
from paprof.read.ncu_fastread import FastResult
from paprof.model import represented, steps
from paprof.read.ncu_reader import open_report, read_metric, read_nvtx, read_rules
from paprof.errors import UserError
from paprof.read import store, summary
from paprof import parallel
from paprof.read.store import gc_paused
from paprof.progress import tick

REPORT_SUFFIXES = (".ncu-rep", ".ncu-repz")

_TEXT_COLUMNS = {"variant", "family", "kernel", "shape", "gpu", "bottleneck",
                 "report_path", "steps_from"} | {m.column for m in M.CATALOGUE if m.text}
_INT_COLUMNS = ("launch", "step", "result_index")
_NOT_FLOAT = _TEXT_COLUMNS | set(_INT_COLUMNS) | set(M.TRAILING_COLUMNS) | {"kernels"}
_FLOAT = {float}


def columns() -> list[str]:
    """The DataFrame's columns, in order."""
    first = list(M.DESIGN_COLUMNS) + list(M.TRAILING_COLUMNS)
    rest = [m.column for m in M.CATALOGUE if m.column not in first]
    return first + rest + ["result_index"]


def _found(paths: Iterable, scan=None) -> list[tuple]:
    """Every report named, found under a folder or given as a ``store.Run`` (a resolved
    run, its record read), in order and each once: (report, sidecar, store layout) when
    its sidecar is read (a folder ``scan``, the command's ``store.Scan``, has read), else
    (report, folder), the sidecar still to read (``_run``: by the pooled load as the
    workers read the runs before, not all before the first is read). A path's error is raised after the sidecars found before
    it are read, so that theirs comes first, as when each folder's were read in turn."""
    found: list[tuple] = []
    seen: set[str] = set()
    folders: dict[str, str] = {}  # folder -> its real path: one lookup a folder, not a file
    given = [p if isinstance(p, store.Run) else Path(p)
             for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    if not given:
        raise UserError("no report given: name .ncu-rep files or folders holding them")
    for path in given:
        if isinstance(path, store.Run):  # resolved: its record read already
            runs = [(path.report, path.sidecar, path.layout)]
        elif path.is_dir():
            if scan is not None and scan.scanned(path):
                runs = [(r.report, r.sidecar, r.layout) for r in scan.find_runs(path)]
                runs = [r for r in runs if r[0].name.endswith(REPORT_SUFFIXES)]
            else:
                runs = [(report, path) for report in store.report_paths(path)]
            if not runs:
                _runs_of(found)
                raise UserError(f"{path}: no .ncu-rep reports in this folder or below")
        elif path.is_file():
            if not path.name.endswith(".ncu-rep"):
                runs = [(path, None, {})]
            elif scan is not None:
                run = scan.find_runs(path)[0]
                runs = [(run.report, run.sidecar, run.layout)]
            else:
                runs = [(path, path.parent)]  # as find_runs makes the run of a report
        else:
            _runs_of(found)

            raise store.missing_store(path)
        for entry in runs:
            key = _real(entry[0], folders)
            if key not in seen:
                seen.add(key)
                found.append(entry)
    return found


def _run(entry: tuple) -> tuple[Path, dict | None, dict]:
    """(report, sidecar, layout) of one of ``_found``'s entries, its sidecar read now
    if it was not."""
    if len(entry) == 3:
        return entry

    run = store.load_run(*entry)
    return run.report, run.sidecar, run.layout


def _runs_of(entries: Iterable[tuple]) -> list[tuple[Path, dict | None, dict]]:
    """``_run`` of each entry, in order (the first sidecar error raised)."""
    return [_run(entry) for entry in entries]


def _real(path: Path, folders: dict[str, str]) -> str:
    """``path.resolve()`` as a key (case-folded where the file system folds case), with
    each folder's real path looked up once (a report that is itself a symbolic link is
    resolved whole)."""
    name = str(path)
    if os.path.islink(name):
        return os.path.normcase(os.path.realpath(name))
    folder, base = os.path.split(name)
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = os.path.realpath(folder or os.curdir)
    return os.path.normcase(os.path.join(real, base))


def _convert(value: float, entry: M.Metric) -> float:
    if isinstance(value, str) or math.isnan(value):
        return value
    return value * entry.scale


def _metrics(action, entries) -> dict:
    """The catalogue ``entries`` of one result, in paprof's units: ``read_metric`` and
    ``_convert`` of each, straight from the decoded values for the fast reader's result
    (the same answers and errors, without two calls a metric)."""
    if not isinstance(action, FastResult):
        values = {e.column: _convert(read_metric(action, e.ncu_name, e.text), e) for e in entries}
    elif (values := _decoded(action, entries)) is None:  # not as the common case: by metric
        decoded, asked = action.values, action.asked
        values = {}
        plan = _plan(entries)
        for column, name, text, scale in zip(plan.columns, plan.names, plan.text, plan.scales):
            value = decoded.get(name)
            if value is None and name in asked:  # asked for, not recorded
                value = "" if text else math.nan
            elif value is None or isinstance(value, str) != text:
                value = read_metric(action, name, text)  # its KeyError
            elif not text and value == value:  # not NaN
                value = value * scale
            values[column] = value
    for entry in _ALIASED:  # an older ncu's spelling where the current one is absent
        if entry.column in values and _nan(values[entry.column]):
            for alias in entry.aliases:
                try:
                    value = read_metric(action, alias, entry.text)
                except KeyError:
                    continue
                if not _nan(value) and value != "":
                    values[entry.column] = _convert(value, entry)
                    break
    values.update(M.classify_opcodes(_opcodes(action)))
    return values


class _Plan:
    """A catalogue's entries as ``_metrics`` takes them: their columns, ncu names, whether
    each is text, scales, the type each value has when decoded (``str`` for a text
    metric, else ``float``), and the places of those scaled."""

    def __init__(self, entries):
        self.columns = [e.column for e in entries]
        self.names = [e.ncu_name for e in entries]
        self.text = [bool(e.text) for e in entries]
        self.scales = [e.scale for e in entries]
        self.types = [str if e.text else float for e in entries]
        self.scaled = [(i, e.scale) for i, e in enumerate(entries) if not e.text and e.scale != 1]


def _decoded(action: FastResult, entries) -> dict | None:
    """``_metrics``' values of a fast reader's result in one pass over the catalogue where
    each metric it was asked for holds a ``float`` (text: a ``str``) or none (NaN, ``""``),
    as the loop by metric makes them; None for anything else (that loop then raises what
    it raises, or converts what it converts)."""
    plan = _plan(entries)
    got = list(map(action.values.get, plan.names))
    if None in got:
        asked = action.asked
        for i, value in enumerate(got):
            if value is None:
                if plan.names[i] not in asked:
                    return None  # not decoded: the loop's KeyError
                got[i] = "" if plan.text[i] else math.nan
    if list(map(type, got)) != plan.types:
        return None
    for i, scale in plan.scaled:
        value = got[i]
        if value == value:  # not NaN
            got[i] = value * scale
    return dict(zip(plan.columns, got))


def _opcodes(action) -> dict | None:
    """Warp instructions executed by SASS opcode (None without InstructionStats, or for
    a result the fast reader was not asked the per-opcode counts of)."""
    try:
        return ncu_reader.read_by_instance(action, M.OPCODE_METRIC)
    except KeyError:
        return None


_ALIASED = tuple(m for m in M.MEASURED if m.aliases)


_MEASURED_PLAN: _Plan | None = None


def _plan(entries) -> _Plan:
    """The ``_Plan`` of ``entries``; made once for ``metrics.MEASURED``, the catalogue the
    loader asks every result for."""
    global _MEASURED_PLAN
    if entries is not M.MEASURED:
        return _Plan(entries)
    if _MEASURED_PLAN is None:
        _MEASURED_PLAN = _Plan(entries)
    return _MEASURED_PLAN


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def derive(values: dict) -> dict:
    """Fill the catalogue's derived columns of one row (a dict of columns), in place."""
    read, write = values.get("dram_bytes_read", math.nan), values.get("dram_bytes_write", math.nan)
    duration = values.get("duration_us", math.nan)
    if not _nan(read) and not _nan(write):
        values["dram_bytes"] = read + write
    else:
        per_second = values.get("dram_bytes_per_second", math.nan)
        values["dram_bytes"] = per_second * duration * 1e-6
    values["achieved_bandwidth_gbs"] = bandwidth_gbs(values["dram_bytes"], duration)
    for sectors, nbytes in (("l1_global_load_sectors", "l1_global_load_bytes"),
                            ("l1_global_store_sectors", "l1_global_store_bytes")):
        values[nbytes] = values.get(sectors, math.nan) * M.SECTOR_BYTES
    values["shared_mem_per_block_bytes"] = (values.get("shared_mem_static_bytes", math.nan)
                                            + values.get("shared_mem_dynamic_bytes", math.nan))
    values["occupancy_limiter"] = occupancy_limiter(values)
    values["top_stall_reason"], values["top_stall_cycles"] = top_stall(values)
    ratios(values)
    return values


def _over(top, bottom) -> float:
    top, bottom = numbers.finite(top), numbers.finite(bottom)
    return top / bottom if top is not None and bottom else math.nan


def ratios(values: dict) -> dict:
    """Fill the catalogue's traffic ratios (``metrics.RATIO_COLUMNS``) of one row, in
    place: NaN where an input is missing or the denominator is zero."""
    dram = values.get("dram_bytes")
    values["bytes_per_global_load"] = _over(values.get("l1_global_load_bytes"),
                                            values.get("global_load_instructions"))
    values["l1_load_per_dram_byte"] = _over(values.get("l1_global_load_bytes"), dram)
    values["l2_to_sm_per_dram_byte"] = _over(values.get("l2_to_l1_bytes"), dram)
    values["instructions_per_dram_byte"] = _over(values.get("instructions_executed"), dram)
    ld = numbers.finite(values.get("shared_load_bank_conflicts"))
    st = numbers.finite(values.get("shared_store_bank_conflicts"))
    values["shared_bank_conflicts"] = ld + st if ld is not None and st is not None else math.nan
    return values


def work_model(sidecar: dict | None) -> tuple[float, float]:
    """(bytes, FLOPs) of the run's work model: schema 2's ``work``; NaN where unknown
    (a schema-1 sidecar, a foreign report)."""
    work = (sidecar or {}).get("work")
    if not isinstance(work, dict):
        return math.nan, math.nan
    def number(key):
        value = work.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    return number("bytes"), number("flops")


def work_rates(values: dict) -> None:
    """``work_tbs`` and ``work_tflops`` of a row from its work model and duration."""
    duration = values.get("duration_us", math.nan)
    ok = not _nan(duration) and duration > 0
    for column, rate in (("work_bytes", "work_tbs"), ("work_flops", "work_tflops")):
        amount = values.get(column, math.nan)
        values[rate] = amount / duration / 1e6 if ok and not _nan(amount) and amount > 0 else math.nan


def _kernel_names(sidecar: dict | None) -> set:
    return {k.get("kernel") for k in (sidecar or {}).get("profiled_kernels") or () if isinstance(k, dict)}


def bandwidth_gbs(dram_bytes: float, duration_us: float) -> float:
    """Bytes over microseconds, in GB/s (1e9 bytes per second); NaN without a duration."""
    if _nan(dram_bytes) or _nan(duration_us) or duration_us <= 0:
        return math.nan
    return dram_bytes / (duration_us * 1e-6) / 1e9


def occupancy_limiter(values: dict) -> str:
    """The name of the smallest per-SM block limit: ``blocks``, ``warps``, ``registers``
    or ``shared_mem`` (ties in that order); ``""`` when none was recorded."""
    present = [(values.get(col, math.nan), i, name)
               for i, (col, name) in enumerate(M.BLOCK_LIMITS.items())]
    present = [p for p in present if not _nan(p[0])]
    return min(present)[2] if present else ""


_STALL_COLUMNS = tuple((reason, f"stall_{reason}") for reason in M.STALL_REASONS
                       if reason != "selected")


def top_stall(values: dict) -> tuple[str, float]:
    """(reason, cycles) of the largest ``stall_*`` column other than ``selected``."""
    best = ("", math.nan)
    for reason, column in _STALL_COLUMNS:
        value = values.get(column, math.nan)
        if not _nan(value) and (_nan(best[1]) or value > best[1]):
            best = (reason, value)
    return best


def _missing_section(column: str, values: dict) -> str | None:
    """The section that would supply a NaN column of this row (None if it is present)."""
    entry = M.BY_COLUMN[column]
    value = values.get(column)
    if (entry.text and column != "gpu") or entry.section == M.WORK:
        return None
    if not _nan(value) and value != "":
        return None
    if not entry.derived:
        return entry.section
    if column in M.OPCODE_COLUMNS:
        return "InstructionStats"
    if column == "dram_bytes":  # the default path: bytes per second x duration
        inputs = ("dram_bytes_per_second", "duration_us")
    else:
        inputs = entry.inputs
    sections = M.sections_for([c for c in inputs if _nan(values.get(c, math.nan))])
    return ", ".join(sections) if sections else None


def _report_facts(report: Path, sidecar: dict | None, layout: dict) -> dict:
    """What every row of one report shares: its names, path and work model."""
    side = sidecar or {}
    stem = report.name
    for suffix in REPORT_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return {
        "variant": str(side.get("variant") or layout.get("variant") or stem),
        "family": str(side.get("family") or layout.get("family") or ""),
        "shape": str(side.get("shape") or (stem if layout else "")),
        "gpu": side.get("gpu"),
        "report_path": str(report),
        "work": work_model(sidecar),
        # what the step model needs of the record (a worker gets no sidecar)
        "record": {k: side.get(k) for k in ("step_range", "kind", "nvtx_range", "launches")},
        # a launch profiled for the others of its configuration: how many it stands for
        "weights": represented.weights(side),
        # one kernel of several: the work is the variant's, not this kernel's
        "several": len(_kernel_names(sidecar)) > 1,
    }


def _action_row(action, entries, facts: dict, sidecar: dict | None, index: int,
                launches: dict, missing: dict, thresholds: Thresholds) -> dict:
    values = _metrics(action, entries)
    derive(values)
    for column, value in values.items():
        if (value != value or value == "") and column not in missing:  # NaN or empty text
            section = _missing_section(column, values)
            if section:
                missing[column] = section

    kernel = action.name()
    launch = launches.get(kernel, 0)
    launches[kernel] = launch + 1
    values.update(
        variant=facts["variant"],
        family=facts["family"],
        kernel=kernel,
        launch=launch,
        shape=facts["shape"],
        gpu=str(facts["gpu"] or values.get("gpu") or ""),
        rules=read_rules(action),
        report_path=facts["report_path"],
        sidecar=sidecar,
        result_index=index,
    )
    values["work_bytes"], values["work_flops"] = facts["work"]
    if facts["several"]:
        values["work_tbs"] = values["work_tflops"] = math.nan
    else:
        work_rates(values)
    values["bottleneck"], values["bottleneck_evidence"] = classify(values, thresholds)
    return values


class _Columns:
    """A frame made a row at a time: each row's numbers go into the one block of doubles
    pandas keeps them in (a column of numbers a row of the block), its counters, text
    and objects into arrays and lists, as it comes; so loading holds the table and one
    row's dict, not every row's as well (10,000 rows: 35 MB), nor the numbers twice
    (pandas would copy them into its block). The block is made for ``rows`` rows (a run's
    one kernel each) and grows by half when more come; the frame keeps the rows made.
    The values are converted as ``_column`` converts them."""

    _NUMBER, _COUNTER, _TEXT, _OBJECT = range(4)

    def __init__(self, order: list[str], rows: int = 0):
        self.order = order
        self.plan = []
        for column in order:
            kind = (self._COUNTER if column in _INT_COLUMNS else
                    self._NUMBER if column not in _NOT_FLOAT else
                    self._TEXT if column in _TEXT_COLUMNS else self._OBJECT)
            if kind != self._NUMBER:
                self.plan.append((column, kind, array("q") if kind == self._COUNTER else []))
        self.numbers = [column for column in order if column not in _NOT_FLOAT]
        self.block = np.empty((len(self.numbers), max(rows, 1)), dtype="float64")
        self.rows = 0

    def _room(self, more: int) -> None:
        capacity = self.block.shape[1]
        if self.rows + more > capacity:
            grown = np.empty((len(self.numbers), max(self.rows + more, capacity + capacity // 2)),
                             dtype="float64")
            grown[:, :self.rows] = self.block[:, :self.rows]
            self.block = grown

    def stores(self, without: str) -> tuple:
        """The rows made, to send: the numbers (a block of just them) and every other
        column's values but ``without``'s (None in its place)."""
        return (self.block[:, :self.rows],
                [None if column == without else store for column, _kind, store in self.plan])

    def extend(self, stores: tuple, fill: str, values: list) -> None:
        """Append another table's ``stores`` (rows after this table's), and ``values`` as
        the column ``fill`` they left out."""
        numbers, others = stores
        count = numbers.shape[1]
        self._room(count)
        self.block[:, self.rows:self.rows + count] = numbers
        self.rows += count
        for (column, _kind, store), more in zip(self.plan, others):
            store.extend(values if column == fill else more)

    def add(self, row: dict) -> None:
        get = row.get
        self._room(1)
        numbers = list(map(get, self.numbers))
        if set(map(type, numbers)) != _FLOAT:  # not every one a float, as nearly always
            numbers = [math.nan if value is None or isinstance(value, str) else value
                       for value in numbers]
        self.block[:, self.rows] = numbers
        self.rows += 1
        for column, kind, store in self.plan:
            value = get(column)
            if kind == self._TEXT:
                store.append("" if value is None or _nan(value) else str(value))
            else:
                store.append(value)

    def frame(self, missing: dict) -> pd.DataFrame:
        """The frame, its columns in order, made on the block (not copied); each other
        column's store is emptied as it goes in. The table is empty after."""
        df = pd.DataFrame(self.block[:, :self.rows].T, columns=self.numbers, copy=False)
        self.block = self.block[:, :0]
        place = {column: i for i, column in enumerate(self.order)}
        for column, kind, store in self.plan:
            values = (np.array(store, dtype="int64") if kind == self._COUNTER else
                      pd.Series(store, dtype=object))
            del store[:]
            df.insert(place[column], column, values)
        notes = [n for n in (missing.pop(_STEP_NOTE, None), missing.pop(_REPRESENTED_NOTE, None)) if n]
        df.attrs["missing"] = dict(missing)
        if notes:
            df.attrs["notes"] = notes
        return df


def _column(values, column: str):
    """One column of a frame from its values (a list, or an array of a frame's column):
    float64 for a number (NaN for None or text), int64 for a counter, str for text
    (``""`` for None or NaN), the objects themselves otherwise."""
    if column in _INT_COLUMNS:
        return np.asarray(values, dtype="int64")
    if column not in _NOT_FLOAT:
        if isinstance(values, np.ndarray) and values.dtype.kind == "f":
            return values.astype("float64")
        return np.asarray([math.nan if v is None or isinstance(v, str) else v for v in values],
                          dtype="float64")
    if column in _TEXT_COLUMNS:
        return pd.Series(["" if v is None or _nan(v) else str(v) for v in values], dtype=object)
    return pd.Series(list(values), dtype=object)


PARALLEL_RUNS = 400
"""Stores of fewer runs are read in this process: a pool's start costs more than it saves."""
CHUNK_RUNS = 100
"""Runs a worker reads per task: small enough to share the work out evenly and keep what
comes back at a time small (100 runs: 0.7 MB pickled), large enough to cost little
to send (a task costs ~1 ms)."""


def load_reports(paths, thresholds: Thresholds = DEFAULT_THRESHOLDS, scan=None,
                 jobs: int | None = None, step_range: str | None = None) -> pd.DataFrame:
    """One row per profiled kernel launch of every report in ``paths``.

    ``paths``: a path or an iterable of paths, each an ``.ncu-rep`` file or a folder
    searched recursively, or of runs (``paprof.read.store.Run``, as
    ``paprof.read.resolve`` gives them: their sidecars are not read again). variant/family/shape/gpu come from the sidecar
    (``<report>.json``) when present, else from the run store's folder layout, else:
    variant = the report's file stem, gpu = the device name in the report, family and
    shape empty. Raises UserError for a file that is not a whole report, a report with
    no kernels, or a path that does not exist. ``scan``: the command's
    ``paprof.read.store.Scan``, when it has read the store already.

    ``jobs``: worker processes that read the reports (default ``paprof.parallel.jobs()``,
    ``PAPROF_JOBS=1`` for none); used from ``PARALLEL_RUNS`` runs on. The rows, their
    order and ``attrs`` are the same either way.

    ``step_range``: the NVTX range whose pushes delimit steps in reports whose records
    name none (``paprof.model.steps``); the ``step`` column numbers them.
    """
    found = _found(paths, scan)
    total = len(found)
    workers = parallel.jobs() if jobs is None else jobs
    table = _Columns(columns(), len(found))
    missing: dict = {}
    # Each run is let go of once its rows are in: its paths are not held to the end.
    with gc_paused():
        if workers <= 1 or len(found) < PARALLEL_RUNS:
            runs = _runs_of(found)
            found.clear()
            runs.reverse()
            while runs:
                report, sidecar, layout = runs.pop()
                _add_run(table, report, _report_facts(report, sidecar, layout), sidecar,
                         thresholds, missing, step_range)
                tick("reading reports", total - len(runs), total)
            return table.frame(missing)
        size = parallel.chunk_size(len(found), workers, CHUNK_RUNS)
        count = min(workers, -(-len(found) // size))
        runs = _Pieces(found)
        tasks = ((piece, thresholds, ncu_reader.FAST_READER, step_range)
                 for piece in runs.pieces(size))
        done = 0
        try:
            with parallel.ordered_map(_load_chunk, tasks, count) as parts:
                for stores, seen, counts in parts:
                    mine = runs.sidecars[done:done + len(counts)]
                    done += len(counts)
                    table.extend(stores, "sidecar",
                                 [s for s, n in zip(mine, counts) for _ in range(n)])
                    for column, section in seen.items():
                        missing.setdefault(column, section)  # the first row's, in run order
                    tick("reading reports", done, total)
        except Exception:
            runs.raise_sidecar_error()  # before a report's, as when all were read first
            raise
        return table.frame(missing)


class _Pieces:
    """The runs of a pooled load cut into the workers' tasks, each piece's sidecars read
    as a worker is free for it (while the other workers read the reports handed out
    before), not all before the first report is read as the serial load reads them.
    The sidecars stay here (each row holds its run's dict, as read once); a worker gets
    what the rows take from them."""

    def __init__(self, found: list[tuple]):
        self.found = found  # ``_found``'s entries not taken yet
        self.sidecars: list = []  # the sidecar of every run taken, in order
        self.error: Exception | None = None  # the sidecar's error that ended the taking

    def pieces(self, size: int) -> Iterator[list[tuple[Path, dict]]]:
        """(report, ``_report_facts``) of ``size`` runs at a time, in order, each piece
        taken out of ``found`` as it is given."""
        for piece in parallel.drain(self.found, size):
            try:
                runs = _runs_of(piece)
            except Exception as err:
                self.error = err
                raise
            self.sidecars += [side for _report, side, _layout in runs]
            yield [(report, _report_facts(report, side, layout))
                   for report, side, layout in runs]

    def raise_sidecar_error(self) -> None:
        """Raise the error of the first sidecar that cannot be read, if any (called once
        the workers have ended): the one that stopped ``pieces``, else one of the runs
        not taken."""
        if self.error is not None:
            raise self.error
        _runs_of(self.found)


def _add_run(table: _Columns, report: Path, facts: dict, sidecar: dict | None,
             thresholds: Thresholds, missing: dict, step_range: str | None = None) -> int:
    """Add the rows of one run to ``table``, each with its step (:mod:`steps`); how many."""
    results = summary.read(report)  # the reader's output kept beside the report, if good
    _context, actions = (None, iter(results)) if results is not None else open_report(report)
    launches: dict = {}
    rows, stacks = [], []
    for index, action in enumerate(actions):
        rows.append(_action_row(action, M.MEASURED, facts, sidecar, index, launches,
                                missing, thresholds))
        stacks.append(read_nvtx(action))
    found = steps.plan([r["kernel"] for r in rows], stacks, facts.get("record") or sidecar,
                       step_range)
    plan = facts.get("weights")
    times = [1] * len(rows)
    if plan:  # one step, each profiled launch counted for those it stands for
        times, note = represented.counts(rows, plan)
        if note:
            missing.setdefault(_REPRESENTED_NOTE, note)
    added = 0
    for row, step, n in zip(rows, found.steps, times):
        row["step"] = 0 if plan else step
        row["steps_from"] = found.source
        for _ in range(n):
            table.add(row)
        added += n
    if found.note:
        missing.setdefault(_STEP_NOTE, found.note)
    return added

_STEP_NOTE = "(steps)"
_REPRESENTED_NOTE = "(represented)"
"""The key under which ``attrs["missing"]`` carries a note on how steps were found."""


def _load_chunk(task: tuple) -> tuple[tuple, dict, array]:
    """A worker's share, runs given as (report, ``_report_facts``): the columns of their
    rows (without the sidecars: the parent has them), the columns they lack, and each
    run's number of rows."""
    runs, thresholds, fast_reader, step_range = task
    ncu_reader.FAST_READER = fast_reader  # as the parent reads (a spawned worker starts anew)
    table = _Columns(columns(), len(runs))
    missing: dict = {}
    counts = array("q")
    with gc_paused():
        for report, facts in runs:
            counts.append(_add_run(table, report, facts, None, thresholds, missing, step_range))
    return table.stores("sidecar"), missing, counts


def variant_rows(df: pd.DataFrame, thresholds: Thresholds = DEFAULT_THRESHOLDS
                 ) -> pd.DataFrame:
    """One row per step of each run (variant, shape, report, step: :mod:`steps`): the
    kernel launches of one step summed, a step of one launch passed through.

    Durations, cycles and bytes are summed; percentages and rates are weighted by
    duration; launch configuration, registers and occupancy come from the dominant
    (longest) kernel (each column's rule is its catalogue ``combine``). ``kernel`` joins
    the parts' names with " + " and the added ``kernels`` column lists them; ``rules``
    holds every part's rules (each with a ``kernel`` key); the bottleneck is decided again
    on the combined row.
    """
    keys = ["variant", "shape", "report_path", "step"]
    out_columns = list(df.columns) + (["kernels"] if "kernels" not in df.columns else [])
    bare = df.copy(deep=False)
    bare.attrs = {}  # pandas deep-copies attrs into every group: 10,000 runs, 58,000 copies
    if "step" not in bare:  # a frame made without the loader: each report is one step
        bare["step"] = 0
        out_columns.append("step")
    # Groups numbered in order of first appearance (as the groupby walks them); a group
    # of one row passes through column by column, only several kernels are combined.
    codes = bare.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    if not len(codes):
        result = df.iloc[0:0].assign(kernels=[])
        result.attrs["missing"] = dict(df.attrs.get("missing", {}))
        return result.reset_index(drop=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(codes))))
    first = order[bounds[:-1]]  # each group's first row: the whole of a group of one

    combined = {}
    several = np.flatnonzero(np.diff(bounds) > 1).tolist()
    if several:
        combine = _Combiner(bare, [order[bounds[g]: bounds[g + 1]] for g in several])
        for i, (g, row) in enumerate(zip(several, combine.rows())):
            combined[g] = _combine(row, combine, i, thresholds)
            tick("summing the kernels of each step", len(combined), len(several))
    data = {}
    for column in out_columns:
        if column == "kernels":
            kernels = bare["kernel"].to_numpy()
            values = [[kernels[i]] for i in first.tolist()]
        else:
            values = bare[column].to_numpy()[first]
        if combined:
            values = list(values)
            for g, row in combined.items():
                values[g] = row.get(column)
        data[column] = _column(values, column)
    result = pd.DataFrame(data, columns=out_columns)
    result.attrs["missing"] = dict(df.attrs.get("missing", {}))
    return result.reset_index(drop=True)


class _Combiner:
    """The groups of several kernels of one frame, combined on arrays taken from it once
    (a pandas operation per column and group took 56 ms a step of two kernels, 10
    minutes for 10,000 split-KV runs): each group's rows in ``result_index`` order, its
    dominant (longest) row as a dict of plain values, and per catalogue column the sum
    or the duration-weighted mean exactly as pandas' ``sum(min_count=1)`` makes them."""

    def __init__(self, frame: pd.DataFrame, groups: list):
        self.frame = frame
        order = frame["result_index"].to_numpy() if "result_index" in frame else None
        # each group sorted as ``sort_values("result_index")`` sorts it
        self.groups = [g[np.argsort(order[g], kind="quicksort")] if order is not None else g
                       for g in groups]
        self.duration = frame["duration_us"].astype(float).to_numpy()
        self.dominant = [g[int(np.nan_to_num(self.duration[g], nan=-1.0).argmax())]
                         for g in self.groups]
        entries = [e for e in M.CATALOGUE if e.column in frame and not e.text
                   and e.combine in (M.SUM, M.WEIGHTED)]
        self.summed = [e.column for e in entries if e.combine == M.SUM]
        self.weighted = [e.column for e in entries if e.combine == M.WEIGHTED]
        self.block = {kind: np.stack([frame[c].astype(float).to_numpy() for c in columns])
                      if columns else None
                      for kind, columns in (("sum", self.summed), ("weighted", self.weighted))}

    def rows(self) -> list[dict]:
        """Each group's dominant row, its values as ``Series.to_dict`` gives them."""
        columns = list(self.frame.columns)
        picked = [self.frame[c].to_numpy()[self.dominant].tolist() for c in columns]
        return [dict(zip(columns, values)) for values in zip(*picked)]

    def combined(self, index: int) -> dict:
        """The summed and weighted columns of group ``index``."""
        rows = self.groups[index]
        out = {}
        if self.block["sum"] is not None:
            values = self.block["sum"][:, rows]  # a column's values contiguous: a 1-D sum each
            missing = np.isnan(values)
            sums = _row_sums(np.where(missing, 0.0, values))
            known = (~missing).sum(axis=1)
            for j, column in enumerate(self.summed):
                out[column] = sums[j] if known[j] >= 1 else math.nan
        if self.block["weighted"] is not None:
            values = self.block["weighted"][:, rows]
            durations = self.duration[rows]
            ok = ~np.isnan(values) & ~np.isnan(durations)
            whole = ok.all(axis=1)
            weights = np.where(whole, durations.sum(), 0.0)
            products = _row_sums(values * durations)
            for j, column in enumerate(self.weighted):
                if whole[j]:
                    weight, product = weights[j], products[j]
                else:  # the known values alone, as pandas selects them
                    keep = ok[j]
                    weight = durations[keep].sum()
                    product = (values[j][keep] * durations[keep]).sum()
                out[column] = (product / weight if ok[j].any() and weight > 0 else math.nan)
        return out

    def names(self, index: int) -> list:
        return self.frame["kernel"].to_numpy()[self.groups[index]].tolist()

    def rules(self, index: int) -> list:
        return self.frame["rules"].to_numpy()[self.groups[index]].tolist()

    def first_result(self, index: int) -> int:
        return int(self.frame["result_index"].to_numpy()[self.groups[index]].min())


def _row_sums(matrix: np.ndarray) -> np.ndarray:
    """Each row's sum, bit for bit as ``np.sum`` (and pandas) sums it alone: numpy sums 8
    values or more pairwise, which a reduction of a whole block along its rows does not."""
    if matrix.shape[1] < 8:
        return matrix.sum(axis=1)
    return np.array([row.sum() for row in matrix])


def _combine(row: dict, groups: _Combiner, index: int, thresholds: Thresholds) -> dict:
    """Group ``index`` of ``groups`` as one row: ``row`` (its dominant kernel's) with the
    summed and weighted columns, the rates and the bottleneck made again."""
    row.update(groups.combined(index))
    row["achieved_bandwidth_gbs"] = bandwidth_gbs(row["dram_bytes"], row["duration_us"])
    ratios(row)
    work_rates(row)
    row["top_stall_reason"], row["top_stall_cycles"] = top_stall(row)
    names = groups.names(index)
    row["kernels"] = names
    row["kernel"] = " + ".join(names)
    row["rules"] = [dict(rule, kernel=name) for name, rules in zip(names, groups.rules(index))
                    for rule in (rules or [])]
    row["result_index"] = groups.first_result(index)
    row["bottleneck"], row["bottleneck_evidence"] = classify(row, thresholds)
    return row
