"""Issue 40, point 1: a run's parsed summary (``paprof.read.summary``) makes loading a
store open no report, and changes nothing: the table loaded through summaries is the
table loaded from the reports (every column, every row) on the shipped stores, and a
summary that is stale, of another format or catalogue, truncated, oversized or hostile
is passed over (the report read instead, never a traceback). The writers that store
runs write one; the commands that only read write none."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from paprof.model import load
from paprof.read import ncu_fastread, store, summary
from paprof.sweep.merge import merge_stores

from helpers import ROOT, recorded, shipped, unpacked

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links")


def _summarised(source: Path, where: Path) -> Path:
    """A copy of the store ``source`` with a summary beside each report (as the writers
    leave one)."""
    shutil.copytree(source, where)
    for report in store.report_paths(where):
        assert summary.write(report, where), report
    return where


def _from_reports(paths, monkeypatch, **kw) -> pd.DataFrame:
    with monkeypatch.context() as m:
        m.setattr(summary, "read", lambda report: None)
        return load.load_reports(paths, **kw)


def _from_summaries(paths, monkeypatch, **kw) -> pd.DataFrame:
    """``load_reports`` with every report's summary used: reading a report fails."""
    def refuse(report, *a, **k):
        raise AssertionError(f"{report} was read: its summary was not used")

    with monkeypatch.context() as m:
        m.setattr(load, "open_report", refuse)
        return load.load_reports(paths, **kw)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Every column and row equal, the objects (rules, evidence, records) by their repr:
    a NaN in a dict is equal only to itself for ``==``."""
    objects = [c for c in a.columns if a[c].dtype == object]
    pd.testing.assert_frame_equal(a.drop(columns=objects), b.drop(columns=objects),
                                  check_exact=True)
    for column in objects:
        assert list(map(repr, a[column])) == list(map(repr, b[column])), column
    assert a.attrs == b.attrs
    assert list(a.columns) == list(b.columns) and len(a) == len(b) > 0


def _merged(where: Path) -> Path:
    out = where / "merged"
    merge_stores([recorded("h200"), recorded("h200-flash_fwd")], out)
    return out


@pytest.mark.parametrize("name", ["h200", "h200-flash_fwd", "sweeps/h200-profile", "zoo"])
def test_summaries_load_the_same_table_as_the_reports(name, tmp_path, monkeypatch):
    source = (unpacked(ROOT / "examples" / "zoo" / "runs.tar.xz") / "runs" if name == "zoo"
              else recorded(name))
    runs = _summarised(source, tmp_path / "runs")
    _same(_from_summaries([runs], monkeypatch, jobs=1), _from_reports([runs], monkeypatch, jobs=1))


def test_a_merged_store_has_summaries_and_loads_the_same_in_workers(tmp_path, monkeypatch):
    out = _merged(tmp_path)
    reports = store.report_paths(out)
    assert reports and all(summary.path_of(r).is_file() for r in reports)  # merge wrote them
    monkeypatch.setattr(load, "PARALLEL_RUNS", 2)  # the pooled load, workers forked
    _same(_from_summaries([out], monkeypatch, jobs=2), _from_reports([out], monkeypatch, jobs=1))


def _copied(name: str, tmp_path) -> tuple[Path, Path]:
    runs = _summarised(recorded(name), tmp_path / "runs")
    copy = tmp_path / "copy"
    shutil.copytree(runs, copy, copy_function=shutil.copyfile)  # new mtimes, as git or cp make
    report = store.report_paths(copy)[0]
    made = json.loads(summary.path_of(report).read_text())["report"]
    assert made["mtime_ns"] != report.stat().st_mtime_ns
    return runs, copy


def test_a_copied_store_uses_its_summaries_by_their_hash(tmp_path, monkeypatch):
    runs, copy = _copied("sweeps/h200-profile", tmp_path)  # 170 KB a result
    _same(_from_summaries([copy], monkeypatch, jobs=1), _from_reports([runs], monkeypatch, jobs=1)
          .assign(report_path=lambda d: d.report_path.str.replace(str(runs), str(copy))))


def test_a_copied_report_cheaper_to_read_than_to_hash_is_read(tmp_path):
    _runs, copy = _copied("h200", tmp_path)  # 850 KB a result: source counters
    report = store.report_paths(copy)[0]
    assert report.stat().st_size > summary.HASH_BYTES and summary.read(report) is None


def _one(tmp_path) -> tuple[Path, Path]:
    runs = _summarised(shipped("v5").parent, tmp_path / "v5")
    report = store.report_paths(runs)[0]
    return report, summary.path_of(report)


def _rewrite(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _stamp(path: Path) -> dict:
    return json.loads(path.read_text())["report"]


def _hostile(document) -> None:
    document["results"][0][1][0] = "text where a number goes"


def _bad_rule(document) -> None:
    document["results"][0][2] = [len(document["rules"])]  # past the rules listed


def _inf(document) -> None:
    document["results"][0][1][0] = 1e400


def _nested(document) -> None:
    deep: list = []
    for _ in range(100):
        deep = [deep]
    document["rules"] = deep


def _changed(document) -> None:
    document["results"][0][1][0] = document["results"][0][1][0] * 2  # no hash can tell: stat


@pytest.mark.parametrize("spoil", [
    pytest.param(lambda p, r: _rewrite(p, lambda d: d.update(paprof_summary=summary.FORMAT + 1)),
                 id="another format"),
    pytest.param(lambda p, r: _rewrite(p, lambda d: d.update(metrics="1")), id="another catalogue"),
    pytest.param(lambda p, r: p.write_bytes(p.read_bytes()[:-100]), id="truncated"),
    pytest.param(lambda p, r: p.write_bytes(b" " * (summary.SLACK * r.stat().st_size + 70000)),
                 id="oversized"),
    pytest.param(lambda p, r: p.write_bytes(b"\xff\xfe garbage"), id="not text"),
    pytest.param(lambda p, r: p.write_text("[]"), id="not an object"),
    pytest.param(lambda p, r: _rewrite(p, _hostile), id="wrong type"),
    pytest.param(lambda p, r: _rewrite(p, _bad_rule), id="rule out of range"),
    pytest.param(lambda p, r: p.write_text(p.read_text().replace("]]", "]] ", 1)
                                            .replace(",", ",1e400,", 1)), id="not finite"),
    pytest.param(lambda p, r: _rewrite(p, _inf), id="infinite value"),
    pytest.param(lambda p, r: _rewrite(p, _nested), id="nested deep"),
    pytest.param(lambda p, r: _rewrite(p, lambda d: d["results"].append(d["results"][0][:4])),
                 id="short result"),
    pytest.param(lambda p, r: r.write_bytes(r.read_bytes()[:-1] + bytes([r.read_bytes()[-1] ^ 1])),
                 id="stale: report changed in place"),
    pytest.param(lambda p, r: shutil.copyfile(shipped("v3"), r), id="stale: another report"),
    pytest.param(lambda p, r: (_rewrite(p, lambda d: d["report"].update(sha256="1")),
                               os.utime(r, ns=(1, 1))), id="stale: another hash"),
])
def test_a_bad_summary_is_passed_over(spoil, tmp_path, monkeypatch):
    report, path = _one(tmp_path)
    good = summary.read(report)
    assert good is not None
    spoil(path, report)
    assert summary.read(report) is None
    try:
        expected = _from_reports([report.parent], monkeypatch, jobs=1)
    except Exception as err:  # the report itself spoiled: the same error either way
        with pytest.raises(type(err)):
            load.load_reports([report.parent], jobs=1)
        return
    _same(load.load_reports([report.parent], jobs=1), expected)


def test_a_value_changed_without_its_stat_is_used_as_the_stamp_says(tmp_path):
    """The stat is the fast path's word: a summary keyed to the report's size and
    mtime_ns is taken as the reader's output (what ``write`` keeps true: it writes it
    beside the report it read, after the report is in place; a report is replaced by a
    rename, never written in place). Anyone who may write the store may write its
    reports too: the summary is no weaker a trust than the report."""
    report, path = _one(tmp_path)
    _rewrite(path, _changed)
    assert summary.read(report) is not None
    # so does a report changed in place with its size and mtime put back
    stamp = _stamp(path)
    report.write_bytes(report.read_bytes()[:-1] + bytes([report.read_bytes()[-1] ^ 1]))
    os.utime(report, ns=(stamp["mtime_ns"], stamp["mtime_ns"]))
    assert summary.read(report) is not None
    os.utime(report, ns=(1, 1))  # any other mtime: its bytes are hashed, and differ
    assert summary.read(report) is None


@posix
@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_a_summary_that_is_no_regular_file_is_passed_over(kind, tmp_path, monkeypatch):
    report, path = _one(tmp_path)
    secret = tmp_path / "elsewhere"
    secret.write_text(path.read_text())
    path.unlink()
    {"link": lambda: path.symlink_to(secret), "fifo": lambda: os.mkfifo(path),
     "folder": lambda: path.mkdir()}[kind]()
    assert summary.read(report) is None  # a FIFO does not block it
    _same(load.load_reports([report.parent], jobs=1),
          _from_reports([report.parent], monkeypatch, jobs=1))


@posix
def test_the_writer_never_writes_through_a_planted_link(tmp_path):
    report, path = _one(tmp_path)
    target = tmp_path / "outside"
    target.write_text("mine")
    path.unlink()
    path.symlink_to(target)
    assert not summary.write(report, tmp_path / "v5")
    assert target.read_text() == "mine" and path.is_symlink()


# -- the reader's output is what the format number stands for ------------------------

READER_OUTPUT = {
    (1, "56689146196169354192495760302112428353495781731901854242174645720772828459061"):
        "0f00938b728949e373acd8adcd663d95db6e2765db24b4b5035f6c872c9f701f",
    # (FORMAT, the catalogue's hash): sha256 of the summaries of the shipped h200 reports
    # without their stamps. A change of the reader's output with the same catalogue must
    # bump summary.FORMAT; a change of the catalogue alone changes its hash (the old
    # summaries are passed over by it): record the new pair.
}


def _reader_output() -> tuple[tuple[int, str], str]:
    h = hashlib.sha256()
    asked = summary._asked()
    for report in store.report_paths(recorded("h200")):
        results = ncu_fastread.read_report(report, asked.numeric, asked.text, asked.by_instance)
        h.update(summary.encode(results, {}).encode())
    return (summary.FORMAT, asked.hash), h.hexdigest()


def test_a_change_of_the_readers_output_bumps_the_format():
    key, digest = _reader_output()
    recorded_pairs = {k: v for k, v in READER_OUTPUT.items() if k[1] == key[1]}
    assert key in READER_OUTPUT, (
        f"no reader output recorded for format {key[0]} and this catalogue ({key[1][:12]}...): "
        f"if only the catalogue changed, record {key!r}: {digest!r} in READER_OUTPUT; if the "
        f"reader's output changed, bump summary.FORMAT and record the new pair")
    assert READER_OUTPUT[key] == digest, (
        f"the fast reader's output changed ({digest}) but summary.FORMAT is still {key[0]}: "
        f"bump it (old summaries would be used as the new reader's output) and record "
        f"the new pair; recorded for this catalogue: {sorted(recorded_pairs)}")


# -- who writes them ----------------------------------------------------------------


def test_a_stored_run_gets_its_summary(tmp_path):
    source = shipped("v3")
    paths = store.run_paths(tmp_path, "nvidia-h200", "paged_decode", "v3", "s")
    with store.writing(paths) as pending:
        shutil.copyfile(source, pending.report)
        shutil.copyfile(source.with_suffix(".json"), pending.sidecar)
    assert summary.path_of(paths.report).is_file()
    got = summary.read(paths.report)
    asked = summary._asked()
    want = ncu_fastread.read_report(source, asked.numeric, asked.text, asked.by_instance)
    assert summary.encode(got, {}) == summary.encode(want, {})
    assert sorted(p.name for p in paths.folder.iterdir()) == ["s.json", "s.ncu-rep", "s.summary"]


def test_a_report_the_fast_reader_cannot_read_gets_none(tmp_path):
    paths = store.run_paths(tmp_path, "g", "f", "v3", "s")
    with store.writing(paths) as pending:
        pending.report.write_bytes(b"rep")
        store.write_sidecar(pending.sidecar, {"variant": "v3"})
    assert not summary.path_of(paths.report).exists()


def test_the_commands_that_only_read_write_no_summary(tmp_path):
    from click.testing import CliRunner

    from paprof.cli import main

    runs = tmp_path / "runs"
    shutil.copytree(recorded("h200"), runs)
    before = sorted(p.relative_to(runs) for p in runs.rglob("*"))
    invoke = lambda *a: CliRunner().invoke(main, [str(x) for x in a])  # noqa: E731
    for argv in (["compare", "v3", "v5", "--runs", runs, "--out", tmp_path / "c.html"],
                 ["table", runs],
                 ["baseline", "update", "--runs", runs, "--out", tmp_path / "b.json"],
                 ["check", "--baseline", tmp_path / "b.json", "--runs", runs]):
        done = invoke(*argv)
        assert done.exit_code in (0, 1), (argv, done.output)
    assert sorted(p.relative_to(runs) for p in runs.rglob("*")) == before


def test_a_copied_report_whose_bytes_differ_is_read(tmp_path):
    _runs, copy = _copied("sweeps/h200-profile", tmp_path)
    report = store.report_paths(copy)[0]
    assert summary.read(report) is not None  # by its hash
    data = bytearray(report.read_bytes())
    data[len(data) // 2] ^= 1
    report.write_bytes(bytes(data))  # the same size, its mtime now
    assert summary.read(report) is None
