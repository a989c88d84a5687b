"""Read the values paprof needs straight from the bytes of an ``.ncu-rep`` file.

``ncu_report`` spends ~3 ms making each result object (``range.action_by_idx``) and
~2 ms more answering paprof's questions; this module decodes only what the loader needs
(the kernel name, the catalogue metrics, the rule messages) in well under 1 ms a result,
without Nsight Compute. It is a *fast path*: whenever the bytes hold anything it does
not decode with certainty, :func:`read_report` raises :class:`Unsupported` and the
caller (:mod:`paprof.analysis.ncu_reader`) reads the whole file through ``ncu_report``.

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
  a ProfileResult: 6 kernel function name (``IAction.name()``), 13 metric results,
  19 rule results; everything else is skipped.
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
import struct
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


class Unsupported(Exception):
    """The fast path cannot be sure of this file: read it through ``ncu_report``."""


class Corrupt(Unsupported):
    """The file contradicts itself (its block headers count more results than its
    payloads hold). ``ncu_report`` aborts the process on such a file, so the caller
    reports it instead of falling back."""


class FastResult:
    """One kernel result: what the loader reads from an ``ncu_report`` action.

    ``values`` maps each requested metric name the result records with a value to that
    value (``float`` for a numeric metric, ``str`` for a text one); a name that is absent
    or has no value (``has_value()`` False) is not in it. ``rules`` is exactly what
    :func:`paprof.analysis.ncu_reader.read_rules` returns for the action. ``asked`` is
    every name that was decoded, present or not.
    """

    __slots__ = ("kernel", "values", "rules", "asked")

    def __init__(self, kernel: str, values: dict, rules: list[dict], asked: frozenset):
        self.kernel = kernel
        self.values = values
        self.rules = rules
        self.asked = asked

    def name(self) -> str:
        """The kernel's function name, as ``IAction.name()`` gives it."""
        return self.kernel

    def __repr__(self) -> str:
        return f"FastResult({self.kernel!r}, {len(self.values)} metrics, {len(self.rules)} rules)"


def read_report(path: Path | str, numeric: Iterable[str], text: Iterable[str] = ()
                ) -> list[FastResult]:
    """Every kernel result of ``path`` in ``ncu_report``'s order, with the ``numeric``
    metrics (``as_double``) and ``text`` metrics (``as_string``) they record.

    Raises :class:`Unsupported` for anything not decoded with certainty: an unknown file
    version or wire type, a missing string table, a name id out of range, a value kind
    not matching the request, a message or count that does not add up. ``OSError``
    passes through.
    """
    numeric, text = frozenset(numeric), frozenset(text)
    if numeric & text:
        raise ValueError(f"metrics asked for both as numbers and as text: {sorted(numeric & text)}")
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return _Reader(data, numeric, text).results()
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


def _fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """Every field of the message in ``buf[pos:end]``: (number, wire, start, end), where
    start..end is the value (for wire 2: the bytes inside the length prefix; for wire 0
    start is the varint's position)."""
    out = []
    while pos < end:
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            length, pos = _varint(buf, pos)
            out.append((tag >> 3, 2, pos, pos + length))
            pos += length
        else:
            start = pos
            pos = _skip(buf, pos, wire)
            out.append((tag >> 3, wire, start, pos))
    if pos != end:
        raise Unsupported("a message runs past its end")
    return out


def _text(buf: bytes, start: int, end: int) -> str:
    return buf[start:end].decode("utf-8")


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


class _Reader:
    """One file's decoding state: the cumulative string table and the wanted name ids."""

    def __init__(self, data: bytes, numeric: frozenset, text: frozenset):
        self.data = data
        self.numeric = numeric
        self.text = text
        self.wanted = numeric | text
        self.names: list[str] = []        # the cumulative string table
        self.wanted_ids: dict[int, str] = {}
        self._tables: dict[bytes, tuple[list[str], list[tuple[int, str]]]] = {}

    # -- framing ------------------------------------------------------------------------

    def results(self) -> list[FastResult]:
        data = self.data
        if data[:4] != b"NVR\x00":
            raise Unsupported("no NVR signature")
        header_len = _U32(data, 4)[0]
        pos = 8 + header_len
        if pos > len(data):
            raise Unsupported("file header cut off")
        version = None
        for number, wire, start, _end in _fields(data, 8, pos):
            if number != 1 or wire != 0:
                raise Unsupported(f"unknown file header field {number}")
            version = _varint(data, start)[0]
        if version not in FILE_VERSIONS:
            raise Unsupported(f"file version {version}")

        results: list[FastResult] = []
        expected = 0
        while pos < len(data):
            block_len = _U32(data, pos)[0]
            head_end = pos + 4 + block_len
            if head_end > len(data):
                raise Unsupported("block header cut off")
            counts = {_B_SOURCES: 0, _B_RESULTS: 0, _B_PAYLOAD: 0, _B_RANGES: 0}
            table = None
            for number, wire, start, end in _fields(data, pos + 4, head_end):
                if number in counts:
                    if wire != 0:
                        raise Unsupported(f"block header field {number} of wire type {wire}")
                    counts[number] = _varint(data, start)[0]
                elif number == _B_STRINGS:
                    if wire != 2:
                        raise Unsupported("string table of the wrong wire type")
                    table = (start, end)
                elif number in (_B_SESSION, _B_PROCESS):
                    if wire != 2:
                        raise Unsupported(f"block header field {number} of wire type {wire}")
                else:
                    raise Unsupported(f"unknown block header field {number}")
            if counts[_B_RANGES]:
                raise Unsupported("range results")
            if table is not None:
                self._add_strings(*table)
            end = head_end + counts[_B_PAYLOAD]
            if end > len(data):
                raise Unsupported("payload cut off")
            expected += counts[_B_RESULTS]
            self._payload(head_end, end, counts[_B_SOURCES], counts[_B_RESULTS], results)
            pos = end
        if len(results) != expected:
            raise Unsupported(f"{len(results)} results decoded, block headers say {expected}")
        return results

    def _add_strings(self, start: int, end: int) -> None:
        raw = self.data[start:end]
        cached = self._tables.get(raw)
        if cached is None:
            strings = _string_table(raw)
            wanted = [(i, name) for i, name in enumerate(strings) if name in self.wanted]
            cached = self._tables[raw] = (strings, wanted)
        strings, wanted = cached
        base = len(self.names)
        self.names.extend(strings)
        for offset, name in wanted:
            self.wanted_ids[base + offset] = name

    def _payload(self, pos: int, end: int, sources: int, count: int,
                 out: list[FastResult]) -> None:
        data = self.data
        for i in range(sources + count):
            if pos + 4 > end:
                raise Corrupt("fewer payload messages than its block header counts")
            length = _U32(data, pos)[0]
            start, pos = pos + 4, pos + 4 + length
            if pos > end:
                raise Unsupported("a payload message runs past its block")
            if i >= sources:
                out.append(self._result(start, pos))
        if pos != end:
            raise Unsupported("payload bytes left over after the counted messages")

    # -- one result ---------------------------------------------------------------------

    def _result(self, pos: int, end: int) -> FastResult:
        """Decode one ProfileResult: a single pass over its top-level fields that looks
        inside a metric result only when its name id is a wanted one."""
        data = self.data
        wanted_ids = self.wanted_ids
        ntable = len(self.names)
        if not ntable:
            raise Unsupported("a result before any string table")
        kernel = None
        values: dict = {}
        seen: set = set()
        rule_spans = []
        while pos < end:
            tag = data[pos]
            pos += 1
            if tag == 0x6A:  # field 13 (a metric result), wire type 2: most fields
                length = data[pos]
                pos += 1
                if length >= 0x80:
                    if data[pos] < 0x80:  # two-byte length, inline
                        length = (length & 0x7F) | (data[pos] << 7)
                        pos += 1
                    else:
                        length, pos = _varint(data, pos - 1)
                start = pos
                pos += length
                if pos > end:
                    raise Unsupported("a metric result runs past its result")
                if length > 2 and data[start] == 0x08:  # field 1 (name id) first
                    ident = data[start + 1]
                    if ident >= 0x80:
                        if data[start + 2] < 0x80:  # two bytes, inline
                            ident = (ident & 0x7F) | (data[start + 2] << 7)
                        else:
                            ident = _varint(data, start + 1)[0]
                else:
                    ident = self._metric_id(start, pos)
                name = wanted_ids.get(ident)
                if name is not None:
                    if name in seen:
                        raise Unsupported(f"metric {name} recorded twice")
                    seen.add(name)
                    value = self._metric_value(name, start, pos)
                    if value is not None:
                        values[name] = value
                elif ident >= ntable:
                    raise Unsupported(f"metric name id {ident} outside the string table")
                continue
            if tag >= 0x80:
                tag, pos = _varint(data, pos - 1)
            wire = tag & 7
            if wire == 2:
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
                elif number == 6:
                    if kernel is not None:
                        raise Unsupported("two kernel names")
                    kernel = _text(data, start, pos)
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
            self._rule(start, stop, rules)
        return FastResult(kernel, values, rules, self.wanted)

    def _metric_id(self, start: int, end: int) -> int:
        ident = None
        for number, wire, s, _e in _fields(self.data, start, end):
            if number == 1:
                if wire != 0 or ident is not None:
                    raise Unsupported("a metric result with an odd name id")
                ident = _varint(self.data, s)[0]
        if ident is None:
            raise Unsupported("a metric result without a name id")
        return ident

    def _metric_value(self, name: str, start: int, end: int):
        """The value of a wanted metric (float or str), None without one."""
        data = self.data
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

    def _rule(self, start: int, end: int, out: list[dict]) -> None:
        """Append the rule results ``read_rules`` makes of one rule result: one per body
        item that holds a message with text."""
        data = self.data
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
