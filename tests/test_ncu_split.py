"""The splitter of one report into several (``paprof.read.ncu_split``).

Every shipped report of several results, and reports joined from shipped single-run
reports (``tests/fake_ncu/join_reports.py``: what one ncu session over several variants
writes), split into parts; each part must read, through ``ncu_report`` (the slow tests)
and paprof's fast reader, exactly as the original's results it holds: every metric's
value and instances, the NVTX state, the rule results, the SASS and source lines at every
correlated address, the embedded source files.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from helpers import DATA, FAKE_DIR, recorded, unpacked
from paprof.read import ncu_fastread, ncu_split
from paprof.read.ncu_fastread import Unsupported

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(FAKE_DIR))
from join_reports import join  # noqa: E402  (the fake ncu's helper)

NUMERIC = ("gpu__time_duration.sum", "dram__bytes.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "launch__grid_size", "launch__registers_per_thread")


def _reports(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.ncu-rep"))


def _fast_view(path: Path) -> list[tuple]:
    return [(r.kernel, tuple(sorted(r.values.items())), tuple(tuple(sorted(d.items())) for d in r.rules),
             r.nvtx) for r in ncu_fastread.read_report(path, NUMERIC, by_instance=())]


def _split_all_ways(path: Path, tmp: Path) -> list[tuple[Path, list[int]]]:
    """One part a result, and the halves (first half, second half)."""
    total = ncu_split.count_results(path)
    parts = {tmp / f"{path.stem}.r{i}.ncu-rep": [i] for i in range(total)}
    if total > 2:
        half = total // 2
        parts[tmp / f"{path.stem}.a.ncu-rep"] = list(range(half))
        parts[tmp / f"{path.stem}.b.ncu-rep"] = list(range(half, total))
    ncu_split.split_report(path, parts)
    return list(parts.items())


@pytest.fixture(scope="module")
def joined(tmp_path_factory) -> Path:
    """Three recorded paged_decode runs (v4: two kernels a launch) joined into one report
    of four results, as one ncu session over v2, v3 and v4 writes it."""
    runs = recorded("h200") / "nvidia-h200" / "paged_decode"
    shape = "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
    out = tmp_path_factory.mktemp("joined") / "session.ncu-rep"
    out.write_bytes(join([runs / v / shape for v in ("v2", "v3", "v4")]))
    return out


def test_a_joined_session_splits_back_into_each_variants_results(joined, tmp_path):
    runs = recorded("h200") / "nvidia-h200" / "paged_decode"
    shape = "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
    groups = ncu_split.group_by_range(joined, ["paged_decode.v2", "paged_decode.v3", "paged_decode.v4"])
    assert groups == {"paged_decode.v2": [0], "paged_decode.v3": [1], "paged_decode.v4": [2, 3]}
    outs = {tmp_path / f"{name}.ncu-rep": idx for name, idx in groups.items()}
    assert ncu_split.split_report(joined, outs) == {p: len(i) for p, i in outs.items()}
    for variant in ("v2", "v3", "v4"):
        part = tmp_path / f"paged_decode.{variant}.ncu-rep"
        assert _fast_view(part) == _fast_view(runs / variant / shape)


def test_a_part_keeps_the_bytes_of_its_results_and_every_source(joined, tmp_path):
    prefix, blocks = ncu_split.read_blocks(joined.read_bytes())
    out = tmp_path / "part.ncu-rep"
    ncu_split.split_report(joined, {out: [1]})
    prefix2, blocks2 = ncu_split.read_blocks(out.read_bytes())
    assert prefix2 == prefix and len(blocks2) == len(blocks)
    assert [b.sources for b in blocks2] == [b.sources for b in blocks]
    kept = [r for b in blocks2 for r in b.results]
    assert kept == [[r for b in blocks for r in b.results][1]]


def test_a_report_whose_results_sit_in_no_asked_range_is_not_split(joined):
    with pytest.raises(Unsupported):
        ncu_split.group_by_range(joined, ["paged_decode.v2", "paged_decode.v3"])


def test_an_index_past_the_report_is_refused(joined, tmp_path):
    with pytest.raises(ValueError, match="result 9 of a report of 4"):
        ncu_split.split_report(joined, {tmp_path / "x.ncu-rep": [9]})
    assert not list(tmp_path.iterdir())


def test_reports_of_other_sections_are_not_joined(tmp_path):
    basic = unpacked(DATA / "basic-set.tar.xz") / "basic-set" / "uncoalesced_fast.ncu-rep"
    v3 = recorded("h200") / "nvidia-h200" / "paged_decode" / "v3" / "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
    with pytest.raises(ValueError, match="metric names differ"):
        join([v3, basic])


# -- against ncu_report, on every shipped report of several results --------------------------

def _ncu_report():
    if importlib.util.find_spec("ncu_report") is None:
        pytest.skip("ncu_report is not installed")
    import ncu_report

    return ncu_report


def _metric_view(metric) -> tuple:
    kind = metric.kind()
    value = None
    if metric.has_value():
        value = metric.as_string() if kind == metric.ValueKind_STRING else metric.as_double()
    instances = ()
    if metric.num_instances() and metric.has_value():
        ids = metric.correlation_ids() if metric.has_correlation_ids() else None
        instances = tuple(
            ((ids.as_string(i) if ids is not None else None),
             metric.as_string(i) if kind == metric.ValueKind_STRING else metric.as_double(i))
            for i in range(metric.num_instances()))
    return (kind, metric.unit(), value, instances)


def _addresses(action) -> list[int]:
    out = set()
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric.has_correlation_ids() and metric.num_instances():
            ids = metric.correlation_ids()
            if ids.kind() in (ids.ValueKind_UINT64, ids.ValueKind_UINT32):
                out.update(int(ids.as_uint64(i)) for i in range(metric.num_instances()))
    return sorted(out)


def _action_view(action) -> dict:
    state = action.nvtx_state()
    nvtx = tuple((state.domain_by_id(d).name(), tuple(state.domain_by_id(d).push_pop_ranges()))
                 for d in state.domains()) if state is not None else None
    lines = []
    for address in _addresses(action):
        info = action.source_info(address)
        lines.append((address, action.sass_by_pc(address),
                      (info.file_name(), info.line()) if info is not None else None))
    return {
        "name": action.name(),
        "metrics": {n: _metric_view(action.metric_by_name(n)) for n in action.metric_names()},
        "nvtx": nvtx,
        "rules": [tuple(sorted((k, repr(v)) for k, v in r.items())) for r in action.rule_results_as_dicts()],
        "sass": lines,
        "files": dict(action.source_files()),
    }


def _actions(ncu_report, path: Path) -> list[dict]:
    context = ncu_report.load_report(str(path))
    return [_action_view(context.range_by_idx(r).action_by_idx(a))
            for r in range(context.num_ranges()) for a in range(context.range_by_idx(r).num_actions())]


def _multi_result_reports() -> list[Path]:
    """Every report of several results the repository ships (``examples/``, the archives
    of ``tests/data``, unpacked)."""
    found = [p for p in _reports(ROOT / "examples") if ncu_split.count_results(p) > 1]
    for archive in sorted(DATA.glob("*.tar.xz")):
        found += [p for p in _reports(unpacked(archive)) if ncu_split.count_results(p) > 1]
    return found


@pytest.mark.slow
def test_every_part_of_every_shipped_multi_result_report_reads_as_the_original(tmp_path, joined):
    ncu_report = _ncu_report()
    reports = _multi_result_reports() + [joined]
    checked = results = 0
    for path in reports:
        original = _actions(ncu_report, path)
        original_fast = _fast_view(path)
        assert len(original) == ncu_split.count_results(path)
        folder = tmp_path / f"{checked}"
        folder.mkdir()
        for part, indices in _split_all_ways(path, folder):
            got = _actions(ncu_report, part)
            assert len(got) == len(indices), part
            for view, index in zip(got, indices):
                want = original[index]
                assert view.keys() == want.keys()
                for key in want:
                    if key == "metrics":
                        assert view[key].keys() == want[key].keys(), (part, index)
                        for name, value in want[key].items():  # (repr: a NaN equals a NaN)
                            assert repr(view[key][name]) == repr(value), (part, index, name)
                    else:
                        assert view[key] == want[key], (part, index, key)
                results += 1
            assert _fast_view(part) == [original_fast[i] for i in indices], part
        checked += 1
    assert checked >= 6 and results >= 20
    print(f"{checked} reports, {results} results of their parts checked")
