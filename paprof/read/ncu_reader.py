"""The only module that talks to ``ncu_report``: open a report, list its kernel results,
read catalogue metrics by name and the rule results.

Reports are decoded by :mod:`paprof.read.ncu_fastread` straight from their bytes
(~0.8 ms a result against ~5 ms for ``ncu_report``, which needs ~3 ms just to make each
result object);
whenever that reader cannot be sure of a file, the whole file is read through
``ncu_report`` instead. Either way :func:`open_report` yields one object per result that
:func:`read_metric`, :func:`read_rules` and ``.name()`` answer identically.

``ncu_report`` is imported on first use (through ``paprof.read.locate``), so importing
paprof never needs Nsight Compute. ``ncu_report.load_report`` accepts any file and returns
an empty report for garbage, so :func:`open_report` checks the file's framing itself and
turns every problem into a :class:`~paprof.errors.UserError` naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from paprof.read import ncu_fastread
from paprof.errors import UserError
from paprof.read.locate import import_ncu_report as locate_import
from paprof.read import metrics as M
from paprof.parallel import death_signal

log = logging.getLogger(__name__)

#: Read reports with :mod:`paprof.read.ncu_fastread` first (``ncu_report`` only when
#: it cannot be sure of a file). ``PAPROF_FAST_READER=0`` in the environment turns it off.
FAST_READER = os.environ.get("PAPROF_FAST_READER", "1") != "0"

#: ncu_report's MsgType values, by name (``ncu_report.MsgType_*``).
_MSG_TYPES = ("NONE", "OK", "OPTIMIZATION", "WARNING", "ERROR")


def import_ncu_report():
    """The ``ncu_report`` module, found by :mod:`paprof.read.locate` on first use."""
    return locate_import()


def check_framing(path: Path) -> int:
    """The number of kernel results in ``path``; UserError unless it is a whole report.

    A report is the magic ``NVR\\0``, a length-prefixed file header, then blocks: a
    length-prefixed block header (a protobuf message: field 1 the number of sources,
    field 2 the number of results, field 5 the payload size) followed by its payload.
    Checking that the blocks tile the file exactly catches truncation and garbage
    without parsing the payloads; only the headers are read.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            return _walk_blocks(path, handle, size)
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror or err}") from err


def _walk_blocks(path: Path, handle, size: int) -> int:
    if handle.read(4) != ncu_fastread.MAGIC:
        raise UserError(f"{path}: not an Nsight Compute report (no 'NVR' file signature)")
    header_len = ncu_fastread.read_u32(handle.read(4))
    if header_len is None or 8 + header_len > size:
        raise UserError(f"{path}: truncated Nsight Compute report (file header cut off)")
    pos = 8 + header_len
    results = empty = 0
    while pos < size:
        handle.seek(pos)
        block_len = ncu_fastread.read_u32(handle.read(4))
        empty = empty + 1 if block_len == 0 else 0
        if empty > ncu_fastread.EMPTY_BLOCKS:
            raise UserError(f"{path}: corrupt Nsight Compute report "
                            f"({ncu_fastread.empty_run(pos - 4 * ncu_fastread.EMPTY_BLOCKS)})")
        if block_len is None or pos + 4 + block_len > size:
            raise UserError(f"{path}: truncated Nsight Compute report "
                            f"(a block header at byte {pos} runs past the end, {size} bytes)")
        try:
            header = ncu_fastread.varint_fields(handle.read(block_len))
        except (IndexError, ncu_fastread.Unsupported):
            header = None
        if header is None:
            raise UserError(f"{path}: corrupt Nsight Compute report "
                            f"(unreadable block header at byte {pos})")
        end = pos + 4 + block_len + header.get(ncu_fastread.BLOCK_PAYLOAD, 0)
        if end > size:
            raise UserError(f"{path}: truncated Nsight Compute report "
                            f"({size} bytes, a block needs {end})")
        results += header.get(ncu_fastread.BLOCK_RESULTS, 0)
        pos = end
    return results


def _by_instance() -> frozenset:
    return frozenset({M.OPCODE_METRIC})


#: Metrics read with their instance values (``read_by_instance``): instructions by opcode.
BY_INSTANCE = _by_instance()


def catalogue_metrics() -> tuple[list[str], list[str]]:
    """The ncu names of the catalogue's measured metrics: (numeric, text)."""
    return ([name for m in M.MEASURED if not m.text for name in m.names] + [M.OPCODE_METRIC],
            [name for m in M.MEASURED if m.text for name in m.names])


_CATALOGUE: tuple[frozenset, frozenset] | None = None


def _catalogue_sets() -> tuple[frozenset, frozenset]:
    """``catalogue_metrics()`` as two frozensets, made once (every report asks for them)."""
    global _CATALOGUE
    if _CATALOGUE is None:
        numeric, text = catalogue_metrics()
        _CATALOGUE = frozenset(numeric), frozenset(text)
    return _CATALOGUE


def open_report(path: Path, numeric=None, text=None):
    """Load one report: ``(context, actions)``, ``actions`` an iterator over every profiled
    result in range order. UserError when the file is not a whole report or holds no
    results.

    ``numeric`` and ``text`` name the metrics :func:`read_metric` will be asked for (as
    numbers, as text); by default the catalogue's. The fast reader decodes only those
    (``context`` is then None); ``ncu_report`` answers any name.
    """
    path = Path(path)
    # .ncu-repz is compressed: its framing is not checked, ncu_report alone reads it.
    compressed = path.name.endswith(".ncu-repz")
    if FAST_READER and not compressed:
        if numeric is None and text is None:
            numeric, text = _catalogue_sets()
        # The fast reader checks the framing as it reads (the blocks tile the file, every
        # payload holds its counted messages: check_framing's conditions and more), so a
        # report it reads needs no second pass; on any doubt check_framing speaks first.
        try:
            fast = ncu_fastread.read_report(path, numeric or (), text or (),
                                            [n for n in BY_INSTANCE if n in (numeric or ())])
        except ncu_fastread.Corrupt as err:
            if not check_framing(path):
                raise _no_kernels(path) from None
            raise UserError(f"{path}: corrupt Nsight Compute report ({err})") from None
        except (ncu_fastread.Unsupported, OSError) as err:
            log.debug("%s: read through ncu_report: the fast reader cannot be sure (%s)",
                      path, err)
        else:
            if not fast:
                raise _no_kernels(path)
            return None, iter(fast)
    if not compressed and not check_framing(path):
        raise _no_kernels(path)
    context = _load(path)
    count = sum(context.range_by_idx(r).num_actions() for r in range(context.num_ranges()))
    if not count:
        raise _no_kernels(path)
    return context, _actions(context)


def _no_kernels(path: Path) -> UserError:
    return UserError(f"{path}: the report holds no profiled kernels "
                     "(ncu's kernel filters matched nothing?)")


#: Load a report through ``ncu_report`` in a child process first, so that a file its
#: native code aborts on (SIGABRT) is a one-line error, not the end of paprof.
#: ``PAPROF_NCU_CHILD=0`` in the environment turns the check off.
NCU_CHILD = os.environ.get("PAPROF_NCU_CHILD", "1") != "0"

_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); import ncu_report; "
          "ncu_report.load_report(sys.argv[2])")


def _probe_in_child(path: Path, module) -> None:
    """Load ``path`` with ``module`` (``ncu_report``) in a child Python; UserError when
    the child dies of a signal (the native code aborted) or cannot be run."""
    import signal
    import subprocess


    where = Path(getattr(module, "__file__", "") or ".").resolve().parent
    if where.name == "ncu_report":  # a package: its parent goes on the path
        where = where.parent
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(where), str(path)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=600, check=False,
                              preexec_fn=death_signal(signal.SIGKILL))  # dies with paprof
    except (OSError, subprocess.SubprocessError) as err:
        raise UserError(f"{path}: cannot check the report in a child process: {err}") from None
    if done.returncode < 0 or done.returncode == 134:
        number = -done.returncode if done.returncode < 0 else signal.SIGABRT
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        raise UserError(f"{path}: damaged Nsight Compute report (ncu_report died reading it: "
                        f"{name})")
    if done.returncode:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        log.debug("%s: ncu_report in a child process: exit %s: %s", path, done.returncode,
                  said[-1] if said else "")


def _load(path: Path, probe: bool = True):
    """The report through ``ncu_report``; UserError when it cannot load it (or, checked
    in a child process first, when loading it would abort the process)."""
    ncu_report = import_ncu_report()
    if probe and NCU_CHILD and getattr(ncu_report, "__file__", None):
        _probe_in_child(path, ncu_report)
    try:
        with _native_stderr_to_log(path):
            return ncu_report.load_report(str(path))
    except Exception as err:  # the SWIG layer raises assorted types
        raise UserError(f"{path}: cannot load the report: {err}") from err


@contextlib.contextmanager
def _native_stderr_to_log(path):
    """Whatever ncu_report's C++ layer writes to file descriptor 2 while loading (protobuf
    complaints about a damaged report) goes to the debug log, not the user's terminal:
    paprof's own messages are one line each."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said = sink.read().decode("utf-8", "replace").strip()
            if said:
                log.debug("%s: ncu_report said: %s", path, said)


def _actions(context):
    """Every action in range order, made one at a time (each costs ncu_report ~3 ms)."""
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            with _native_stderr_to_log(f"{context} range {r} action {a}"):
                action = rng.action_by_idx(a)
            yield action


def read_metric(action, name: str, text: bool = False):
    """One metric's value by name, in the base unit ncu stores (ns, bytes, cycles); NaN
    when absent (``""`` for a text metric).

    The metric's unit is never asked for: ``IMetric.unit()`` of the ncu_report module that
    Nsight Compute 2025.3.1 ships (``extras/python``) crashes the process (seen on the
    H200 under Python 3.12, 2026-11-29). The catalogue's ``ncu_unit`` says what is stored.
    """
    if isinstance(action, ncu_fastread.FastResult):
        if name not in action.asked:
            raise KeyError(f"metric {name} was not decoded: name it to open_report")
        value = action.values.get(name)
        if value is None:
            return "" if text else math.nan
        if isinstance(value, str) != bool(text):
            raise KeyError(f"metric {name} was decoded as {type(value).__name__}")
        return value
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_value():
        return "" if text else math.nan
    if text:
        return metric.as_string() or ""
    return metric.as_double()


def read_rules(action) -> list[dict]:
    """The rule results of one action that carry a message, as plain dicts:
    ``id, title, type, message, speedup_pct`` (``speedup_pct`` NaN without an estimate;
    title and message as plain text, without ncu's link markup).

    Reads the results directly rather than through ``rule_results_as_dicts``, which also
    builds every result table (slow, and not needed here).
    """
    if isinstance(action, ncu_fastread.FastResult):
        return [_plain(dict(rule)) for rule in action.rules]
    rules = []
    for result in action.rule_results():
        if not result.has_rule_message():
            continue
        message = result.rule_message()
        text = (message.get("message") or "").strip()
        kind = message.get("type")
        if not text:
            continue
        speedup = math.nan
        if result.has_speedup_estimation():
            speedup = float(result.speedup_estimation()["speedup"])
        rules.append(_plain({
            "id": result.rule_identifier(),
            "title": message.get("title") or result.name(),
            "type": _MSG_TYPES[kind] if isinstance(kind, int) and 0 <= kind < 5 else str(kind),
            "message": text,
            "speedup_pct": speedup,
        }))
    return rules


def mangled_name(action) -> str | None:
    """The kernel's mangled name (one per function: PyTorch's template instances share a
    function name such as ``vectorized_elementwise_kernel``); None where the report has
    none."""
    if isinstance(action, ncu_fastread.FastResult):
        return action.mangled
    try:
        return str(action.name(import_ncu_report().IAction.NameBase_MANGLED)) or None
    except Exception:  # noqa: BLE001 - an older module or a result without it
        return None


def read_nvtx(action) -> tuple | None:
    """The NVTX push/pop ranges around one action's launch, from the bottom of each
    stack up: ``((domain, name, instance id), ...)``. The fast reader knows each range's
    instance id (which push it was); ``ncu_report`` gives only names (id None). None
    where the report holds no NVTX state that can be read."""
    if isinstance(action, ncu_fastread.FastResult):
        return action.nvtx
    try:
        state = action.nvtx_state()
        out = []
        for ident in state.domains():
            domain = state.domain_by_id(ident)
            out += [(domain.name(), str(name), None) for name in domain.push_pop_ranges()]
        return tuple(out)
    except Exception:  # an older report or module without NVTX state
        return None


def _plain(rule: dict) -> dict:
    """``rule`` with ncu's ``@url:...@`` / ``@section:...@`` markup as plain text."""
    for key in ("title", "message"):
        if isinstance(rule.get(key), str):
            rule[key] = _plain_text(rule[key])
    return rule


_NCU_URL = re.compile(r"@url:([^@]*?):((?:https?|ftp)://[^@\s]*)@")
_NCU_LINK = re.compile(r"@\w+:[^:@]*:([^@]*)@")


def ncu_plain(text: str) -> str:
    """ncu's rule-message markup as plain text: ``@url:Guide:https://...@`` becomes
    ``Guide (https://...)``, ``@section:Id:Memory Workload Analysis@`` its title."""
    if "@" not in text:  # most messages: both patterns need an "@"
        return text
    return _NCU_LINK.sub(r"\1", _NCU_URL.sub(r"\1 (\2)", text))


@functools.lru_cache(maxsize=4096)
def _plain_text(text: str) -> str:
    """``ncu_plain(text)``, worked out once for a text: the same rule messages come
    back in report after report (and the fast reader gives them as the same string)."""
    return ncu_plain(text)


# -- source-level counters (SourceCounters): ncu_report only ----------------------------
def open_full(path: Path):
    """Load one report through ``ncu_report`` whatever the fast reader could do:
    ``(context, actions)``, ``actions`` a list in range order. Per-instruction metrics,
    SASS and line tables live only there. UserError as :func:`open_report`."""
    path = Path(path)
    if not path.name.endswith(".ncu-repz") and check_framing(path) == 0:
        raise UserError(f"{path}: the report holds no profiled kernels "
                        "(ncu's kernel filters matched nothing?)")
    probe = True
    if not path.name.endswith(".ncu-repz"):
        try:  # a file the fast reader finds damaged never reaches ncu_report
            ncu_fastread.read_report(path, (), ())
            probe = False  # a known version whose framing adds up: no child needed
        except ncu_fastread.Corrupt as err:
            raise UserError(f"{path}: corrupt Nsight Compute report ({err})") from None
        except (ncu_fastread.Unsupported, OSError):
            pass
    context = _load(path, probe)
    return context, list(_actions(context))


def metric_names(action) -> list[str]:
    """Every metric name an ``ncu_report`` action holds."""
    return list(action.metric_names())


def read_instanced(action, name: str) -> dict[int, float]:
    """A source-correlated metric as {instruction address: value}; {} when the action lacks
    it or it has no per-instruction instances."""
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    return {int(ids.as_uint64(i)): float(metric.as_double(i)) for i in range(metric.num_instances())}


def read_by_instance(action, name: str) -> dict[str, float] | None:
    """A metric instanced by a string key (``sass__inst_executed_per_opcode``: warp
    instructions by SASS opcode) as ``{key: value}``; None when the action lacks it (a
    report without its section), ``{}`` when it holds no instances."""
    if isinstance(action, ncu_fastread.FastResult):
        if name not in action.asked:
            raise KeyError(f"metric {name} was not decoded: name it to open_report")
        if name in action.instances:
            return action.instances[name]
        return None if action.values.get(name) is None else {}
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_value():
        return None
    if not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    return {str(ids.as_string(i)): float(metric.as_double(i)) for i in range(metric.num_instances())}


def source_location(action, address: int) -> tuple[str, int] | None:
    """(file, line) of an instruction address from the line table (``-lineinfo``), or None."""
    info = action.source_info(address)
    if info is None:
        return None
    name, line = info.file_name(), int(info.line())
    return (name, line) if name and line > 0 else None


def sass_text(action, address: int) -> str:
    """The SASS instruction at an address (``""`` when unknown), without its indentation."""
    return (action.sass_by_pc(address) or "").strip()


def embedded_sources(action) -> dict[str, str]:
    """Source files the report carries (``ncu --import-source yes``): path -> text."""
    try:
        return {str(k): str(v) for k, v in dict(action.source_files()).items()}
    except Exception:  # an older ncu_report without the call, or a damaged table
        return {}
