"""What the commands print and write on the shipped runs stays what it was, byte for byte:
the README's first command (``paprof compare baseline v1 v2 v3 v4 handbook v5 v6 --runs
examples/h200``: its terminal lines, the HTML report, ``--markdown``, ``--json -``),
``paprof table`` of the same runs (the table and ``--traffic``), and one pair of the zoo
(``examples/zoo/runs.tar.xz``: ``uncoalesced_slow`` against ``uncoalesced_fast``). The
gate's outputs have their own golden test (tests/test_gate_golden.py).

Only what truly varies is replaced before comparing: the report's time of generation,
paprof's version, the absolute paths of the runs and the temporary folder, and the
charts' PNG bytes, which depend on the matplotlib that drew them: each chart is kept as
the sha256 of its data URI when this matplotlib is the one that wrote the expected files
(``matplotlib.txt``), and as ``<png>`` otherwise.

The expected files (tests/data/golden) were written by the code as it was before the
package was laid out as its data flow (issue 41); re-write them only for a change meant
to alter an output: ``PAPROF_GOLDEN=write pytest -m slow tests/test_golden_outputs.py``.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import matplotlib
import pytest

from helpers import DATA, ROOT, unpacked

import paprof

GOLDEN = DATA / "golden"
RUNS = ROOT / "examples" / "h200"
README = ("baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6")
PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def _normal(text: str, *folders: Path, charts: bool) -> str:
    for folder, name in folders:
        text = text.replace(str(folder.resolve()), name).replace(str(folder), name)
    text = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated <time>", text)
    text = text.replace(f"paprof {paprof.__version__}", "paprof <version>")
    text = text.replace(f'"paprof_version": "{paprof.__version__}"', '"paprof_version": "<version>"')
    if charts:
        return PNG.sub(lambda m: "<png " + hashlib.sha256(m.group().encode()).hexdigest()[:16] + ">", text)
    return PNG.sub("<png>", text)


def _compare(invoke, runs: Path, variants, tmp: Path, name: str) -> dict[str, str]:
    html, md = tmp / f"{name}.html", tmp / f"{name}.md"
    made = invoke("compare", *variants, "--runs", runs, "--out", html, "--markdown", md)
    assert made.exit_code == 0, made.output
    explained = invoke("compare", *variants, "--runs", runs, "--json", "-", "--out", tmp / "x.html")
    assert explained.exit_code == 0, explained.output
    return {f"{name}.txt": made.output, f"{name}.html": html.read_text(),
            f"{name}.md": md.read_text(), f"{name}.json.txt": explained.output}


def _outputs(invoke, tmp: Path) -> dict[str, str]:
    got = _compare(invoke, RUNS, README, tmp, "readme")
    for name, args in (("table.txt", ()), ("table-traffic.txt", ("--traffic",)),
                       ("table-per-variant.txt", ("--per-variant",))):
        made = invoke("table", RUNS, *args)
        assert made.exit_code == 0, made.output
        got[name] = made.output
    zoo = unpacked(ROOT / "examples" / "zoo" / "runs.tar.xz") / "runs"
    got.update(_compare(invoke, zoo, ("uncoalesced_slow", "uncoalesced_fast"), tmp, "zoo"))
    return got


@pytest.mark.slow
def test_the_outputs_on_the_shipped_runs_are_unchanged(invoke, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    zoo = unpacked(ROOT / "examples" / "zoo" / "runs.tar.xz")
    folders = ((tmp_path, "<tmp>"), (RUNS, "<runs>"), (zoo, "<zoo>"))
    got = _outputs(invoke, tmp_path)
    if os.environ.get("PAPROF_GOLDEN") == "write":
        GOLDEN.mkdir(exist_ok=True)
        (GOLDEN / "matplotlib.txt").write_text(matplotlib.__version__ + "\n")
        for name, text in got.items():
            (GOLDEN / name).write_text(_normal(text, *folders, charts=True))
    charts = (GOLDEN / "matplotlib.txt").read_text().strip() == matplotlib.__version__
    for name, text in got.items():
        expected = (GOLDEN / name).read_text()
        if not charts:
            expected = re.sub(r"<png [0-9a-f]{16}>", "<png>", expected)
        assert _normal(text, *folders, charts=charts) == expected, name
