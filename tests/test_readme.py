"""What the README and the shipped files promise a new user on a fresh clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SHIPPED = ("README.md", "pyproject.toml", "docs", "paprof", "scripts", "tests", "benchmarks",
           "examples")
TEXT = {".md", ".py", ".toml", ".sh", ".cu", ".cuh", ".j2", ".json", ".log", ".txt", ".yml"}


def _shipped_text_files():
    for name in SHIPPED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for f in files:
            if f.is_file() and f.suffix in TEXT and "__pycache__" not in f.parts:
                yield f


def test_nothing_shipped_points_outside_the_repository():
    outside = re.compile(r"\.\./" + "shared" + r"|SEED_" + "FACTS")
    hits = [str(f.relative_to(ROOT)) for f in _shipped_text_files()
            if outside.search(f.read_text(errors="replace"))]
    assert hits == []


def test_readme_starts_with_a_virtual_environment():
    commands = [l for l in README.split("```bash", 1)[1].split("```", 1)[0].splitlines()
                if l and not l.startswith("#")]
    assert len(commands) == 2  # the main job, then the tests
    assert commands[0].startswith("python3 -m venv .venv && . .venv/bin/activate && "
                                  "python3 -m pip install -e . && paprof compare")
    assert commands[1] == "python3 -m pip install -e '.[test]' -e ./kernels && python3 -m pytest"


def test_the_docs_quote_the_reports_figures_for_v5():
    """Docs and report tell one story: the report's v5 figures are the kernels page's, the
    v2 -> v3 cause the README's."""
    from paprof.api import write_report

    built = write_report(["v4", "v5"], runs=ROOT / "examples" / "h200", out=None, markdown="-",
                         shape="b64_ctx4096_h32x8_d128_p16_fp32")
    md = built.markdown_text
    line = next(l for l in md.splitlines() if l.startswith("- achieved bandwidth"))
    found = re.fullmatch(r"- achieved bandwidth .* -> ([\d.]+ TB/s), [\d.]+ % -> ([\d.]+ %) of the "
                         r"measured 4\.53 TB/s ceiling", line)
    assert found, line
    bandwidth, share = found.groups()
    duration = built.context.row("duration_us").cells[1].text
    assert "Bandwidth ceiling: 4.53 TB/s (measured: median of 10 runs" in md
    assert "4.52 to 4.62 TB/s" in md
    story = " ".join((ROOT / "docs" / "kernels.md").read_text().split())
    for words in ("v5 486 us: 4.42 TB/s, 95.7 % of the 4.62 TB/s",
                  f"(v5: {duration}, {bandwidth})", "median of ten streaming-read calls, 4.53 TB/s",
                  f"shows v5 at {share}", "4.62 TB/s that `bench` measured in its own call"):
        assert words in story, words
    # the v2 -> v3 cause the README quotes is the report's
    v2v3 = write_report(["v2", "v3"], runs=ROOT / "examples" / "h200", out=None, markdown=None)
    cause = v2v3.comparison.steps[0].cause
    quoted = "fewer round trips to memory: global load requests 25.2 M -> 4.72 M"
    assert cause.startswith(quoted) and "(memory waits (long scoreboard) -765 us" in cause
    assert f'"{quoted} ... (memory waits (long scoreboard) -765 us ..."' in " ".join(README.split())


def test_the_readme_is_the_short_path_and_every_page_it_links_is_there():
    assert len(README.splitlines()) <= 80
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert len(links) >= 9
    for link in links:
        assert (ROOT / link).is_file(), link
    # each user page is linked from the README; the lab notebook is not a user page
    linked = {Path(link).name for link in links}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"NOTES.md"}
    assert pages <= linked, pages - linked
