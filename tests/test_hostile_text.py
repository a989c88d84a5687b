"""Names from a hostile store never reach a terminal, a report, a JUnit file or an MCP
answer raw: ESC, BEL, OSC 8 links, CR and bidi overrides are shown escaped, long text is
cut with a note (``paprof.safetext``; issue 38, item 4)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from paprof.safetext import shown
from helpers import shipped

EVIL = ("\x1b[31mred\x07\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"
        "\u202eevil\u2066x\u2069\u200f\r\x9bX")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What may never appear raw (newline and tab may)."""


def test_control_and_bidi_characters_are_shown_escaped():
    assert shown("a\x1bb\x07c\u202ed\u2066e\r") == "a\\x1bb\\x07c\\u202ed\\u2066e\\x0d"
    assert shown("two\nlines") == "two\\x0alines"
    assert shown("two\nlines", newlines=True) == "two\nlines"
    assert shown("\x9b\u061c\u200e") == "\\x9b\\u061c\\u200e"
    assert shown("plain name-1.2 ünï") == "plain name-1.2 ünï"
    assert not RAW.search(shown(EVIL))


def test_long_text_is_cut_with_a_note():
    assert shown("x" * 5000, limit=10) == "xxxxxxxxxx... (4,990 more characters)"
    assert len(shown("y" * 10_000_000)) < 5000
    assert shown("z" * 10, limit=10) == "z" * 10


@pytest.fixture
def hostile_store(tmp_path):
    """Two real runs whose sidecars name their variants and shapes with escapes."""
    root = tmp_path / "runs"
    for variant in ("v1", "v2"):
        report = shipped(variant)
        folder = root / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True)
        shutil.copy(report, folder / report.name)
        side = json.loads(report.with_suffix(".json").read_text())
        side["variant"] = variant + EVIL
        side["shape"] = side["shape"] + EVIL
        side["idea"] = EVIL
        (folder / report.with_suffix(".json").name).write_text(json.dumps(side))
    return root


def _clean(*texts):
    for text in texts:
        found = RAW.search(text)
        assert found is None, f"raw {found.group()!r} in {text[max(found.start() - 60, 0):found.end() + 20]!r}"


def _reports(store):
    return sorted(str(p) for p in store.rglob("*.ncu-rep"))


def test_table_shows_hostile_names_escaped(hostile_store, invoke):
    for extra in ((), ("--per-variant",), ("--format", "csv")):
        result = invoke("table", hostile_store, *extra)
        assert result.exit_code == 0, result.output
        assert "\\x1b" in result.output and "\\u202e" in result.output
        _clean(result.output)


def test_compare_summary_and_reports_hold_no_raw_control_or_bidi(hostile_store, invoke, tmp_path):
    html, md, js = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.json"
    result = invoke("compare", *_reports(hostile_store), "--out", html, "--markdown", md,
                    "--json", js)
    assert result.exit_code == 0, result.output
    assert "\\x1b" in result.output
    _clean(result.output, md.read_text(), js.read_text())
    page = html.read_text()
    _clean(page)
    assert "\\u202e" in page


def test_check_terminal_markdown_and_junit_hold_no_raw_control_or_bidi(hostile_store, invoke,
                                                                       tmp_path):
    base = tmp_path / "b.json"
    made = invoke("baseline", "update", "--runs", hostile_store, "--out", base)
    assert made.exit_code == 0, made.output
    _clean(made.output)
    md, xml = tmp_path / "c.md", tmp_path / "c.xml"
    result = invoke("check", "--baseline", base, "--runs", hostile_store, "--markdown", md,
                    "--junit", xml)
    assert result.exit_code == 0, result.output
    assert "\\u202e" in result.output
    _clean(result.output, md.read_text(), xml.read_text())


def test_an_error_naming_a_hostile_variant_is_one_clean_line(hostile_store, invoke):
    result = invoke("compare", "nothing" + EVIL, "v2", "--runs", hostile_store)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    _clean(result.output)


def test_markdown_cells_escape_table_metacharacters():
    from paprof.render.markdown import md_escape

    assert md_escape("a|b`c\nd\u202e") == "a\\|b\\`c d\\\\u202e"


def test_sweep_report_shows_hostile_manifest_text_escaped(tmp_path, invoke):
    from helpers import recorded

    root = tmp_path / "sweep"
    shutil.copytree(recorded("sweeps/h200-bench"), root)
    manifest = next((root / "sweeps").glob("*.json"))
    data = json.loads(manifest.read_text())
    for point in data["points"]:
        point["label"] += EVIL
    manifest.write_text(json.dumps(data))
    md = tmp_path / "s.md"
    result = invoke("sweep-report", "--runs", root, "--out", tmp_path / "s.html", "--markdown", md)
    assert result.exit_code == 0, result.output
    _clean(result.output, md.read_text(), (tmp_path / "s.html").read_text())
    assert "\\u202e" in md.read_text()
