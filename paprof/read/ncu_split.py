"""Split one ``.ncu-rep`` into several, each holding some of its kernel results.

``paprof run`` profiles several variants of one shape in one ncu session (one report) and
stores one report a run: ``split_report`` writes the part of each. The framing is the one
``paprof.read.ncu_fastread`` decodes (its docstring). A part is the file header, then
every block of the original in order: its header with only the two counts a block must
carry rewritten (field 2, the number of results; field 5, the payload's size) and its
payload with the sources kept and only the part's results. Everything else is copied
byte for byte: the session data, the process, the cumulative string tables (a dropped
result's block keeps its table: the names of later results index it) and every source
(a result's SASS and source lines come from a source block, which may sit before an
earlier result of another part). Checked against ``ncu_report`` on every shipped report
of several results (``tests/test_ncu_split.py``).

``group_by_range`` says which results belong to which part: by the NVTX push range each
result sat in (the launcher pushes the variant's range around its profiled launches).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from paprof.read import ncu_fastread as fast
from paprof.read.ncu_fastread import Corrupt, Unsupported

_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class Block:
    """One block: its serialised header and payload messages (each with its u32 prefix)."""

    header: bytes
    sources: tuple[bytes, ...]
    results: tuple[bytes, ...]


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_blocks(data: bytes) -> tuple[bytes, list[Block]]:
    """The file's prefix (signature and file header) and its blocks; ``Unsupported`` for
    a file the fast reader would not read (its version, range results, a field not known)."""
    if data[:4] != fast.MAGIC:
        raise Unsupported("no NVR signature")
    header_len = _U32.unpack_from(data, 4)[0]
    pos = 8 + header_len
    if pos > len(data):
        raise Corrupt("file header cut off")
    version = fast.varint_fields(data[8:pos]).get(1)
    if version not in fast.FILE_VERSIONS:
        raise Unsupported(f"file version {version}")
    blocks = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise Corrupt("block header cut off")
        block_len = _U32.unpack_from(data, pos)[0]
        head_end = pos + 4 + block_len
        if head_end > len(data):
            raise Corrupt("block header cut off")
        header = data[pos + 4:head_end]
        counts, _table = fast.block_header(header)
        if counts[fast.BLOCK_RANGES]:
            raise Unsupported("range results")
        end = head_end + counts[fast.BLOCK_PAYLOAD]
        if end > len(data):
            raise Corrupt("payload cut off")
        messages = []
        at = head_end
        for _ in range(counts[fast.BLOCK_SOURCES] + counts[fast.BLOCK_RESULTS]):
            if at + 4 > end:
                raise Corrupt("fewer payload messages than its block header counts")
            stop = at + 4 + _U32.unpack_from(data, at)[0]
            if stop > end:
                raise Corrupt("a payload message runs past its block")
            messages.append(data[at:stop])
            at = stop
        if at != end:
            raise Corrupt("payload bytes left over after the counted messages")
        sources = counts[fast.BLOCK_SOURCES]
        blocks.append(Block(header, tuple(messages[:sources]), tuple(messages[sources:])))
        pos = end
    return data[:8 + header_len], blocks


def _with_counts(header: bytes, results: int, payload: int) -> bytes:
    """``header`` with its result count and payload size set, every other field's bytes
    as they were (in their order)."""
    out = bytearray()
    pos, end = 0, len(header)
    seen = set()
    while pos < end:
        start = pos
        tag, pos = fast.varint(header, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _value, pos = fast.varint(header, pos)
            if number in (fast.BLOCK_RESULTS, fast.BLOCK_PAYLOAD):
                seen.add(number)
                value = results if number == fast.BLOCK_RESULTS else payload
                out += header[start:start + len(_varint_bytes(tag))] + _varint_bytes(value)
                continue
        else:
            pos = fast.skip_field(header, pos, wire)
        out += header[start:pos]
    # a count the original left out (proto2: absent is 0) is written when it is not 0
    for number, value in ((fast.BLOCK_RESULTS, results), (fast.BLOCK_PAYLOAD, payload)):
        if number not in seen and value:
            out += _varint_bytes(number << 3) + _varint_bytes(value)
    return bytes(out)


def count_results(path: Path | str) -> int:
    """The number of kernel results a report holds (its block headers' counts)."""
    _prefix, blocks = read_blocks(Path(path).read_bytes())
    return sum(len(b.results) for b in blocks)


def split_report(source: Path | str, parts: Mapping[Path | str, Iterable[int]]) -> dict[Path, int]:
    """Write, for each ``{output: result indices}`` of ``parts``, a report holding those
    results of ``source`` (indices in file order, from 0; each part's results keep the
    file's order) and everything else of it; ``{output: results written}``.

    Raises ``Unsupported`` (or ``Corrupt``) for a file outside the framing the fast reader
    knows, ``ValueError`` for an index the report does not have. Each output is written
    whole or not at all (a temporary name, then a rename)."""
    prefix, blocks = read_blocks(Path(source).read_bytes())
    total = sum(len(b.results) for b in blocks)
    wanted = {Path(out): frozenset(indices) for out, indices in parts.items()}
    for out, indices in wanted.items():
        bad = [i for i in indices if not 0 <= i < total]
        if bad:
            raise ValueError(f"{out.name}: result {bad[0]} of a report of {total}")
    written: dict[Path, int] = {}
    for out, indices in wanted.items():
        chunks = [prefix]
        index = 0
        for block in blocks:
            kept = [r for i, r in enumerate(block.results, index) if i in indices]
            index += len(block.results)
            payload = b"".join(block.sources) + b"".join(kept)
            header = (block.header if len(kept) == len(block.results)
                      else _with_counts(block.header, len(kept), len(payload)))
            chunks += [_U32.pack(len(header)), header, payload]
        _write(out, b"".join(chunks))
        written[out] = len(indices)
    return written


def _write(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def result_ranges(path: Path | str) -> list[tuple[str, ...]]:
    """Each result's NVTX push ranges (names, outermost first), in file order; ``()``
    for a result without ranges. ``Unsupported`` where a state cannot be decoded."""
    out = []
    for result in fast.read_report(path, ()):
        if result.nvtx is None:
            raise Unsupported(f"a result ({result.kernel}) whose NVTX state is not decoded")
        out.append(tuple(name for _domain, name, _ident in result.nvtx))
    return out


def group_by_range(path: Path | str, ranges: Sequence[str]) -> dict[str, list[int]]:
    """``{range: indices of the results pushed inside it}`` for each of ``ranges`` (an
    NVTX range name, ``domain@name`` not supported); a result inside none of them, or
    inside two, raises ``Unsupported``: the report is not one the parts can be told in."""
    groups: dict[str, list[int]] = {name: [] for name in ranges}
    for index, pushed in enumerate(result_ranges(path)):
        hits = [name for name in groups if name in pushed]
        if len(hits) != 1:
            raise Unsupported(f"result {index} sits in {len(hits)} of the ranges asked for")
        groups[hits[0]].append(index)
    return groups
