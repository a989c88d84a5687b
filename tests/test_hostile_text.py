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


# -- bench and run print what family code says: names, kernels, messages (issue 38) --

MARKUP = "[bold red]loud[/bold red][link=http://evil.example/]x[/link]"
"""Rich markup: shown as written, never read as styles or links."""


@pytest.mark.lab
def test_bench_prints_family_text_escaped(monkeypatch):
    import sys

    from click.testing import CliRunner

    from paprof import registry
    from paprof.cli import main
    from paprof.measure.kernels import bench as kbench

    fam = registry.family("paged_decode")
    params = fam.parse("batch=8,context=1024")
    rows = [kbench.BenchRow("v3" + EVIL, "cuda", kernels=["k" + EVIL], medians_us=[50.0, 50.5],
                            rel_error=1e-7, passed=True, details={"split" + EVIL: EVIL}),
            kbench.BenchRow("v4", "cuda", skipped="cannot" + EVIL)]
    monkeypatch.setattr(kbench, "run_bench", lambda fam, chosen, params, *a, **k: kbench.BenchResult(
        fam.name, params, fam.work(params), "GPU" + EVIL, 4.5, 100, 2, rows))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nothing else on stderr
    result = CliRunner().invoke(main, ["bench", "--family", "paged_decode", "--variant", "v3",
                                       "--shape", "batch=8,context=1024"])
    assert result.exit_code == 0, result.output
    assert result.output.count("\\x1b]8;;http") >= 4  # gpu, variant, kernels, skip message
    assert not RAW.search(result.output), repr(result.output)


def test_run_prints_names_and_messages_escaped_and_never_as_markup():
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from paprof.commands.run import report_lines, summary_table
    from paprof.errors import ShapeError, VerificationError
    from paprof.measure.profile import Outcome

    def variant(name):
        return SimpleNamespace(name=name + EVIL + MARKUP, verified=True)

    outcomes = [Outcome(variant("f/a"), failed=VerificationError("differs" + EVIL + MARKUP)),
                Outcome(variant("f/b"), skipped=ShapeError("too big" + EVIL + MARKUP)),
                Outcome(variant("f/c"), run=SimpleNamespace(sidecar={}, report="r" + EVIL))]
    buf = io.StringIO()
    Console(file=buf, width=2000, color_system=None).print(summary_table(outcomes))
    text = buf.getvalue() + "\n".join(report_lines(outcomes))
    assert not RAW.search(text), repr(text)
    assert text.count(MARKUP) == 6 and "\\x1b]8;;http" in text


def test_run_progress_shows_kernel_names_escaped(tmp_path, monkeypatch):
    import io
    import time

    from rich.console import Console

    from paprof.measure import profile
    from paprof.measure.argv import NcuSettings

    def stand_in(variant, params, settings, runs_dir, replace, say, **kw):
        say("ncu: " + EVIL + MARKUP + " launch 0: 50%")
        time.sleep(0.3)  # a refresh or two with it
        return None

    monkeypatch.setattr(profile, "profile_variant", stand_in)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=2000, color_system=None)
    variant = type("V", (), {"name": "f/v" + EVIL})()
    profile.profile_variants([variant], None, NcuSettings(ncu="ncu"), tmp_path, console=console)
    text = buf.getvalue()
    assert "\\x1b]8;;http" in text and MARKUP in text
    assert "\x07" not in text and "\x1b]8;;http" not in text and "\u202e" not in text


def test_an_error_of_the_library_api_quotes_hostile_names_escaped(hostile_store):
    """paprof.compare in a notebook or a Python shell: the UserError's text (a traceback
    shows it raw) names the store's variants escaped."""
    import paprof
    from paprof.errors import UserError

    with pytest.raises(UserError) as err:
        paprof.compare("v9", "v1", runs=hostile_store)
    assert "v1\\x1b[31mred" in str(err.value)
    _clean(str(err.value))
