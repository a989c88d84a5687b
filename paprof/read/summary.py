"""A run's parsed summary: what the fast reader returned for its report, written beside it
(``<shape>.summary``) when paprof stores the run, so that loading a store opens no report.

The summary holds the reader's output (each kernel result's catalogue metrics, opcode
counts, rules and NVTX ranges: ``ncu_fastread.FastResult``), not the loader's columns, so
that the analysis may change without it. It is used only when it was made

- from this report: the report's size and ``mtime_ns`` as the summary records them (the
  fast path: one ``stat``), else (a store copied with ``cp``, cloned by git) the sha256
  of the report's bytes as the summary records it (hashed, then used if equal), where
  hashing costs less than reading (``HASH_BYTES``);
- by this reader: ``FORMAT`` (bumped whenever the reader's output changes:
  ``tests/test_summary.py`` holds the output of the shipped reports against it) and a
  hash of the metric names the catalogue asks for (``ncu_reader.catalogue_metrics``).

Anything else (no summary, a stale, foreign, truncated, oversized or hostile one) and the
report is read as before: a summary is an untrusted file of the store, read without
following a link, within a size bound, through ``paprof.jsonsafe``, every type checked;
it can make loading faster, never different, and never fail.

Written only by the commands that store runs (``store.writing``: ``paprof run``, ``paprof
sweep``; ``paprof merge``; ``write``), atomically like every other file of a store (a
temporary name made with ``O_EXCL | O_NOFOLLOW`` in the run's folder, opened by
descriptor, renamed into place); never by a command that only reads. Runs stored before
summaries existed have none and load from their reports (correct, slower).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path

from paprof import jsonsafe
from paprof.read import ncu_fastread, ncu_reader, store_files
from paprof.errors import UserError

SUFFIX = ".summary"
"""Beside ``<shape>.ncu-rep``: ``<shape>.summary`` (not ``.json``: the name of no report's
sidecar)."""
FORMAT = 1
"""The summary's format and the reader's output it holds: bump it with any change to
what ``ncu_fastread.read_report`` returns (``tests/test_summary.py`` fails until it is)."""
MAX_BYTES = 64 << 20
"""No summary larger is read (nor one over ``SLACK`` times its report's size)."""
SLACK = 4
HASH_BYTES = 512 << 10
"""A summary whose report's stat differs is checked by the report's sha256 only where the
report holds at most this many bytes a result: hashing reads every byte (0.63 ms a MB
here), while the fast reader skips a result's source counters (a result of 850 KB with
them reads in about 1 ms, one of 170 KB without in 0.5 ms)."""
_RULE_KEYS = frozenset({"id", "title", "type", "message", "speedup_pct"})
_RULE_TYPES = frozenset(ncu_fastread._RULE_TYPES.values())
_FLOAT, _NUMBER, _TEXT = frozenset({float}), frozenset({float, type(None)}), frozenset({str, type(None)})


def path_of(report):
    """The summary's path beside ``report`` (``x.ncu-rep`` -> ``x.summary``): its text for
    a report's text (the loader's: no Path made and parsed a run), else a Path."""
    if isinstance(report, str) and report.endswith(".ncu-rep"):
        return report[: -len(".ncu-rep")] + SUFFIX
    report = Path(report)
    name = report.name
    if name.endswith(".ncu-rep"):
        name = name[: -len(".ncu-rep")]
    return report.with_name(name + SUFFIX)


class _Asked:
    """What the loader asks every report for, as ``ncu_reader.open_report`` asks it by
    default: the numeric and text metric names, those read by instance, the names in
    the order a summary lists their values (numeric, then text, each sorted) and a hash
    of that order (the summary's ``metrics``)."""

    def __init__(self):
        self.numeric, self.text = ncu_reader._catalogue_sets()
        self.by_instance = frozenset(n for n in ncu_reader.BY_INSTANCE if n in self.numeric)
        self.asked = self.numeric | self.text
        self.order = (*sorted(self.numeric), *sorted(self.text))
        self.texts = len(self.numeric)  # the first text name's place in ``order``
        names = json.dumps([self.order, sorted(self.by_instance)])
        self.hash = _digest(hashlib.sha256(names.encode()))


_ASKED: _Asked | None = None


def _asked() -> _Asked:
    """``_Asked``, made once."""
    global _ASKED
    if _ASKED is None:
        _ASKED = _Asked()
    return _ASKED


def _digest(h) -> str:
    """A digest in decimal digits: no hexadecimal ``e123`` in the summary for
    ``jsonsafe`` to take for an exponent (and check the text number by number)."""
    return str(int.from_bytes(h.digest(), "big"))


def _sha256(fd: int) -> str:
    h = hashlib.sha256()
    while True:
        block = os.read(fd, store_files.BLOCK)
        if not block:
            return _digest(h)
        h.update(block)


# -- making and writing ----------------------------------------------------------------


def make(report: Path) -> str | None:
    """The summary of ``report`` as text (compact JSON), read now with the fast reader;
    None when the fast reader cannot read it (``ncu_report`` would) or its output would
    not come back the same from the text (a number JSON cannot hold)."""
    asked = _asked()
    if not report.name.endswith(".ncu-rep"):
        return None  # compressed: ncu_report alone reads it
    try:
        fd = store_files.open_read(report)
        try:
            before = os.fstat(fd)
            digest = _sha256(fd)
            results = ncu_fastread.read_report(report, asked.numeric, asked.text,
                                               asked.by_instance)
            after = os.stat(report, follow_symlinks=False)
        finally:
            os.close(fd)
    except (ncu_fastread.Unsupported, OSError, UserError):
        return None
    same = ("st_dev", "st_ino", "st_size", "st_mtime_ns")
    if any(getattr(before, k) != getattr(after, k) for k in same) or not results:
        return None  # replaced or written to meanwhile, or no kernels: nothing to keep
    stamp = {"size": after.st_size, "mtime_ns": after.st_mtime_ns, "results": len(results),
             "sha256": digest}
    document = encode(results, stamp)
    try:
        again = _decode(jsonsafe.parse(document.encode()), asked)
    except (ValueError, UnicodeDecodeError):
        again = None
    if again is None or encode(again, stamp) != document:
        return None
    return document


def encode(results, report: dict) -> str:
    """The summary's text of the reader's ``results`` (``FastResult``s of the catalogue's
    metrics) of a report whose ``report`` (size, mtime_ns, results, sha256) is given. Each result
    is ``[kernel, values, rules, nvtx, instances]``: its values in the order of
    ``_Asked.order`` (null where it has none), its rules by their place in the
    summary's list of rules (each listed once), its NVTX ranges as lists."""
    asked = _asked()
    rules: list[dict] = []
    places: dict = {}
    out = []
    for result in results:
        mine = []
        for rule in result.rules:
            key = json.dumps(rule, sort_keys=True)
            if key not in places:
                places[key] = len(rules)
                rules.append(dict(rule))
            mine.append(places[key])
        get = result.values.get
        out.append([result.kernel, [get(name) for name in asked.order], mine,
                    None if result.nvtx is None else [list(r) for r in result.nvtx],
                    result.instances])
    return json.dumps({"paprof_summary": FORMAT, "metrics": asked.hash, "report": report,
                       "rules": rules, "results": out}, separators=(",", ":"))


def write(report: Path, root, text: str | None = None, dir_fd: int | None = None) -> bool:
    """Write the summary of the stored ``report`` (a run of the store ``root``) beside it,
    atomically (``store_files.temp_at`` in the run's folder, opened from ``root`` without
    following a link, renamed into place); ``text``: ``make(report)`` made already (used
    only if the report is still the one it was made from). Whether one was written: a
    report the fast reader cannot read gets none, and a summary that cannot be written
    (a read-only store, a link planted at its name) is left out, said once on stderr: it
    only makes loading faster. ``dir_fd``: the run's folder, open already (the writer's)."""
    report = Path(report)
    try:
        st = os.stat(report, follow_symlinks=False)
        if text is not None:
            made = jsonsafe.loads(text)["report"]
            if (made["size"], made["mtime_ns"]) != (st.st_size, st.st_mtime_ns):
                text = None
        if text is None:
            text = make(report)
        if text is None:
            return False
        target = path_of(report)
        where = store_files.open_folder(root, target.parent) if dir_fd is None else dir_fd
        token = store_files.token()
        try:
            store_files.refuse_link_at(where, target.name)
            fd, tmp = store_files.temp_at(where, target.name, token)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, target.name, src_dir_fd=where, dst_dir_fd=where)
        finally:
            store_files.remove_temps_at([where], token)
            if dir_fd is None:
                os.close(where)
    except (OSError, UserError, ValueError, KeyError) as err:
        store_files.warn(path_of(report), f"its summary was not written ({err}); the run "
                         "loads from its report")
        return False
    return True


# -- reading ---------------------------------------------------------------------------


def read(report: Path) -> list | None:
    """The reader's results of ``report`` from its summary (``FastResult``s, as
    ``ncu_fastread.read_report`` returns them for the catalogue's metrics), or None
    wherever the report must be read instead (``PAPROF_FAST_READER=0``: always). Never
    raises for what the store holds."""
    # the path's text, made once (not a Path a step: 10,000 runs, 0.1 s)
    report = os.fspath(report if isinstance(report, Path) else Path(report))
    if not ncu_reader.FAST_READER or not report.endswith(".ncu-rep"):
        return None
    try:
        return _read(report)
    except (OSError, ValueError, UnicodeDecodeError, UserError, KeyError, TypeError,
            RecursionError, MemoryError):
        return None


def _read(report: str) -> list | None:
    try:
        fd = store_files.open_read(path_of(report))
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        now = os.stat(report, follow_symlinks=False)
        if not stat.S_ISREG(now.st_mode) or size > min(MAX_BYTES, SLACK * now.st_size + 65536):
            return None
        raw = os.read(fd, size + 1)
        while len(raw) <= size:
            more = os.read(fd, size + 1 - len(raw))
            if not more:
                break
            raw += more
    finally:
        os.close(fd)
    if len(raw) != size:
        return None  # changed while read
    head = _HEAD.match(raw)  # as ``encode`` begins it: what is passed over, before parsing
    if head is not None and (
            int(head[1]) != FORMAT or head[2].decode() != _asked().hash
            or int(head[3]) != now.st_size
            or int(head[4]) != now.st_mtime_ns and now.st_size > HASH_BYTES * max(int(head[5]), 1)):
        return None
    document = jsonsafe.parse(raw)
    asked = _asked()
    if (type(document) is not dict or document.get("paprof_summary") != FORMAT
            or document.get("metrics") != asked.hash):
        return None
    made = document.get("report")
    if type(made) is not dict or made.get("size") != now.st_size:
        return None
    if made.get("mtime_ns") != now.st_mtime_ns:  # copied, cloned, touched: by its bytes
        digest, results = made.get("sha256"), document.get("results")
        if type(digest) is not str or type(results) is not list:
            return None
        if now.st_size > HASH_BYTES * max(len(results), 1):
            return None  # hashing it would cost more than reading it (source counters)
        with os.fdopen(store_files.open_read(report), "rb") as fh:
            if _sha256(fh.fileno()) != digest:
                return None
    return _decode(document, asked)


_HEAD = re.compile(rb'\{"paprof_summary":([0-9]{1,9}),"metrics":"([0-9]{1,100})","report":'
                   rb'\{"size":([0-9]{1,30}),"mtime_ns":([0-9]{1,30}),"results":([0-9]{1,12}),')
"""The start of a summary as ``encode`` writes it: its format, catalogue hash, report size,
mtime_ns and results, read before the whole is parsed (a summary that does not start so
is parsed whole, and checked the same)."""


def _decode(document: dict, asked: _Asked) -> list | None:
    """The ``FastResult``s of a parsed summary; None at the first thing not as ``encode``
    writes it (a value of the wrong type or not finite, a rule out of range, a list of
    the wrong length)."""
    rules = document.get("rules")
    results = document.get("results")
    if type(rules) is not list or type(results) is not list or not results:
        return None
    for rule in rules:
        if (type(rule) is not dict or rule.keys() != _RULE_KEYS
                or type(rule["id"]) is not str or type(rule["title"]) is not str
                or type(rule["message"]) is not str
                or rule["type"] not in _RULE_TYPES or type(rule["speedup_pct"]) is not float):
            return None
    # Every number is finite (``jsonsafe`` refused the text otherwise): types are checked.
    order, texts, count = asked.order, asked.texts, len(asked.order)
    out = []
    for item in results:
        if type(item) is not list or len(item) != 5:
            return None
        kernel, listed, mine, nvtx, instances = item
        if type(kernel) is not str or not kernel or type(listed) is not list or len(listed) != count:
            return None
        if not (set(map(type, listed[:texts])) <= _NUMBER
                and set(map(type, listed[texts:])) <= _TEXT):
            return None
        values = {name: value for name, value in zip(order, listed) if value is not None}
        if type(mine) is not list or not all(type(i) is int and 0 <= i < len(rules) for i in mine):
            return None
        if nvtx is not None:
            if type(nvtx) is not list:
                return None
            for entry in nvtx:
                if (type(entry) is not list or len(entry) != 3 or type(entry[0]) is not str
                        or type(entry[1]) is not str
                        or not (entry[2] is None or type(entry[2]) is int)):
                    return None
            nvtx = tuple(tuple(entry) for entry in nvtx)
        if type(instances) is not dict:
            return None
        for name, counts in instances.items():
            if (name not in asked.by_instance or type(counts) is not dict
                    or not set(map(type, counts.values())) <= _FLOAT):
                return None
        out.append(ncu_fastread.FastResult(kernel, values, [rules[i] for i in mine],
                                           asked.asked, nvtx, instances))
    return out
