"""Join single-run reports into one, as one ncu session profiling them in turn writes it.

For the fake ncu (``FAKE_NCU_REPORTS``) and the splitter's tests: the first report whole,
then each later one's source and result blocks (its session blocks left out: a session
writes those once), each block's string table left out where the names it adds are the
ones the joined file already holds (the same ncu version and sections: the metric name ids
of its results then index the joined file's table as they indexed their own). Reports whose
tables differ cannot be joined this way (ValueError).
"""

from __future__ import annotations

import struct
from pathlib import Path

from paprof.read import ncu_fastread as fast
from paprof.read.ncu_split import read_blocks

_U32 = struct.Struct("<I")


def _without_table(header: bytes) -> bytes:
    out, pos = bytearray(), 0
    while pos < len(header):
        start = pos
        tag, pos = fast.varint(header, pos)
        number, wire = tag >> 3, tag & 7
        pos = fast.varint(header, pos)[1] if wire == 0 else fast.skip_field(header, pos, wire)
        if number == 4:  # the string table: kept, empty
            out += b"\x22\x00"
        else:
            out += header[start:pos]
    return bytes(out)


def _table(header: bytes) -> bytes:
    return fast.block_header(header)[1] or b""


def join(reports) -> bytes:
    """The bytes of one report holding every result of ``reports``, in order."""
    prefix, first = read_blocks(Path(reports[0]).read_bytes())
    chunks = [prefix]
    names = b""
    for block in first:
        names += _table(block.header)
        chunks += [_U32.pack(len(block.header)), block.header, *block.sources, *block.results]
    for report in reports[1:]:
        _prefix, blocks = read_blocks(Path(report).read_bytes())
        own = b""
        for block in blocks:
            own += _table(block.header)
            if not names.startswith(own):
                raise ValueError(f"{report}: its metric names differ from the first report's")
            if not (block.sources or block.results):
                continue
            header = _without_table(block.header)
            chunks += [_U32.pack(len(header)), header, *block.sources, *block.results]
    return b"".join(chunks)
