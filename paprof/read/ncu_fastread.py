"""Read the values paprof needs straight from the bytes of an ``.ncu-rep`` file.

``ncu_report`` spends ~3 ms making each result object (``range.action_by_idx``) and
~2 ms more answering paprof's questions; this module decodes only what the loader needs
(the kernel name, the catalogue metrics, the rule messages) in well under 1 ms a result,
without Nsight Compute. It is a *fast path*: whenever the bytes hold anything it does
not decode with certainty, :func:`read_report` raises :class:`Unsupported` and the
caller (:mod:`paprof.read.ncu_reader`) reads the whole file through ``ncu_report``.

The format (Nsight Compute 2025.3, file version 7), as relied on here. Every message is
protobuf (proto2) wire format; "field n" is a protobuf field number.

* File: ``NVR\\0``, u32 length + FileHeader (field 1: version), then blocks.
* Block: u32 length + BlockHeader, then ``payload size`` bytes of payload.
  BlockHeader: 1 number of sources, 2 number of results, 3 session data (blocks without
  payload), 4 string table (``{1: repeated string}``), 5 payload size, 6 process,
  7 number of range results (must be 0 here).
* String tables are *cumulative*: each block header's table is appended to the ones
  before it, and a metric's name id indexes the whole list (checked against
  ``ncu_report`` with a crafted second table). Blocks normally carry one result each.
* Payload: (u32 length + message) for each source, then for each result. A result is
  a ProfileResult: 5 mangled name, 6 kernel function name (``IAction.name()``), 13 metric results,
  19 rule results; everything else is skipped.
* NVTX state (``IAction.nvtx_state()``): 1 domains ``{1 id, 2 name}``; 2 a thread's
  stacks ``{1 thread id, 2 a domain's push/pop stack {1 domain id, 3 repeated range
  {1 name, 3 the range's instance id}}}``; other fields skipped. The instance id
  (the API call id of the push, distinct for each push) is what ``ncu_report`` does not
  expose: it tells one repetition of a range from the next when their names are equal.
  A state this module cannot parse leaves ``nvtx`` None; it never changes the metrics.
* Metric result: 1 name id, 2 value, 3 instance values (skipped: ``as_double`` reads
  the aggregate, field 2), 4 a varint that does not change the value. No field 2 means
  ``has_value()`` is False. Value: exactly one of 1 string, 2 float (fixed32),
  3 double (fixed64), 4 uint32 (varint), 5 uint64 (varint).
* Rule result: 1 identifier, 2 display name (``IRuleResult.name()``), 3 body
  ``{1: repeated item}``, 4 section. ``ncu_report`` makes one rule result per body item;
  an item has 1 message ``{1 text, 2 type, 3 (unused), 4 title}`` and optionally
  10 speedup estimation ``{1 type, 2 speedup (double)}``. The file's message-type enum
  is 0 none, 1 ok, 2 warning, 3 error, 4 optimization.

Results come in file order, which is ``ncu_report``'s range-by-range action order for
the single range a kernel-profiling report holds (range results make it fall back).
"""

from __future__ import annotations

import math
import os
import re
import struct
import sys
from pathlib import Path
from typing import Iterable

#: File header versions whose layout this module was checked against.
FILE_VERSIONS = frozenset({7})

#: BlockHeader field numbers.
_B_SOURCES, _B_RESULTS, _B_SESSION, _B_STRINGS, _B_PAYLOAD, _B_PROCESS, _B_RANGES = range(1, 8)

#: The file's rule-message type -> the name paprof's ``read_rules`` gives
#: (``ncu_report``'s MsgType: NONE 0, OK 1, OPTIMIZATION 2, WARNING 3, ERROR 4).
_RULE_TYPES = {0: "NONE", 1: "OK", 2: "WARNING", 3: "ERROR", 4: "OPTIMIZATION"}

_DOUBLE = struct.Struct("<d").unpack_from
_FLOAT = struct.Struct("<f").unpack_from
_U32 = struct.Struct("<I").unpack_from


#: Empty blocks (a header of length 0: no sources, no results, no payload) allowed in a
#: row. ncu writes none; a zero-filled tail (a file preallocated and never written, a disk
#: full) reads as millions of them, 4 bytes each: 13 s for 40 MB before this bound.
EMPTY_BLOCKS = 8


def empty_run(pos: int) -> str:
    """The one line that refuses a run of empty blocks from byte ``pos`` (both readers)."""
    return f"a run of empty blocks from byte {pos:,}: a zero-filled or damaged file"


class Unsupported(Exception):
    """The fast path cannot be sure of this file: read it through ``ncu_report``."""


class Corrupt(Unsupported):
    """The framing of a file of a known version does not add up (a short read, a block
    or payload message past its end, counts that differ from what the payloads hold).
    ``ncu_report`` aborts the process on such files, so the caller reports it as
    damaged instead of falling back."""


class FastResult:
    """One kernel result: what the loader reads from an ``ncu_report`` action.

    ``values`` maps each requested metric name the result records with a value to that
    value (``float`` for a numeric metric, ``str`` for a text one); a name that is absent
    or has no value (``has_value()`` False) is not in it. ``rules`` is exactly what
    :func:`paprof.read.ncu_reader.read_rules` returns for the action (before its
    markup is made plain), its dicts shared with every result holding the same rule
    bytes: read-only (``read_rules`` copies them). ``asked`` is every name that was
    decoded, present or not.
    """

    __slots__ = ("kernel", "values", "rules", "asked", "nvtx", "instances", "mangled")

    def __init__(self, kernel: str, values: dict, rules: list[dict], asked: frozenset,
                 nvtx: "tuple | None" = None, instances: "dict | None" = None,
                 mangled: "str | None" = None):
        self.kernel = kernel
        self.mangled = mangled
        """The kernel's mangled name (``IAction.name(NameBase_MANGLED)``): one per
        function, where template instances share a function name; None where absent."""
        self.values = values
        self.rules = rules
        self.asked = asked
        self.instances = instances or {}
        """For the names asked for ``by_instance`` that the result holds: ``{name: {instance
        key: value}}`` (warp instructions by opcode: ``{"FFMA": 1048576.0, ...}``)."""
        self.nvtx = nvtx
        """The push/pop ranges around the launch: ``((domain, name, instance id), ...)``
        from the bottom of the stack up; ``()`` for none; None where the state was not
        decoded."""

    def name(self) -> str:
        """The kernel's function name, as ``IAction.name()`` gives it."""
        return self.kernel

    def __repr__(self) -> str:
        return f"FastResult({self.kernel!r}, {len(self.values)} metrics, {len(self.rules)} rules)"


def read_report(path: Path | str, numeric: Iterable[str], text: Iterable[str] = (),
                by_instance: Iterable[str] = ()) -> list[FastResult]:
    """Every kernel result of ``path`` in ``ncu_report``'s order, with the ``numeric``
    metrics (``as_double``) and ``text`` metrics (``as_string``) they record; for the
    names in ``by_instance`` (each also in ``numeric``), the instance values too, keyed by
    their string correlation ids (``FastResult.instances``).

    The file is read a message at a time (the block headers, then each result; sources
    are skipped by seeking), so memory stays near the largest message, not the file.

    Raises :class:`Unsupported` for anything not decoded with certainty: an unknown file
    version or wire type, a missing string table, a name id out of range, a value kind
    not matching the request, a message or count that does not add up. ``OSError``
    passes through.
    """
    numeric, text = frozenset(numeric), frozenset(text)
    _wanted(numeric, text)  # ValueError for a name asked both ways
    with open(path, "rb") as handle:
        try:
            return _Reader(handle, numeric, text, frozenset(by_instance)).results()
        except (IndexError, struct.error, UnicodeDecodeError, ValueError) as err:
            raise Unsupported(f"unexpected bytes ({type(err).__name__}: {err})") from err


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if shift > 63:
                raise Unsupported("varint longer than 10 bytes")
            return value, pos
        shift += 7
        if shift > 63:
            raise Unsupported("varint longer than 10 bytes")


def _skip(buf: bytes, pos: int, wire: int) -> int:
    """The position after a field's value of wire type ``wire`` starting at ``pos``."""
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 2:
        length, pos = _varint(buf, pos)
        return pos + length
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    raise Unsupported(f"wire type {wire}")


MAGIC = b"NVR\x00"
"""The first four bytes of every ``.ncu-rep`` file."""
BLOCK_SOURCES, BLOCK_RESULTS, BLOCK_PAYLOAD, BLOCK_RANGES = _B_SOURCES, _B_RESULTS, _B_PAYLOAD, _B_RANGES
"""A block header's fields: the numbers of sources and of kernel results, the payload's
size in bytes, the number of range results."""
varint, skip_field = _varint, _skip
"""A varint's (value, position after it); the position after a field's value."""


def read_u32(data: bytes) -> int | None:
    """The little-endian u32 that prefixes the file header and each block header; None
    when ``data`` is short (the file ends)."""
    return _U32(data, 0)[0] if len(data) >= 4 else None


def varint_fields(message: bytes) -> dict[int, int]:
    """The varint fields of a serialised message (a block header of any ncu version), by
    field number, the others skipped; Unsupported or IndexError when it does not parse."""
    pos, found = 0, {}
    while pos < len(message):
        tag, pos = _varint(message, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            found[number], pos = _varint(message, pos)
        else:
            pos = _skip(message, pos, wire)
        if pos > len(message):
            raise Unsupported("a message runs past its end")
    return found


def _fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """Every field of the message in ``buf[pos:end]``: (number, wire, start, end), where
    start..end is the value (for wire 2: the bytes inside the length prefix; for wire 0
    start is the varint's position)."""
    out = []
    while pos < end:
        tag = buf[pos]  # one-byte tags and lengths (nearly all) read inline
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            out.append((tag >> 3, 2, pos, pos + length))
            pos += length
        else:
            start = pos
            pos = pos + 1 if wire == 0 and buf[pos] < 0x80 else _skip(buf, pos, wire)
            out.append((tag >> 3, wire, start, pos))
    if pos != end:
        raise Unsupported("a message runs past its end")
    return out


def _text(buf: bytes, start: int, end: int) -> str:
    return buf[start:end].decode("utf-8")


def _plain_double(buf: bytes, pos: int, end: int) -> bool:
    """Whether ``buf[pos:end]``, the rest of a metric result after its name id, is the
    commonest layout: a value message holding one double (``12 09 19`` + 8 bytes),
    then nothing or field 4 as a one-byte varint (``20 xx``). The double is at
    ``pos + 3``."""
    size = end - pos
    return ((size == 11 or size == 13 and buf[pos + 11] == 0x20 and buf[pos + 12] < 0x80)
            and buf[pos] == 0x12 and buf[pos + 1] == 0x09 and buf[pos + 2] == 0x19)


def _read(handle, size: int) -> bytes:
    """Exactly ``size`` bytes from ``handle`` (the file changed under us otherwise)."""
    data = handle.read(size)
    if len(data) != size:
        raise Corrupt("the file ends early (changed while read?)")
    return data


#: The one-byte lengths in the order a pattern tries them. A regex alternation tries its
#: branches in turn, so the common lengths go first: in the shipped reports 80 % of the
#: metric results are 16 bytes long, and instance values mostly 14, then 8 to 16.
_LENGTH_ORDER = (16, 14, 15, *range(8, 14), *range(17, 32), *range(8), *range(32, 0x80))

#: ``*+`` (possessive: no backtracking state kept) where Python has it (3.11).
_POSSESSIVE = b"+" if sys.version_info >= (3, 11) else b""


def _lengths(smallest: int = 0) -> bytes:
    """An alternation matching a one-byte length of ``smallest`` or more and that many
    bytes: one branch a length, each starting with its own byte, so at most one fits."""
    return b"|".join(re.escape(bytes([n])) + (b".{%d}" % n if n else b"")
                     for n in _LENGTH_ORDER if n >= smallest)


def _instance_run() -> "re.Pattern[bytes]":
    """A run of instance values with one-byte lengths (``0x1a``, n < 128, n bytes), the
    bulk of a metric with thousands of instances (``inst_executed`` with source counters:
    4,500), skipped in C rather than a field at a time. The match is the framing walk
    itself: at each field exactly one length branch fits."""
    return re.compile(b"(?:\\x1a(?:" + _lengths() + b"))*" + _POSSESSIVE, re.DOTALL)


_INSTANCES: "re.Pattern[bytes] | None" = None


def _skip_instances(data: bytes, pos: int, end: int) -> int:
    """The position after the run of one-byte-length instance values at ``pos`` (``pos``
    itself when none fits before ``end``). The pattern is compiled on first use."""
    global _INSTANCES
    if _INSTANCES is None:
        _INSTANCES = _instance_run()
    return _INSTANCES.match(data, pos, end).end()

#: Instance values spanning fewer bytes than this are walked in Python (a regex call
#: costs about as much as a dozen Python steps).
_INSTANCE_RUN_MIN = 256


#: Decoded string tables by their bytes: reports of one ncu version and section set
#: share them (each is ~800 names, ~40 KB). Bounded; cleared when full.
_STRING_TABLES: dict[bytes, tuple[str, ...]] = {}
_STRING_TABLES_MAX = 32


def _string_table(raw: bytes) -> tuple[str, ...]:
    """The strings of a serialised string table (``{1: repeated string}``)."""
    strings = _STRING_TABLES.get(raw)
    if strings is not None:
        return strings
    out = []
    pos, end = 0, len(raw)
    while pos < end:
        if raw[pos] != 0x0A:  # field 1, wire type 2
            raise Unsupported(f"string table tag {raw[pos]:#x}")
        length, pos = _varint(raw, pos + 1)
        stop = pos + length
        if stop > end:
            raise Unsupported("a string runs past its table")
        out.append(raw[pos:stop].decode("utf-8"))
        pos = stop
    strings = tuple(out)
    if len(_STRING_TABLES) >= _STRING_TABLES_MAX:
        _STRING_TABLES.clear()
    _STRING_TABLES[raw] = strings
    return strings


class _Table:
    """One string table read for one set of wanted names: ``lookup`` maps each name id
    to the wanted name (None for the others); ``skip`` matches a run of metric results
    that the reader would pass over (see :func:`_unwanted_run`), None when it cannot."""

    __slots__ = ("raw", "lookup", "skip")

    def __init__(self, raw: bytes, wanted: frozenset):
        self.raw = raw
        self.lookup = [name if name in wanted else None for name in _string_table(raw)]
        pattern = _unwanted_run(self.lookup)
        self.skip = pattern.match if pattern is not None else None


#: ``_Table`` by the table's length and ends and the wanted names (its bytes compared
#: in full on a hit: cheaper than hashing 40 KB for every report). Bounded.
_TABLES: dict[tuple, _Table] = {}


def _table(raw: bytes, wanted: frozenset) -> _Table:
    key = (len(raw), raw[:64], raw[-64:], wanted)
    table = _TABLES.get(key)
    if table is None or table.raw != raw:
        if len(_TABLES) >= _STRING_TABLES_MAX:
            _TABLES.clear()
        table = _TABLES[key] = _Table(raw, wanted)
    return table


#: ``numeric | text`` by the two sets asked for (the same two for every report a loader
#: reads). Bounded.
_WANTED: dict[tuple[frozenset, frozenset], frozenset] = {}


def _wanted(numeric: frozenset, text: frozenset) -> frozenset:
    wanted = _WANTED.get((numeric, text))
    if wanted is None:
        if numeric & text:
            raise ValueError("metrics asked for both as numbers and as text: "
                             f"{sorted(numeric & text)}")
        if len(_WANTED) >= _STRING_TABLES_MAX:
            _WANTED.clear()
        wanted = _WANTED[(numeric, text)] = numeric | text
    return wanted


def _byte_class(values) -> bytes:
    return b"[" + b"".join(re.escape(bytes([v])) for v in values) + b"]"


def _unwanted_run(lookup: list) -> "re.Pattern[bytes] | None":
    """A pattern matching a run of metric results that the reader skips: field 13 with a
    one-byte length of 3 or more whose content starts with the name id (``0x08``, then a
    one- or two-byte varint, the second byte not 0) of a name that is in ``lookup`` and
    not wanted. Each length has its own branch, so a match is the framing walk itself,
    in C; anything else (a wanted metric, a longer length, another field) ends the run
    and is read in Python. None when no id qualifies."""
    bound = min(len(lookup), 1 << 14)  # ids of one or two varint bytes
    low = [i for i in range(min(bound, 0x80)) if lookup[i] is None]
    # A two-byte id by its second byte first (a literal: the alternation rejects it at
    # once), then its first byte looked back at: twice as fast as a class per branch.
    high = []
    for second in range(1, (bound + 0x7F) >> 7):
        first = [0x80 | (i & 0x7F) for i in range(second << 7, min(bound, (second + 1) << 7))
                 if lookup[i] is None]
        if first:
            high.append(re.escape(bytes([second])) + b"(?<=" + _byte_class(first) + b".)")
    ids = ([_byte_class(low)] if low else []) + (
        [b"[\\x80-\\xff](?:" + b"|".join(high) + b")"] if high else [])
    if not ids:
        return None
    return re.compile(b"(?:\\x6a(?=.\\x08(?:" + b"|".join(ids) + b"))(?:" + _lengths(3)
                      + b"))*" + _POSSESSIVE, re.DOTALL)


def _block_header(head: bytes) -> tuple[dict[int, int], bytes | None]:
    """The counts (sources, results, payload size, range results) and the string table
    of a serialised BlockHeader; Unsupported for a field or wire type not known here."""
    counts = {_B_SOURCES: 0, _B_RESULTS: 0, _B_PAYLOAD: 0, _B_RANGES: 0}
    table = None
    pos, end = 0, len(head)
    while pos < end:
        tag = head[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(head, pos - 1)
        number, wire = tag >> 3, tag & 7
        if number in counts:
            if wire != 0:
                raise Unsupported(f"block header field {number} of wire type {wire}")
        elif number in (_B_STRINGS, _B_SESSION, _B_PROCESS):
            if wire != 2:
                raise Unsupported("string table of the wrong wire type" if number == _B_STRINGS
                                  else f"block header field {number} of wire type {wire}")
        else:
            raise Unsupported(f"unknown block header field {number}")
        value = head[pos]  # the count, or the length: one byte nearly always
        if value < 0x80:
            pos += 1
        else:
            value, pos = _varint(head, pos)
        if wire == 0:
            counts[number] = value
        else:
            if number == _B_STRINGS:
                table = head[pos:pos + value]
            pos += value
    if pos != end:
        raise Unsupported("a message runs past its end")
    return counts, table


block_header = _block_header


class _Reader:
    """One file's decoding state: the cumulative string table and the wanted name ids."""

    def __init__(self, handle, numeric: frozenset, text: frozenset,
                 by_instance: frozenset = frozenset()):
        self.handle = handle
        self.by_instance = by_instance
        self.numeric = numeric
        self.text = text
        self.wanted = _wanted(numeric, text)
        self.lookup: list[str | None] = []  # name id -> the wanted name, None for others
        self.skip = None  # the first table's run of skipped metric results
        self._owned = False  # whether ``lookup`` is this reader's own list (else cached)

    # -- framing ------------------------------------------------------------------------

    def results(self) -> list[FastResult]:
        handle = self.handle
        size = os.fstat(handle.fileno()).st_size
        start = handle.read(8)
        if start[:4] != MAGIC:
            raise Unsupported("no NVR signature")
        header_len = _U32(start, 4)[0]
        pos = 8 + header_len
        if pos > size:
            raise Unsupported("file header cut off")
        header = _read(handle, header_len)
        version = None
        for number, wire, begin, _end in _fields(header, 0, header_len):
            if number != 1 or wire != 0:
                raise Unsupported(f"unknown file header field {number}")
            version = _varint(header, begin)[0]
        if version not in FILE_VERSIONS:
            raise Unsupported(f"file version {version}")

        results: list[FastResult] = []
        expected = 0
        empty = 0  # empty blocks in a row: a zero-filled tail is walked 4 bytes at a time
        while pos < size:
            block_len = _U32(_read(handle, 4), 0)[0]
            empty = empty + 1 if block_len == 0 else 0
            if empty > EMPTY_BLOCKS:
                raise Corrupt(empty_run(pos - 4 * EMPTY_BLOCKS))
            head_end = pos + 4 + block_len
            if head_end > size:
                raise Corrupt("block header cut off")
            head = _read(handle, block_len)
            counts, table = _block_header(head)
            if counts[_B_RANGES]:
                raise Unsupported("range results")
            if table:
                self._add_strings(table)
            end = head_end + counts[_B_PAYLOAD]
            if end > size:
                raise Corrupt("payload cut off")
            expected += counts[_B_RESULTS]
            self._payload(head_end, end, counts[_B_SOURCES], counts[_B_RESULTS], results)
            pos = end
        if len(results) != expected:
            raise Corrupt(f"{len(results)} results decoded, block headers say {expected}")
        return results

    def _add_strings(self, raw: bytes) -> None:
        table = _table(raw, self.wanted)
        # The ids of the first table keep their meaning as tables are added, so its run
        # pattern holds for the whole file.
        if not self.lookup:
            self.lookup, self.skip = table.lookup, table.skip  # the cached list: not changed
        elif not self._owned:
            self.lookup, self._owned = self.lookup + table.lookup, True  # a list of our own
        else:
            self.lookup.extend(table.lookup)

    def _payload(self, pos: int, end: int, sources: int, count: int,
                 out: list[FastResult]) -> None:
        """The block's messages from the file's position ``pos``: sources skipped,
        results decoded one at a time."""
        handle = self.handle
        for i in range(sources + count):
            if pos + 4 > end:
                raise Corrupt("fewer payload messages than its block header counts")
            length = _U32(_read(handle, 4), 0)[0]
            pos += 4 + length
            if pos > end:
                raise Corrupt("a payload message runs past its block")
            if i >= sources:
                out.append(self._result(_read(handle, length)))
            else:
                handle.seek(length, 1)
        if pos != end:
            raise Corrupt("payload bytes left over after the counted messages")

    # -- one result ---------------------------------------------------------------------

    def _result(self, data: bytes) -> FastResult:
        """Decode one ProfileResult (the whole of ``data``): a single pass over its
        top-level fields that looks inside a metric result only when its name id is a
        wanted one."""
        lookup = self.lookup
        if not lookup:
            raise Unsupported("a result before any string table")
        skip = self.skip
        text = self.text
        end = len(data)
        pos = 0
        skipped = -1  # where the last run of skipped metric results ended
        kernel = mangled = None
        values: dict = {}
        instances: dict = {}
        seen: dict = {}
        rule_spans = []
        nvtx_span = None
        while pos < end:
            tag = data[pos]
            if tag == 0x6A:  # field 13 (a metric result), wire type 2: most fields
                if skip is not None and pos != skipped and data[pos + 1] < 0x80:
                    stop = skip(data, pos, end).end()  # (a run has one-byte lengths)
                    if stop > pos:
                        pos = skipped = stop
                        continue
                length = data[pos + 1]
                if length < 0x80:
                    start = pos + 2
                elif data[pos + 2] < 0x80:  # two-byte length, inline
                    length = (length & 0x7F) | (data[pos + 2] << 7)
                    start = pos + 3
                else:
                    length, start = _varint(data, pos + 1)
                pos = start + length
                if length > 2 and data[start] == 0x08:  # field 1 (name id) first
                    ident = data[start + 1]
                    after = start + 2  # where the id ends
                    if ident >= 0x80:
                        if data[start + 2] < 0x80:  # two bytes, inline
                            ident = (ident & 0x7F) | (data[start + 2] << 7)
                            after = start + 3
                        else:
                            ident, after = _varint(data, start + 1)
                else:
                    ident = self._metric_id(data, start, pos)
                    after = pos  # (no inline layout below: it takes the general path)
                if ident >= len(lookup):
                    raise Unsupported(f"metric name id {ident} outside the string table")
                name = lookup[ident]
                if name is not None:
                    if pos > end:
                        raise Unsupported("a metric result runs past its result")
                    if name in seen:
                        # twice, byte for byte the same (a section and a rule's own copy,
                        # seen with PyTorch's kernels): the same value; else uncertain
                        if seen[name] != data[start:pos]:
                            raise Unsupported(f"metric {name} recorded twice")
                        continue
                    seen[name] = data[start:pos]
                    if name in self.by_instance:
                        instances[name] = _instances(name, data, start, pos)
                    if _plain_double(data, after, pos) and name not in text:
                        values[name] = _DOUBLE(data, after + 3)[0]  # (most wanted metrics)
                        continue
                    value = self._metric_value(name, data, start, pos)
                    if value is not None:
                        values[name] = value
                continue
            pos += 1
            if tag >= 0x80:
                tag, pos = _varint(data, pos - 1)
            wire = tag & 7
            if wire == 2:
                length = data[pos]
                if length < 0x80:  # a one-byte length: most fields
                    pos += 1
                else:
                    length, pos = _varint(data, pos)
                start = pos
                pos += length
                if pos > end:
                    raise Unsupported("a field runs past its result")
                number = tag >> 3
                if number == 13:
                    raise Unsupported("a metric result with a long tag")  # not canonical
                elif number == 19:
                    rule_spans.append((start, pos))
                elif number == 21:
                    nvtx_span = (start, pos)
                elif number == 6:
                    if kernel is not None:
                        raise Unsupported("two kernel names")
                    kernel = _text(data, start, pos)
                elif number == 5:
                    mangled = _text(data, start, pos)
            elif wire == 0:
                while data[pos] >= 0x80:
                    pos += 1
                pos += 1
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                raise Unsupported(f"wire type {wire} in a result")
        if pos != end:
            raise Unsupported("a result runs past its end")
        if not kernel:
            raise Unsupported("a result without a kernel function name")
        rules = []
        for start, stop in rule_spans:
            rules += _rule_results(data[start:stop])
        nvtx = _nvtx_state(data, *nvtx_span) if nvtx_span else ()
        return FastResult(kernel, values, rules, self.wanted, nvtx, instances, mangled or None)

    def _metric_id(self, data: bytes, start: int, end: int) -> int:
        ident = None
        for number, wire, s, _e in _fields(data, start, end):
            if number == 1:
                if wire != 0 or ident is not None:
                    raise Unsupported("a metric result with an odd name id")
                ident = _varint(data, s)[0]
        if ident is None:
            raise Unsupported("a metric result without a name id")
        return ident

    def _metric_value(self, name: str, data: bytes, start: int, end: int):
        """The value of a wanted metric (float or str), None without one."""
        if data[start] == 0x08 and name not in self.text:
            # The common layouts, read strictly: name id, then a value message holding
            # one number (0x12 LEN, then a double 0x19, a float 0x15, a uint32 0x20 or a
            # uint64 0x28 filling it exactly), then only instance values (0x1a) and
            # field 4 (0x20). Anything else takes the general path below.
            pos = start + 1
            while data[pos] >= 0x80:
                pos += 1
            pos += 1
            value = None
            if pos + 2 < end and data[pos] == 0x12 and data[pos + 1] < 0x80:
                inner, stop = pos + 2, pos + 2 + data[pos + 1]
                kind = data[inner]
                if kind == 0x19 and stop == inner + 9:
                    value = _DOUBLE(data, inner + 1)[0]
                elif kind == 0x15 and stop == inner + 5:
                    value = _FLOAT(data, inner + 1)[0]
                elif kind in (0x20, 0x28) and stop <= end:
                    number, after = _varint(data, inner + 1)
                    if after == stop and not number >> (32 if kind == 0x20 else 64):
                        value = float(number)
                pos = stop
            if value is not None:
                while pos < end:
                    tag = data[pos]
                    if tag == 0x1A:
                        length = data[pos + 1]
                        if length < 0x80:  # a one-byte length: most instance values
                            if end - pos >= _INSTANCE_RUN_MIN:
                                stop = _skip_instances(data, pos, end)
                                if stop > pos:
                                    pos = stop
                                    continue
                            pos += 2 + length
                        else:
                            length, pos = _varint(data, pos + 1)
                            pos += length
                    elif tag == 0x20:
                        pos += 1
                        while data[pos] >= 0x80:
                            pos += 1
                        pos += 1
                    else:
                        break
                if pos == end:
                    return value
        ident = value = None
        instances = False
        for number, wire, s, e in _fields(data, start, end):
            if number == 1 and wire == 0 and ident is None:
                ident = True
            elif number == 2 and wire == 2 and value is None:
                value = (s, e)
            elif number == 3 and wire == 2:
                instances = True
            elif number == 4 and wire == 0:
                pass
            else:
                raise Unsupported(f"metric {name}: field {number} (wire type {wire})")
        if value is None:
            if instances:
                raise Unsupported(f"metric {name}: instance values without a value")
            return None
        fields = _fields(data, *value)
        if len(fields) != 1:
            raise Unsupported(f"metric {name}: a value with {len(fields)} fields")
        ((kind, wire, s, e),) = fields
        if kind == 1 and wire == 2:
            if name not in self.text:
                raise Unsupported(f"metric {name}: a string value")
            return _text(data, s, e)
        if name in self.text:
            raise Unsupported(f"metric {name}: a number, asked for as text")
        if kind == 3 and wire == 1:
            return _DOUBLE(data, s)[0]
        if kind == 2 and wire == 5:
            return _FLOAT(data, s)[0]
        if kind in (4, 5) and wire == 0:
            number = _varint(data, s)[0]
            if number >> (32 if kind == 4 else 64):
                raise Unsupported(f"metric {name}: integer out of range")
            return float(number)
        raise Unsupported(f"metric {name}: value kind {kind} (wire type {wire})")


def _number(data: bytes, start: int, end: int, name: str) -> float:
    """A value message holding one number (double, float, uint32 or uint64)."""
    fields = _fields(data, start, end)
    if len(fields) != 1:
        raise Unsupported(f"metric {name}: an instance value with {len(fields)} fields")
    ((kind, wire, s, _e),) = fields
    if kind == 3 and wire == 1:
        return _DOUBLE(data, s)[0]
    if kind == 2 and wire == 5:
        return _FLOAT(data, s)[0]
    if kind in (4, 5) and wire == 0:
        return float(_varint(data, s)[0])
    raise Unsupported(f"metric {name}: instance value kind {kind} (wire type {wire})")


def _instances(name: str, data: bytes, start: int, end: int) -> dict[str, float]:
    """The instance values of one metric result (field 3 each: ``{1 key {1 string}, 2
    value}``) as ``{key: value}``; Unsupported for any other layout.

    The layout ncu writes (one-byte lengths: ``1a L 0a K 0a S <key> 12 V <value>``, the
    name id, value and field 4 around them) is read inline, each length checked against
    the others; on anything else :func:`_instances_walked` decides (the same answer, and
    its refusals), field by field."""
    out: dict[str, float] = {}
    try:
        pos = start
        while pos < end:
            tag = data[pos]
            if tag == 0x1A:
                size, key_size, text_size = data[pos + 1], data[pos + 3], data[pos + 5]
                key = pos + 6
                value = key + text_size  # the value field's tag
                if (size >= 0x80 or data[pos + 2] != 0x0A or key_size != text_size + 2
                        or data[pos + 4] != 0x0A or text_size >= 0x80 or data[value] != 0x12):
                    break
                value_size = data[value + 1]
                stop = pos + 2 + size
                if value_size >= 0x80 or value + 2 + value_size != stop or stop > end:
                    break
                text = data[key:value].decode("utf-8")
                if text in out:
                    break
                if value_size == 9 and data[value + 2] == 0x19:
                    out[text] = _DOUBLE(data, value + 3)[0]
                else:
                    out[text] = _number(data, value + 2, stop, name)
                pos = stop
            elif tag in (0x08, 0x20):  # the name id, field 4: varints
                pos += 1
                while data[pos] >= 0x80:
                    pos += 1
                pos += 1
            elif tag == 0x12:  # the value
                length, pos = _varint(data, pos + 1)
                pos += length
            else:
                break
        if pos == end:
            return out
    except (IndexError, UnicodeDecodeError, Unsupported):
        pass  # decided field by field
    return _instances_walked(name, data, start, end)


def _instances_walked(name: str, data: bytes, start: int, end: int) -> dict[str, float]:
    """:func:`_instances` field by field, for any layout."""
    out: dict[str, float] = {}
    for number, wire, s, e in _fields(data, start, end):
        if number != 3:
            continue
        if wire != 2:
            raise Unsupported(f"metric {name}: instance field of wire type {wire}")
        key = value = None
        for inner, iwire, a, b in _fields(data, s, e):
            if inner == 1 and iwire == 2:
                parts = _fields(data, a, b)
                if len(parts) != 1 or parts[0][0] != 1 or parts[0][1] != 2:
                    raise Unsupported(f"metric {name}: an instance key that is not a string")
                key = _text(data, parts[0][2], parts[0][3])
            elif inner == 2 and iwire == 2:
                value = _number(data, a, b, name)
            else:
                raise Unsupported(f"metric {name}: instance field {inner}")
        if key is None or value is None or key in out:
            raise Unsupported(f"metric {name}: an instance without a key or value, or twice")
        out[key] = value
    return out


def _nvtx_state(data: bytes, start: int, end: int) -> "tuple | None":
    """The push/pop ranges of a serialised NVTX state: ``((domain, name, id), ...)``,
    each thread's stack from the bottom up; None where a field is not as expected."""
    try:
        domains: dict[int, str] = {}
        stacks = []
        for number, wire, s, e in _fields(data, start, end):
            if number == 1 and wire == 2:
                ident, name = 0, ""
                for num, w, s2, e2 in _fields(data, s, e):
                    if num == 1 and w == 0:
                        ident = _varint(data, s2)[0]
                    elif num == 2 and w == 2:
                        name = _text(data, s2, e2)
                domains[ident] = name
            elif number == 2 and wire == 2:
                for num, w, s2, e2 in _fields(data, s, e):
                    if num == 2 and w == 2:
                        stacks.append((s2, e2))
        ranges = []
        for s, e in stacks:
            domain = 0
            for num, w, s2, e2 in _fields(data, s, e):
                if num == 1 and w == 0:
                    domain = _varint(data, s2)[0]
                elif num == 3 and w == 2:
                    name, ident = "", None
                    for n3, w3, s3, e3 in _fields(data, s2, e2):
                        if n3 == 1 and w3 == 2:
                            name = _text(data, s3, e3)
                        elif n3 == 3 and w3 == 0:
                            ident = _varint(data, s3)[0]
                    ranges.append((domain, name, ident))
        return tuple((domains.get(d, ""), name, ident) for d, name, ident in ranges)
    except (Unsupported, IndexError, UnicodeDecodeError):
        return None


#: Decoded rule results by their bytes: a rule whose message holds no measured number
#: (and no speedup estimate) is byte for byte the same in every report that has it (in
#: the shipped reports, half the rule results repeat one seen before). Bounded in bytes;
#: cleared when full.
_RULES: dict[bytes, tuple[dict, ...]] = {}
_RULES_MAX_BYTES = 1 << 20
_rules_bytes = 0


def _rule_results(raw: bytes) -> tuple[dict, ...]:
    """The rule results ``read_rules`` makes of one serialised rule result, decoded once
    for the same bytes: the dicts are shared by every result that has them (read-only:
    ``read_rules`` copies them)."""
    global _rules_bytes
    rules = _RULES.get(raw)
    if rules is None:
        rules = _decode_rule(raw)
        if _rules_bytes + len(raw) > _RULES_MAX_BYTES:
            _RULES.clear()
            _rules_bytes = 0
        _RULES[raw] = rules
        _rules_bytes += len(raw)
    return rules


def _decode_rule(data: bytes) -> tuple[dict, ...]:
    """The rule results of one serialised rule result (the whole of ``data``): one per
    body item that holds a message with text."""
    start, end = 0, len(data)
    out = []
    ident = display = None
    items = []
    for number, wire, s, e in _fields(data, start, end):
        if wire != 2:
            raise Unsupported(f"rule result field {number} of wire type {wire}")
        if number == 1:
            ident = _text(data, s, e)
        elif number == 2:
            display = _text(data, s, e)
        elif number == 3:
            for num, w, s2, e2 in _fields(data, s, e):
                if num != 1 or w != 2:
                    raise Unsupported(f"rule body field {num}")
                items.append((s2, e2))
    if ident is None or display is None:
        raise Unsupported("a rule result without identifier or name")
    for s, e in items:
        message = speedup = None
        for num, w, s2, e2 in _fields(data, s, e):
            if num == 1:
                if w != 2 or message is not None:
                    raise Unsupported("odd rule message")
                message = (s2, e2)
            elif num == 10:
                if w != 2 or speedup is not None:
                    raise Unsupported("odd speedup estimation")
                speedup = (s2, e2)
        if message is None:
            continue  # has_rule_message() is False
        text = title = kind = None
        for num, w, s2, e2 in _fields(data, *message):
            if num == 1 and w == 2:
                text = _text(data, s2, e2)
            elif num == 2 and w == 0:
                kind = _varint(data, s2)[0]
            elif num == 4 and w == 2:
                title = _text(data, s2, e2)
            elif num == 3 and w == 0:
                pass
            else:
                raise Unsupported(f"rule message field {num} (wire type {w})")
        if text is None or kind not in _RULE_TYPES:
            raise Unsupported(f"rule message without text or of type {kind}")
        estimate = math.nan
        if speedup is not None:
            found = [(num, w, s2) for num, w, s2, _e in _fields(data, *speedup)
                     if num == 2]
            if len(found) != 1 or found[0][1] != 1:
                raise Unsupported("a speedup estimation without one double")
            estimate = _DOUBLE(data, found[0][2])[0]
        text = text.strip()
        if not text:
            continue
        out.append({
            "id": ident,
            "title": title or display,
            "type": _RULE_TYPES[kind],
            "message": text,
            "speedup_pct": estimate,
        })
    return tuple(out)
