"""The fast ``.ncu-rep`` reader against ``ncu_report``, the ground truth.

Every recorded report (tests/data), every catalogue metric: the fast reader's value is exactly what
``ncu_report`` gives through ``ncu_reader.read_metric`` (same type, NaN for NaN), the
kernel names, the result counts and the rule results are equal. Reports crafted from a
shipped one (value kinds the shipped reports do not use, a second string table, rule
message types, mangled names) check the format knowledge the reader relies on; corrupt
or unfamiliar bytes make the loader fall back to ``ncu_report`` with the same table.
"""

from __future__ import annotations

import logging
import math
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paprof.model import load
from paprof.read import ncu_fastread, ncu_reader
from paprof.errors import UserError
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = recorded("h200")
REPORTS = sorted(EXAMPLES.rglob("*.ncu-rep"))
#: The other recorded reports (the source preset, the fp16 sweep, flash_fwd); then, in the
#: slow lane, every real report shipped anywhere in examples/ (the custom families' runs,
#: the sweeps', the peers' too).
OTHER_REPORTS = [
    *(pytest.param(p, id=f"tests/data:{name}/{p.relative_to(recorded(name))}")
      for name in ("h200-source", "sweeps/h200-profile", "h200-flash_fwd")
      for p in sorted(recorded(name).rglob("*.ncu-rep"))),
    *(pytest.param(p, marks=pytest.mark.slow, id=str(p.relative_to(ROOT)))
      for p in sorted((ROOT / "examples").rglob("*.ncu-rep"))),
]
NUMERIC, TEXT = ncu_reader.catalogue_metrics()
NAMES = NUMERIC + TEXT


@pytest.fixture(scope="module")
def ncu_report():
    try:
        return ncu_reader.import_ncu_report()
    except Exception as err:  # UserError without the module
        pytest.skip(f"ncu_report is not available: {err}")


def report(variant: str, name: str = "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep") -> Path:
    (path,) = [p for p in REPORTS if p.parent.name == variant and p.name == name]
    return path


def truth(ncu_report, path: Path) -> list:
    """ncu_report's actions of ``path``, in range order."""
    context = ncu_report.load_report(str(path))
    actions = []
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        actions += [rng.action_by_idx(a) for a in range(rng.num_actions())]
    return actions


def same(a, b) -> bool:
    """Equal values of the same type, NaN equal to NaN, lists and dicts compared deeply."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def assert_matches(ncu_report, path: Path, fast=None) -> list:
    """The fast reader agrees with ncu_report on every result of ``path``."""
    fast = ncu_fastread.read_report(path, NUMERIC, TEXT) if fast is None else fast
    actions = truth(ncu_report, path)
    assert len(fast) == len(actions)
    for index, (mine, action) in enumerate(zip(fast, actions)):
        assert mine.name() == action.name(), index
        for name in NAMES:
            text = name in TEXT
            expected = ncu_reader.read_metric(action, name, text)
            got = ncu_reader.read_metric(mine, name, text)
            assert same(got, expected), (path.name, index, name, got, expected)
        assert same(ncu_reader.read_rules(mine), ncu_reader.read_rules(action)), index
    return fast


# -- the shipped reports -----------------------------------------------------------------


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_catalogue_metric_of_every_shipped_report(ncu_report, path):
    fast = assert_matches(ncu_report, path)
    assert len(fast) == ncu_reader.check_framing(path)
    assert any(r.values for r in fast)


@pytest.mark.parametrize("path", OTHER_REPORTS)
def test_every_other_real_report_reads_as_ncu_report_reads_it(ncu_report, path, monkeypatch):
    # The reports of the custom families and of the sweeps, read a message at a time: the
    # same values, names and rules as ncu_report, or (a report it cannot be sure of) the
    # loader's table through ncu_report.
    try:
        fast = ncu_fastread.read_report(path, NUMERIC, TEXT)
    except ncu_fastread.Unsupported:
        table = load.load_reports([path])
        monkeypatch.setattr(ncu_reader, "FAST_READER", False)
        assert_same_frames(table, load.load_reports([path]))
        return
    assert_matches(ncu_report, path, fast)
    assert len(fast) == ncu_reader.check_framing(path)


def test_the_catalogue_metrics_with_instance_values_read_their_aggregate(ncu_report):
    # launch__* and sm__maximum_warps_per_active_cycle_pct carry one instance value each
    # in these reports; as_double() is the aggregate (the value beside the instances).
    action = truth(ncu_report, report("v3"))[0]
    (fast,) = ncu_fastread.read_report(report("v3"), NUMERIC, TEXT)
    instanced = [n for n in NAMES if action.metric_by_name(n) is not None
                 and action.metric_by_name(n).num_instances() > 0]
    assert "launch__grid_size" in instanced
    for name in instanced:
        assert fast.values[name] == action.metric_by_name(name).as_double()


def test_the_loader_uses_the_fast_reader_and_gives_the_ncu_report_table(monkeypatch):
    context, actions = ncu_reader.open_report(report("v4"))
    assert context is None
    assert [a.name() for a in actions] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    fast = load.load_reports(REPORTS)
    monkeypatch.setattr(ncu_reader, "FAST_READER", False)
    slow = load.load_reports(REPORTS)
    assert_same_frames(fast, slow)


def assert_same_frames(a, b) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    assert a.attrs == b.attrs
    for column in a.columns:
        for i, (x, y) in enumerate(zip(a[column], b[column])):
            assert same(x, y), (column, i, x, y)


def test_a_metric_not_decoded_is_an_error_not_a_nan():
    (fast,) = ncu_fastread.read_report(report("v3"), ["gpu__time_duration.sum"])
    assert ncu_reader.read_metric(fast, "gpu__time_duration.sum") > 0
    with pytest.raises(KeyError, match="not decoded"):
        ncu_reader.read_metric(fast, "launch__grid_size")


# -- many results in one report ----------------------------------------------------------


@pytest.mark.slow
def test_a_thousand_results_decode_to_a_thousand_identical_rows(ncu_report, tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_load import repeat_results
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    big = tmp_path / "many.ncu-rep"
    assert repeat_results(report("v3"), big, 1000) == 1000
    fast = ncu_fastread.read_report(big, NUMERIC, TEXT)
    assert len(fast) == 1000
    (first,) = assert_matches(ncu_report, report("v3"))
    for result in fast:
        assert result.name() == first.name()
        assert same(result.values, first.values)
        assert same(result.rules, first.rules)
    actions = truth(ncu_report, big)
    assert len(actions) == 1000
    for index in (0, 999):  # ncu_report on the big file itself, first and last
        for name in NAMES:
            assert same(ncu_reader.read_metric(fast[index], name, name in TEXT),
                        ncu_reader.read_metric(actions[index], name, name in TEXT))
    df = load.load_reports([big])
    assert len(df) == 1000
    assert list(df["result_index"]) == list(range(1000))
    assert list(df["launch"]) == list(range(1000))
    rest = df.drop(columns=["result_index", "launch"])
    for column in rest.columns:
        values = list(rest[column])
        assert all(same(v, values[0]) for v in values), column


# -- a message at a time ------------------------------------------------------------------


class _Reads:
    """``open`` for ncu_fastread that records the size of every read."""

    def __init__(self):
        self.sizes: list[int] = []

    def __call__(self, path, mode="r", *args, **kwargs):
        handle = open(path, mode, *args, **kwargs)
        real, sizes = handle.read, self.sizes

        def read(size=-1):
            data = real(size)
            sizes.append(len(data))
            return data

        handle.read = read
        return handle


def test_the_reader_holds_one_message_at_a_time_and_skips_the_sources(
        ncu_report, monkeypatch):
    path = report("v5")  # the largest shipped one-kernel report: a source, one result
    crafted = Crafted(path)
    sources = [m for h, ms in crafted.blocks for m in ms[: dict((n, v) for n, _w, v in h).get(1, 0)]]
    results = [m for h, ms in crafted.blocks for m in ms[dict((n, v) for n, _w, v in h).get(1, 0):]]
    assert sources and len(results) == 1
    reads = _Reads()
    monkeypatch.setattr(ncu_fastread, "open", reads, raising=False)
    fast = ncu_fastread.read_report(path, NUMERIC, TEXT)
    assert max(reads.sizes) == len(results[0])  # never the file: its biggest message
    assert sum(reads.sizes) == path.stat().st_size - sum(len(m) for m in sources)
    monkeypatch.undo()
    assert_matches(ncu_report, path, fast)


def test_a_report_of_many_results_is_read_in_memory_of_one(tmp_path):
    # 300 copies of v3's result block, the later ones with an empty string table (their
    # ids index the first one's, as ncu writes a report of many kernels). The whole file
    # was once read into memory (a 4.7 GB report peaked at 5.1 GB); now the reader holds
    # the results it returns and one message at a time.
    import tracemalloc

    crafted = Crafted(report("v3"))
    k = crafted.result_blocks()[0]
    header, messages = crafted.blocks[k]
    later = [(n, w, b"" if n == 4 else v) for n, w, v in header]
    crafted.blocks[k + 1: k + 1] = [[later, messages] for _ in range(299)]
    big = crafted.write(tmp_path / "many.ncu-rep")
    (one,) = ncu_fastread.read_report(report("v3"), NUMERIC, TEXT)
    message = max(len(m) for m in messages)
    tracemalloc.start()
    try:
        fast = ncu_fastread.read_report(big, NUMERIC, TEXT)
        held, peak = tracemalloc.get_traced_memory()  # held: the 300 results returned
    finally:
        tracemalloc.stop()
    assert len(fast) == 300 and all(same(r.values, one.values) for r in fast)
    size = big.stat().st_size
    assert size > 20e6 and held < size / 5
    assert peak - held < 4 * message, (peak, held, message, size)


# -- crafted reports: the format knowledge, checked against ncu_report -------------------


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def decode(buf: bytes) -> list[tuple[int, int, object]]:
    """A message's fields: (number, wire type, int for varints else the raw bytes)."""
    fields, pos = [], 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            value, pos = buf[pos: pos + length], pos + length
        else:
            size = {1: 8, 5: 4}[wire]
            value, pos = buf[pos: pos + size], pos + size
        fields.append((number, wire, value))
    return fields


def encode(fields) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += _varint_bytes(number << 3 | wire)
        if wire == 0:
            out += _varint_bytes(value)
        elif wire == 2:
            out += _varint_bytes(len(value)) + value
        else:
            out += value
    return bytes(out)


class Crafted:
    """A shipped report taken apart: ``blocks`` of [header fields, payload messages];
    ``write`` puts it back together with the lengths and payload sizes recomputed."""

    def __init__(self, source: Path):
        data = source.read_bytes()
        header_len = struct.unpack_from("<I", data, 4)[0]
        self.head = data[: 8 + header_len]
        self.blocks = []
        pos = 8 + header_len
        while pos < len(data):
            length = struct.unpack_from("<I", data, pos)[0]
            header = decode(data[pos + 4: pos + 4 + length])
            size = dict((n, v) for n, _w, v in header).get(5, 0)
            payload, messages, p = data[pos + 4 + length: pos + 4 + length + size], [], 0
            while p < len(payload):
                n = struct.unpack_from("<I", payload, p)[0]
                messages.append(payload[p + 4: p + 4 + n])
                p += 4 + n
            self.blocks.append([header, messages])
            pos += 4 + length + size
        assert self.bytes() == data

    def result_blocks(self) -> list[int]:
        return [i for i, (h, _m) in enumerate(self.blocks) if dict(
            (n, v) for n, _w, v in h).get(2)]

    def names(self) -> list[str]:
        table = [v for n, _w, v in self.blocks[self.result_blocks()[0]][0] if n == 4][0]
        return [v.decode() for _n, _w, v in decode(table)]

    def edit_result(self, k: int, change) -> None:
        """Replace the fields of the k-th result with ``change(fields)``."""
        block = self.blocks[self.result_blocks()[k]]
        block[1][-1] = encode(change(decode(block[1][-1])))

    def bytes(self) -> bytes:
        out = [self.head]
        for header, messages in self.blocks:
            payload = b"".join(struct.pack("<I", len(m)) + m for m in messages)
            header = encode([(n, w, len(payload) if n == 5 else v) for n, w, v in header])
            out.append(struct.pack("<I", len(header)) + header + payload)
        return b"".join(out)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.bytes())
        return path


def set_value(names: list[str], fields, metric: str, value_fields, extra=()):
    """Result fields with ``metric``'s value message replaced (and ``extra`` fields added
    to its metric result)."""
    ident = names.index(metric)
    out = []
    for number, wire, value in fields:
        if number == 13:
            inner = decode(value)
            if inner[0] == (1, 0, ident):
                inner = [(n, w, encode(value_fields) if n == 2 else v) for n, w, v in inner]
                value = encode(inner + list(extra))
        out.append((number, wire, value))
    return out


def test_every_value_kind_reads_as_ncu_report_reads_it(ncu_report, tmp_path):
    crafted = Crafted(report("v3"))
    names = crafted.names()

    def change(fields):
        kinds = {
            "gpu__time_duration.sum": [(2, 5, struct.pack("<f", 1234.567))],  # float
            "gpc__cycles_elapsed.max": [(4, 0, 4_000_000_000)],  # uint32
            "launch__grid_size": [(5, 0, 2**64 - 1)],  # uint64, rounds in float
            "launch__block_size": [(5, 0, 2**53 + 1)],
            "device__attribute_display_name": [(1, 2, "NVIDIA H200 ü".encode())],
        }
        for metric, value in kinds.items():
            fields = set_value(names, fields, metric, value)
        # a metric result whose field 4 is not 0: the value is unchanged
        fields = set_value(names, fields, "dram__cycles_active.avg",
                           [(3, 1, struct.pack("<d", 2.5))], extra=[(4, 0, 7)])
        # fields in another order (the name id last), wanted and not wanted
        moved = {names.index("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
                 names.index("launch__grid_dim_x")}
        out = []
        for number, wire, value in fields:
            inner = decode(value) if number == 13 else None
            if inner and inner[0][:2] == (1, 0) and inner[0][2] in moved:
                value = encode(inner[1:] + inner[:1])
            out.append((number, wire, value))
        return out

    crafted.edit_result(0, change)
    path = crafted.write(tmp_path / "kinds.ncu-rep")
    (fast,) = assert_matches(ncu_report, path)
    assert fast.values["gpu__time_duration.sum"] == struct.unpack(
        "<f", struct.pack("<f", 1234.567))[0]
    assert fast.values["device__attribute_display_name"] == "NVIDIA H200 ü"


def test_string_tables_add_up_across_blocks(ncu_report, tmp_path):
    # v4's second result block has an empty table: its ids index the first block's. A
    # table in a later block is appended: id 799 is the first string of the second one.
    crafted = Crafted(report("v4"))
    names = crafted.names()
    second = crafted.blocks[crafted.result_blocks()[1]]
    second[0] = [(n, w, encode([(1, 2, b"zz__new_metric"), (1, 2, b"gpu__time_duration.sum")])
                  if n == 4 else v) for n, w, v in second[0]]
    old = names.index("gpu__time_duration.sum")

    def change(fields):
        out = []
        for number, wire, value in fields:
            if number == 13 and decode(value)[0] == (1, 0, old):  # now named by the new id
                value = encode([(1, 0, len(names) + 1)] + decode(value)[1:])
            out.append((number, wire, value))
        return out + [(13, 2, encode([(1, 0, len(names)),
                                      (2, 2, encode([(3, 1, struct.pack("<d", 42.0))])),
                                      (4, 0, 0)]))]

    crafted.edit_result(1, change)
    path = crafted.write(tmp_path / "tables.ncu-rep")
    fast = assert_matches(ncu_report, path)
    assert fast[1].values["gpu__time_duration.sum"] > 0
    (_, merge) = truth(ncu_report, path)
    assert merge.metric_by_name("zz__new_metric").as_double() == 42.0


def test_rule_message_types_titles_and_estimates(ncu_report, tmp_path):
    crafted = Crafted(report("v3"))

    def rule(ident, kinds, title=None, speedup=None, display=b"Display"):
        items = []
        for kind in kinds:
            message = [(1, 2, b"  message %d  " % kind), (2, 0, kind), (3, 0, 1)]
            message += [(4, 2, title)] if title is not None else []
            item = [(1, 2, encode(message))]
            if speedup is not None:
                item.append((10, 2, encode([(1, 0, 1), (2, 1, struct.pack("<d", speedup))])))
            items.append((1, 2, encode(item)))
        return (19, 2, encode([(1, 2, ident), (2, 2, display), (3, 2, encode(items)),
                               (4, 2, b"SpeedOfLight")]))

    def change(fields):
        fields = [f for f in fields if f[0] != 19]
        fields.append(rule(b"Types", [0, 1, 2, 3, 4]))
        fields.append(rule(b"Titled", [4], title=b"A title", speedup=12.5))
        fields.append(rule(b"EmptyTitle", [2], title=b""))
        empty = encode([(1, 2, encode([(1, 2, b"   "), (2, 0, 4)]))])  # blank: skipped
        only_estimate = encode([(10, 2, encode([(1, 0, 1), (2, 1, struct.pack("<d", 3.0))]))])
        fields.append((19, 2, encode([(1, 2, b"Blank"), (2, 2, b"x"),
                                      (3, 2, encode([(1, 2, empty), (1, 2, only_estimate)]))])))
        return fields

    crafted.edit_result(0, change)
    path = crafted.write(tmp_path / "rules.ncu-rep")
    (fast,) = assert_matches(ncu_report, path)
    assert [r["type"] for r in fast.rules[:5]] == [
        "NONE", "OK", "WARNING", "ERROR", "OPTIMIZATION"]
    assert fast.rules[5]["title"] == "A title" and fast.rules[5]["speedup_pct"] == 12.5
    assert fast.rules[6]["title"] == "Display"
    assert len(fast.rules) == 7


def test_the_kernel_name_is_the_function_name(ncu_report, tmp_path):
    crafted = Crafted(report("v3"))
    names = {5: b"_Z6kernelPfi", 6: b"kernel", 7: b"kernel(float*, int)"}
    crafted.edit_result(0, lambda fields: [(n, w, names.get(n, v)) for n, w, v in fields])
    (fast,) = assert_matches(ncu_report, crafted.write(tmp_path / "names.ncu-rep"))
    assert fast.name() == "kernel"


# -- whatever the fast reader cannot be sure of: ncu_report reads the file ----------------


def _group(fields):  # an unknown field of wire type 3/4 (a group): valid, but not ours
    return fields + [(40, 3, b""), (1, 0, 5), (40, 4, b"")]


def _two_kinds(names):
    return lambda fields: set_value(names, fields, "gpu__time_duration.sum",
                                    [(3, 1, struct.pack("<d", 1.5)), (5, 0, 7)])


def _unknown_metric_field(names):
    return lambda fields: set_value(names, fields, "gpu__time_duration.sum",
                                    [(3, 1, struct.pack("<d", 1.5))], extra=[(9, 0, 1)])


def _string_for_number(names):
    return lambda fields: set_value(names, fields, "gpu__time_duration.sum", [(1, 2, b"1.5")])


def _twice(names, same=False):
    # launch__grid_size recorded a second time: with another value (uncertain: which
    # one does ncu_report give?), or byte for byte the same (as PyTorch's kernels have
    # sass__inst_executed_register_spilling twice): then the value is certain.
    ident = names.index("launch__grid_size")

    def change(fields):
        mine = [f for f in fields if f[0] == 13 and decode(f[2])[0] == (1, 0, ident)]
        if same:
            return fields + mine
        other = [(n, w, v if n != 2 else encode([(5, 0, 77777)])) for n, w, v in decode(mine[0][2])]
        return fields + [(13, 2, encode(other))]
    return change


def _value_after_instances(names):
    # inst_executed's 280 instance values (skipped in one regex match), then a second
    # value: protobuf merges it (ncu_report reads 1.5), the first alone would be wrong.
    ident = names.index("inst_executed")

    def change(fields):
        out = []
        for number, wire, value in fields:
            if number == 13 and decode(value)[0] == (1, 0, ident):
                assert sum(f[0] == 3 for f in decode(value)) > 100
                value += encode([(2, 2, encode([(3, 1, struct.pack("<d", 1.5))]))])
            out.append((number, wire, value))
        return out

    return change


@pytest.mark.parametrize("corruption", [
    "unknown wire type", "two value kinds", "unknown metric field", "string for a number",
    "metric twice", "no name table", "garbage bytes", "result cut short",
    "value after instances"])
def test_what_the_fast_reader_cannot_be_sure_of_falls_back(
        ncu_report, tmp_path, monkeypatch, caplog, corruption):
    crafted = Crafted(report("v4"))
    names = crafted.names()
    first = crafted.blocks[crafted.result_blocks()[0]]
    if corruption == "unknown wire type":
        crafted.edit_result(0, _group)
    elif corruption == "two value kinds":
        crafted.edit_result(0, _two_kinds(names))
    elif corruption == "unknown metric field":
        crafted.edit_result(0, _unknown_metric_field(names))
    elif corruption == "string for a number":
        crafted.edit_result(0, _string_for_number(names))
    elif corruption == "metric twice":
        crafted.edit_result(1, _twice(names))
    elif corruption == "no name table":
        first[0] = [f for f in first[0] if f[0] != 4]
    elif corruption == "garbage bytes":
        message = bytearray(first[1][-1])
        message[100:110] = b"\xff" * 10
        first[1][-1] = bytes(message)
    elif corruption == "result cut short":
        first[1][-1] = first[1][-1][:-7]
    elif corruption == "value after instances":
        crafted.edit_result(0, _value_after_instances(names))
    path = crafted.write(tmp_path / "odd.ncu-rep")

    with pytest.raises(ncu_fastread.Unsupported):
        ncu_fastread.read_report(path, NUMERIC, TEXT)
    caplog.set_level(logging.DEBUG, logger=ncu_reader.__name__)
    try:
        fast = load.load_reports([path])
    except Exception as err:  # then the ncu_report path must fail the same way
        monkeypatch.setattr(ncu_reader, "FAST_READER", False)
        with pytest.raises(type(err)) as slow:
            load.load_reports([path])
        assert str(slow.value) == str(err)
    else:
        monkeypatch.setattr(ncu_reader, "FAST_READER", False)
        assert_same_frames(fast, load.load_reports([path]))
    assert f"{path}: read through ncu_report" in caplog.text


# -- the runs skipped in C: exactly the fields the reader would pass over -----------------


def _passed_over(buf: bytes, pos: int, lookup: list) -> int:
    """Where a run of metric results from ``pos`` ends that the reader's field-by-field
    walk reads only to pass over: field 13, a one-byte length of 3 or more that fits, the
    name id first as a canonical varint of one or two bytes, in the table, not wanted."""
    while pos + 1 < len(buf) and buf[pos] == 0x6A and 3 <= buf[pos + 1] < 0x80:
        start, stop = pos + 2, pos + 2 + buf[pos + 1]
        if stop > len(buf) or buf[start] != 0x08:
            break
        ident = buf[start + 1]
        if ident >= 0x80:
            if not 0 < buf[start + 2] < 0x80:
                break
            ident = (ident & 0x7F) | (buf[start + 2] << 7)
        if ident >= min(len(lookup), 1 << 14) or lookup[ident] is not None:
            break
        pos = stop
    return pos


def _instances_over(buf: bytes, pos: int) -> int:
    while pos + 1 < len(buf) and buf[pos] == 0x1A and buf[pos + 1] < 0x80:
        if pos + 2 + buf[pos + 1] > len(buf):
            break
        pos += 2 + buf[pos + 1]
    return pos


@st.composite
def _fields_of_a_result(draw):
    """(lookup, the bytes of some fields, where each field starts)."""
    size = draw(st.one_of(st.integers(1, 140), st.integers(1, 400)))
    wanted = draw(st.sets(st.integers(0, size - 1), max_size=size))
    lookup = [f"m{i}" if i in wanted else None for i in range(size)]
    parts = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["metric", "metric", "metric", "long id", "no id",
                                     "instance", "bytes"]))
        if kind == "bytes":
            parts.append(draw(st.binary(max_size=6)))
            continue
        ident = draw(st.one_of(st.integers(0, size + 20), st.sampled_from(sorted(wanted or {0}))))
        name = _varint_bytes(ident)
        if kind == "long id":
            name = bytes([*name[:-1], name[-1] | 0x80, 0])
        length = draw(st.one_of(st.integers(0, 140), st.sampled_from([0, 1, 2, 3, 4, 16, 127, 128])))
        content = (b"" if kind == "no id" else b"\x08" + name) + bytes(range(length % 97)) * 2
        content = content[:length].ljust(length, b"\x6a")
        parts.append(bytes([0x1A if kind == "instance" else 0x6A])
                     + _varint_bytes(len(content)) + content)
    buf = b"".join(parts)
    buf = buf[: draw(st.integers(0, len(buf)))]  # perhaps cut inside a field
    starts = [sum(map(len, parts[:i])) for i in range(len(parts))]
    return lookup, buf, [p for p in starts if p <= len(buf)]


@settings(max_examples=300, deadline=None)
@given(_fields_of_a_result())
def test_a_skipped_run_is_exactly_what_the_walk_passes_over(case):
    lookup, buf, starts = case
    pattern = ncu_fastread._unwanted_run(lookup)
    instances = buf.replace(b"\x6a", b"\x1a")  # the same framing as instance values
    for pos in starts:
        skipped = pattern.match(buf, pos, len(buf)).end() if pattern is not None else pos
        assert skipped == _passed_over(buf, pos, lookup), pos
        assert (ncu_fastread._skip_instances(instances, pos, len(instances))
                == _instances_over(instances, pos)), pos


# -- the shortcuts: the general path's answers, found sooner ------------------------------


@st.composite
def _after_a_name_id(draw):
    """What a metric result may hold after its name id: the commonest layout (a value
    message of one double, then perhaps field 4), that layout with one byte changed or
    cut, or any bytes."""
    common = (b"\x12\x09\x19" + draw(st.binary(min_size=8, max_size=8))
              + draw(st.sampled_from([b"", b"\x20\x05", b"\x20\x85\x01", b"\x1a\x00",
                                      b"\x20\x05\x20\x01", b"\x20\x05\x1a\x00"])))
    kind = draw(st.sampled_from(["common", "changed", "cut", "any"]))
    if kind == "changed":
        at = draw(st.integers(0, len(common) - 1))
        common = common[:at] + bytes([draw(st.integers(0, 255))]) + common[at + 1:]
    elif kind == "cut":
        common = common[:draw(st.integers(0, len(common)))]
    elif kind == "any":
        common = draw(st.binary(max_size=16))
    return common


def _inline_agrees(rest: bytes) -> bool:
    """Whether the inline double, when it takes ``rest`` (a metric result's bytes after
    name id 5), reads what ``_metric_value`` reads; and whether it took it."""
    data = b"\x08\x05" + rest
    if not ncu_fastread._plain_double(data, 2, len(data)):
        return False
    reader = ncu_fastread._Reader(None, frozenset({"m"}), frozenset())
    value = reader._metric_value("m", data, 0, len(data))
    assert type(value) is float and struct.pack("<d", value) == data[5:13], rest
    return True


@settings(max_examples=500, deadline=None)
@given(_after_a_name_id())
def test_the_inline_double_is_what_the_general_path_reads(rest):
    _inline_agrees(rest)


def test_the_inline_double_takes_the_commonest_layouts_and_no_byte_changed():
    double = b"\x12\x09\x19" + struct.pack("<d", 2.5)
    assert _inline_agrees(double) and _inline_agrees(double + b"\x20\x07")
    for rest in (double + b"\x20\x87\x01", double + b"\x1a\x00", double + b"\x20",
                 double[:-1], b"\x12\x05\x15" + struct.pack("<f", 2.5)):
        assert not _inline_agrees(rest), rest
    for layout in (double, double + b"\x20\x07"):  # every byte of them changed, or cut
        for at in range(len(layout)):
            for byte in range(256):
                _inline_agrees(layout[:at] + bytes([byte]) + layout[at + 1:])
            _inline_agrees(layout[:at])


def test_a_rule_result_is_decoded_once_for_its_bytes_and_read_as_copies():
    ncu_fastread._RULES.clear()
    (one,) = ncu_fastread.read_report(report("v3"), NUMERIC, TEXT)
    decoded = dict(ncu_fastread._RULES)
    assert decoded and sum(map(len, decoded.values())) == len(one.rules)
    for raw, rules in decoded.items():
        assert same(list(rules), list(ncu_fastread._decode_rule(raw)))
    (two,) = ncu_fastread.read_report(report("v3"), NUMERIC, TEXT)
    assert all(a is b for a, b in zip(one.rules, two.rules))  # decoded once
    mine = ncu_reader.read_rules(one)
    mine[0]["message"] = "changed"
    assert ncu_reader.read_rules(two)[0]["message"] != "changed"
    assert same(ncu_reader.read_rules(two), ncu_reader.read_rules(one))


def test_the_rule_cache_is_bounded_and_keeps_no_failure(tmp_path, monkeypatch):
    ncu_fastread._RULES.clear()
    monkeypatch.setattr(ncu_fastread, "_rules_bytes", 0)
    monkeypatch.setattr(ncu_fastread, "_RULES_MAX_BYTES", 2000)
    for variant in ("v3", "v4", "v5"):
        ncu_fastread.read_report(report(variant), NUMERIC, TEXT)
        assert sum(map(len, ncu_fastread._RULES)) == ncu_fastread._rules_bytes <= 2000
    # a rule message of a type the file format does not have: Unsupported, every time
    crafted = Crafted(report("v3"))
    bad = encode([(1, 2, encode([(1, 2, b"text"), (2, 0, 9)]))])
    crafted.edit_result(0, lambda fields: fields + [
        (19, 2, encode([(1, 2, b"Odd"), (2, 2, b"Odd"), (3, 2, encode([(1, 2, bad)]))]))])
    path = crafted.write(tmp_path / "odd-rule.ncu-rep")
    for _ in range(2):
        with pytest.raises(ncu_fastread.Unsupported, match="of type 9"):
            ncu_fastread.read_report(path, NUMERIC, TEXT)


def test_a_name_id_past_the_string_table_is_unsupported(tmp_path):
    # An id the table does not have, in a metric result the skipped runs would otherwise
    # pass over (16 bytes, the name id first): never skipped, always refused.
    crafted = Crafted(report("v4"))
    names = crafted.names()
    stray = encode([(1, 0, len(names) + 3), (2, 2, encode([(3, 1, struct.pack("<d", 1.0))]))])
    crafted.edit_result(0, lambda fields: fields[:40] + [(13, 2, stray)] + fields[40:])
    with pytest.raises(ncu_fastread.Unsupported, match="outside the string table"):
        ncu_fastread.read_report(crafted.write(tmp_path / "stray.ncu-rep"), NUMERIC, TEXT)


def test_name_ids_written_longer_than_needed_read_as_ncu_report_reads_them(
        ncu_report, tmp_path):
    # A varint may carry trailing zero groups (0x85 0x00 is 5): ncu_report reads them; the
    # reader's skipped runs take canonical ids only, so these are read one by one.
    crafted = Crafted(report("v4"))
    names = crafted.names()
    chosen = {names.index(n) for n in ("launch__grid_size", "launch__block_size",
                                       "gpu__time_duration.sum")}
    chosen |= {next(i for i, n in enumerate(names) if n not in NAMES)}  # and one not wanted

    def longer(ident: int) -> bytes:
        return bytes([*(_varint_bytes(ident)[:-1]), _varint_bytes(ident)[-1] | 0x80, 0])

    def change(fields):
        out = []
        for number, wire, value in fields:
            inner = decode(value) if number == 13 else None
            if inner and inner[0][:2] == (1, 0) and inner[0][2] in chosen:
                value = b"\x08" + longer(inner[0][2]) + encode(inner[1:])
            out.append((number, wire, value))
        return out

    crafted.edit_result(0, change)
    fast = assert_matches(ncu_report, crafted.write(tmp_path / "longer.ncu-rep"))
    assert fast[0].values["gpu__time_duration.sum"] > 0


def test_a_result_count_that_does_not_add_up_is_unsupported(tmp_path):
    # (ncu_report itself aborts the process on this file, so it is not asked here.)
    crafted = Crafted(report("v4"))
    first = crafted.blocks[crafted.result_blocks()[0]]
    first[0] = [(n, w, 2 if n == 2 else v) for n, w, v in first[0]]  # 2 counted, 1 there
    path = crafted.write(tmp_path / "count.ncu-rep")
    with pytest.raises(ncu_fastread.Corrupt, match="fewer payload messages"):
        ncu_fastread.read_report(path, NUMERIC, TEXT)
    with pytest.raises(UserError, match=r"count.ncu-rep: corrupt Nsight Compute report \(fewer payload"):
        load.load_reports([path])  # an error naming the file, not ncu_report's abort
    crafted = Crafted(report("v4"))
    second = crafted.blocks[crafted.result_blocks()[1]]
    second[1].append(second[1][-1])  # 2 there, 1 counted
    with pytest.raises(ncu_fastread.Unsupported, match="left over"):
        ncu_fastread.read_report(crafted.write(tmp_path / "count2.ncu-rep"), NUMERIC, TEXT)


def test_a_report_of_no_kernels_says_so_whatever_its_payloads_hold(tmp_path):
    # No result blocks, and a source block counting more sources than it holds: the
    # loader's answer is the report's (no kernels), as when the framing was checked first.
    crafted = Crafted(report("v3"))
    crafted.blocks = [b for i, b in enumerate(crafted.blocks) if i not in crafted.result_blocks()]
    source = next(b for b in crafted.blocks if dict((n, v) for n, _w, v in b[0]).get(1))
    source[0] = [(n, w, 2 if n == 1 else v) for n, w, v in source[0]]
    path = crafted.write(tmp_path / "none.ncu-rep")
    with pytest.raises(ncu_fastread.Corrupt):
        ncu_fastread.read_report(path, NUMERIC, TEXT)
    with pytest.raises(UserError, match="none.ncu-rep: the report holds no profiled kernels"):
        load.load_reports([path])


def test_unknown_file_versions_and_range_results_are_unsupported(tmp_path):
    data = report("v3").read_bytes()
    header_len = struct.unpack_from("<I", data, 4)[0]
    assert decode(data[8: 8 + header_len]) == [(1, 0, 7)]
    newer = data[:8] + encode([(1, 0, 8)]) + data[8 + header_len:]
    with pytest.raises(ncu_fastread.Unsupported, match="file version 8"):
        ncu_fastread.read_report(_write(tmp_path / "v8.ncu-rep", newer), NUMERIC, TEXT)
    crafted = Crafted(report("v3"))
    block = crafted.blocks[crafted.result_blocks()[0]]
    block[0] = block[0] + [(7, 0, 1)]
    with pytest.raises(ncu_fastread.Unsupported, match="range results"):
        ncu_fastread.read_report(crafted.write(tmp_path / "ranges.ncu-rep"), NUMERIC, TEXT)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_metric_recorded_twice_alike_reads_as_ncu_report_reads_it(ncu_report, tmp_path):
    crafted = Crafted(report("v4"))
    crafted.edit_result(1, _twice(crafted.names(), same=True))
    path = crafted.write(tmp_path / "twice.ncu-rep")
    fast = ncu_fastread.read_report(path, ["launch__grid_size"])
    slow = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(1)
    assert fast[1].values["launch__grid_size"] == slow.metric_by_name("launch__grid_size").as_double()


def test_nvtx_ranges_with_their_push_ids_and_names_as_ncu_report_gives_them(ncu_report):
    # The fast reader reads which push of a range each launch sat in (ncu_report gives
    # the names only): what tells a program's steps apart when each is one push of "step".
    # the whole-program report stays in examples/ (6 MB; 439 KB packed: too much for tests/data)
    path = Path(__file__).parent.parent / "examples/custom_family/runs/nvidia-h200/command/whole_program/command.ncu-rep"
    fast = ncu_fastread.read_report(path, ["gpu__time_duration.sum"])
    assert [r.nvtx for r in fast] == [(("<default domain>", "softmax_step", 623),),
                                      (("<default domain>", "softmax_step", 641),),
                                      (("<default domain>", "softmax_step", 659),)]
    context = ncu_report.load_report(str(path))
    for i, result in enumerate(fast):
        state = context.range_by_idx(0).action_by_idx(i).nvtx_state()
        names = [(state.domain_by_id(d).name(), name) for d in state.domains()
                 for name in state.domain_by_id(d).push_pop_ranges()]
        assert names == [(d, n) for d, n, _ident in result.nvtx]


@st.composite
def _instanced_metric(draw):
    """A metric result with instance values (name id, value, instances keyed by text,
    field 4) in the layout ncu writes, perhaps with one byte changed or cut."""
    def instance(key: bytes, value: bytes) -> bytes:
        inner = b"\x0a" + bytes([len(key) + 2]) + b"\x0a" + bytes([len(key)]) + key
        inner += b"\x12" + bytes([len(value)]) + value
        return b"\x1a" + bytes([len(inner)]) + inner
    values = st.one_of(st.binary(min_size=8, max_size=8).map(lambda b: b"\x19" + b),
                       st.integers(0, 2**40).map(lambda n: b"\x28" + _varint(n)))
    keys = st.lists(st.sampled_from([b"FFMA", b"LDG", b"IMAD.WIDE", b"BRA", b"\xff"]),
                    max_size=6)
    data = b"\x08\x85\x01\x12\x09\x19" + bytes(8)
    data += b"".join(instance(k, draw(values)) for k in draw(keys))
    data += draw(st.sampled_from([b"", b"\x20\x05"]))
    kind = draw(st.sampled_from(["ncu", "changed", "cut"]))
    if kind == "changed":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    elif kind == "cut":
        data = data[:draw(st.integers(0, len(data)))]
    return data


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _answer(read, data: bytes):
    try:
        return read("m", data, 0, len(data))
    except (ncu_fastread.Unsupported, IndexError, UnicodeDecodeError):
        return "refused"


@settings(max_examples=200, deadline=None)
@given(_instanced_metric())
def test_instance_values_read_inline_are_what_the_walk_reads(data):
    assert (_answer(ncu_fastread._instances, data)
            == _answer(ncu_fastread._instances_walked, data)), data


def test_instance_values_in_ncus_layout_are_read_inline(monkeypatch):
    data = (b"\x08\x05\x12\x09\x19" + bytes(8) + b"\x1a\x13\x0a\x06\x0a\x04FFMA\x12\x09\x19"
            + struct.pack("<d", 3.0) + b"\x1a\x0c\x0a\x05\x0a\x03BRA\x12\x03\x28\x85\x01\x20\x01")
    monkeypatch.setattr(ncu_fastread, "_instances_walked", None)  # not asked
    assert ncu_fastread._instances("m", data, 0, len(data)) == {"FFMA": 3.0, "BRA": 133.0}
