"""The ``default`` preset (issue 40, point 2): the metric set derived from what the
analysis and the reports read. The shipped H200 runs and the zoo's were recorded with
every section whole (``tables``, the default until 2026-12-07), and the default's runs
must tell the same story: every step's cause, limit and next-move line is computed again
from the same reports with every column the default does not collect dropped (NaN, as a
report without the metric gives it) and every rule of a section it leaves out gone. The
cause and limit lines must be unchanged, and each next-move line must be ``tables``'
without the rules of the three sections the default collects only for their metrics
(``METRICS_ONLY``): nothing else may move."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from paprof.model import load
from paprof.read import metrics as M
from paprof.measure.presets import METRICS_ONLY, get_preset

from helpers import preset_readers, recorded, unpacked

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "examples" / "zoo"
CHAIN = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"]
DEFAULT = get_preset("default")
TABLES = get_preset("tables")


def collected(m: M.Metric) -> bool:
    """Whether a default run has the catalogue entry ``m`` (a report's device attributes
    come with any section)."""
    return m.section == M.DEVICE or m.section in DEFAULT.sections or m.ncu_name in DEFAULT.metrics


def test_the_default_collects_every_column_tables_does_in_fewer_sections():
    for m in M.MEASURED:
        if m.section in TABLES.sections or m.section == M.DEVICE:
            assert collected(m), m.column
    assert set(DEFAULT.sections) == set(TABLES.sections) - set(METRICS_ONLY)
    assert set(get_preset("basic").sections) <= set(DEFAULT.sections)  # ncu's rules read them
    args = DEFAULT.ncu_args()
    assert args[-2] == "--metrics" and "smsp__sass_inst_executed_op_global_ld.sum" in args[-1].split(",")
    assert "MemoryWorkloadAnalysis_Tables" not in args  # collected only for the catalogue's metrics
    assert not any(name.startswith("derived__") for name in args[-1].split(","))  # only sections make those


@pytest.fixture
def as_default(monkeypatch):
    """The loader as it would read a default run of the same kernels: what the default
    does not collect absent, the rules of the sections it leaves out gone."""
    seen_rules: set = set()
    default_metrics, default_rules = preset_readers(DEFAULT, load._metrics, load.read_rules,
                                                    seen_rules=seen_rules)
    monkeypatch.setattr(load, "_metrics", default_metrics)
    monkeypatch.setattr(load, "read_rules", default_rules)
    return seen_rules


def _lines(steps_of):
    return [(s.before, s.after, s.cause, s.limit, s.next_move) for s in steps_of()]


def _same_story(steps_of, request):
    """The steps ``steps_of()`` computes, from the reports as they are, then with only the
    rules of ``METRICS_ONLY``'s sections gone, then as a default run of the same kernels
    would have them (the ``as_default`` fixture, taken last)."""
    before = _lines(steps_of)
    with pytest.MonkeyPatch.context() as mp:
        rules = load.read_rules
        mp.setattr(load, "read_rules",
                   lambda action: [r for r in rules(action) if M.RULE_SECTIONS.get(r["id"]) not in METRICS_ONLY])
        expected = _lines(steps_of)
    seen = request.getfixturevalue("as_default")
    after = _lines(steps_of)
    assert seen <= set(M.RULE_SECTIONS), f"rules of unknown section: {seen - set(M.RULE_SECTIONS)}"
    assert before and all(b[2] for b in before)
    for b, e, a in zip(before, expected, after):
        assert a[:4] == b[:4], f"{b[0]} -> {b[1]}: another cause or limit from a default run"
        assert a == e, f"{b[0]} -> {b[1]} tells another story from a default run"
    return sum(b != a for b, a in zip(before, after))


def test_the_shipped_steps_tell_the_same_story_from_a_default_run(request):
    from paprof.api import write_report

    moved = _same_story(lambda: write_report(CHAIN, runs=recorded("h200"), out=None,
                                             markdown=None).comparison.steps, request)
    assert moved == 0  # none of the shipped steps cites a rule of those sections


def _zoo_cases(which: str) -> list[dict]:
    """The zoo's pairs (causes.toml, recorded on the H200) or its pre-registered cases
    (expected.toml, on the H100: ``zoo`` the CUDA ones, ``zoo_lib`` the library ones)."""
    if which == "h200":
        return tomllib.loads((ZOO / "causes.toml").read_text())["pair"] if (ZOO / "causes.toml").is_file() else []
    cases = tomllib.loads((ZOO / "expected.toml").read_text())["case"] if (ZOO / "expected.toml").is_file() else []
    return [c for c in cases if c["family"] == which.split(":")[1]]


@pytest.mark.parametrize("which, archive", [
    ("h200", "runs.tar.xz"),
    ("h100:zoo", "runs-h100.tar.xz"),
    pytest.param("h100:zoo_lib", "runs-h100.tar.xz", marks=pytest.mark.slow),  # 100 MB unpacked
])
def test_the_zoos_pairs_tell_the_same_story_from_a_default_run(request, which, archive):
    from paprof.api import write_report

    if not (ZOO / archive).is_file():
        pytest.skip(f"examples/zoo/{archive} is not there")
    runs = unpacked(ZOO / archive) / "runs"
    pairs = [p for p in _zoo_cases(which) if any(runs.glob(f"*/*/{p['slow']}/*.json"))]
    assert len(pairs) >= 4

    def steps():
        return [s for p in pairs for s in write_report(
            [p["slow"], p["fast"]], runs=runs, out=None, markdown=None,
            shape=p["shape"].replace(" ", "")).comparison.steps]

    _same_story(steps, request)
