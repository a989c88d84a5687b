"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``).

No extra Python packages: Chromium runs as a subprocess. ``--dump-dom`` returns the DOM
after the load event, where the report's own script has recorded how many charts decoded
and take space (``data-charts="4/4"``); ``--enable-logging=stderr`` prints every console
message (errors, CSP violations, uncaught exceptions) as a ``CONSOLE`` line. A canary
page checks that this detection works on the installed Chromium. The screenshot goes to
the test's temporary folder (its path printed: ``-s`` shows it; pytest keeps the folders
of its last three runs): look at it. No test writes in the checkout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = recorded("h200")
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
CONSOLE = re.compile(r":CONSOLE[:(]")
WIDTH = 1280
CHARTS = {"chart-speed-of-light", "chart-duration", "chart-bandwidth", "chart-occupancy", "chart-stalls",
          "chart-ledger"}
"""Every chart the shipped 8-variant report has (the figure ids)."""
OPTIONAL = {"chart-roofline"}
"""Charts drawn when the runs carry their inputs (the roofline: preset 'default' or a work
model); the report of the source-preset runs must have them."""
SOURCE_RUNS = recorded("h200-source")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                       "(apt-get install chromium)"),
]


def chromium(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    argv = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
        f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
        "--virtual-time-budget=5000", *extra, url,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def root_attrs(dom: str) -> dict[str, str]:
    tag = re.search(r"<html\b[^>]*>", dom)
    assert tag, dom[:300]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag.group(0)))


def test_console_detection_works(tmp_path):
    page = tmp_path / "canary.html"
    page.write_text('<!doctype html><html><body><script>console.error("canary");'
                    "notDefined();</script></body></html>")
    out = chromium(tmp_path, page.as_uri(), "--dump-dom")
    lines = console_lines(out.stderr)
    assert any("canary" in x for x in lines), out.stderr[-2000:]
    assert any("notDefined" in x for x in lines)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The report of every recorded H200 paged_decode variant (the README's 8)."""
    from paprof.api import write_report

    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report(["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"], runs=EXAMPLES, out=out)
    return out


def opened(report: Path, tmp_path: Path) -> Path:
    """A copy of ``report`` with every ``<details>`` open, as a reader who opens them all
    sees it."""
    html = report.read_text()
    assert "<details" in html
    page = tmp_path / f"open-{report.name}"
    page.write_text(html.replace("<details", "<details open"))
    return page


def test_report_loads_without_console_errors_and_draws_every_chart(report, tmp_path):
    html = report.read_text()
    check_charts(opened(report, tmp_path), tmp_path, CHARTS | {c for c in OPTIONAL if f'id="{c}"' in html})


FIRST_SCREEN = (1400, 900)
"""A laptop's window: the verdict table must be in it without a scroll."""
MAX_SCREENS = 6
"""The default page (every <details> closed) at most this many first screens tall (the
README's 8-variant report was 17,316 px, about 19 screens, before the verdict table)."""


@pytest.fixture(scope="module")
def flash_report(tmp_path_factory) -> Path:
    """The report of the shipped flash_fwd runs (a compute-bound family, fp32 against bf16:
    a warning above the verdict). Read from examples/: its sdpa_flash run (the page's note
    beside numbers that look contradictory) packs to 297 KB, too much for tests/data."""
    from paprof.api import write_report

    runs = ROOT / "examples" / "h200-flash_fwd"
    if not (runs / "nvidia-h200").is_dir():  # pragma: no cover
        pytest.skip("examples/h200-flash_fwd is not there")
    out = tmp_path_factory.mktemp("flash-report") / "report.html"
    write_report(["flash_fwd/handbook", "flash_fwd/mma", "flash_fwd/sdpa_flash", "flash_fwd/sdpa_cudnn"],
                 runs=runs, out=out, cross=True)
    return out


@pytest.mark.parametrize("which", ["report", "flash_report"])
def test_first_screen_holds_the_verdict_and_the_page_is_short(which, request, tmp_path):
    report = request.getfixturevalue(which)
    width, height = FIRST_SCREEN
    out = chromium(tmp_path, report.as_uri(), f"--window-size={width},{height}", "--dump-dom")
    assert out.returncode == 0 and console_lines(out.stderr) == [], out.stderr[-2000:]
    attrs = root_attrs(out.stdout)
    assert 0 < int(attrs["data-verdict-bottom"]) <= height, attrs
    assert int(attrs["data-height"]) <= MAX_SCREENS * height, attrs
    closed, total = attrs["data-details"].split("/")
    assert closed == "0" and int(total) >= 6  # steps, traffic, side by side, charts ...
    # opened, every section lays out: the page grows by what the <details> held
    out = chromium(tmp_path, opened(report, tmp_path).as_uri(), f"--window-size={width},{height}",
                   "--dump-dom")
    attrs_open = root_attrs(out.stdout)
    assert attrs_open["data-details"] == f"{total}/{total}"
    # the reasons beside numbers that look contradictory are on the page, not in tooltips
    shown, notes = attrs_open["data-why"].split("/")
    assert shown == notes and int(notes) >= (2 if which == "report" else 1), attrs_open["data-why"]
    assert int(attrs_open["data-height"]) > 3 * int(attrs["data-height"])


@pytest.fixture(scope="module")
def source_report(tmp_path_factory) -> Path:
    """The report of the recorded source-preset runs: roofline and source hot spots."""
    from paprof.api import write_report

    out = tmp_path_factory.mktemp("source-report") / "report.html"
    write_report(["v2", "v3", "v4", "v5"], runs=SOURCE_RUNS, out=out)
    return out


def test_source_report_draws_the_roofline_and_shows_the_hot_spots(source_report, tmp_path):
    html = source_report.read_text()
    assert 'id="roofline"' in html and 'id="hotspots"' in html
    check_charts(opened(source_report, tmp_path), tmp_path, CHARTS | OPTIONAL)


def check_charts(report: Path, tmp_path: Path, expected: set[str]) -> None:
    out = chromium(tmp_path, report.as_uri(), f"--window-size={WIDTH},2000", "--dump-dom")
    assert out.returncode == 0, out.stderr[-2000:]
    assert console_lines(out.stderr) == []
    attrs = root_attrs(out.stdout)
    images = report.read_text().count("<img ")
    assert images == len(expected)
    assert attrs.get("data-charts") == f"{images}/{images}", attrs  # every <img> decoded and laid out
    assert attrs.get("data-chart-alts") == f"{images}/{images}", attrs  # and has alt text
    sizes = dict(item.split(":") for item in attrs["data-chart-sizes"].split())
    natural = dict(item.split(":") for item in attrs["data-chart-natural"].split())
    assert set(sizes) == set(natural) == expected
    for name, size in sizes.items():
        w, h = (int(v) for v in size.split("x"))
        assert w > 300 and h > 100, (name, size)
        nw, nh = (int(v) for v in natural[name].split("x"))
        assert nw > 300 and nh > 100, (name, natural[name])
    # the page lays out within a laptop's width: nothing wider than the window
    assert int(attrs["data-width"]) <= WIDTH
    assert int(attrs["data-table-overflow"]) <= 0, "the side-by-side table needs a horizontal scroll"
    assert int(attrs["data-traffic-overflow"]) <= 0, "the traffic table needs a horizontal scroll"
    assert int(attrs["data-height"]) > 1000


def test_report_screenshot(report, tmp_path):
    report = opened(report, tmp_path)
    dom = chromium(tmp_path, report.as_uri(), f"--window-size={WIDTH},2000", "--dump-dom")
    height = int(root_attrs(dom.stdout).get("data-height", "6000")) + 40
    screenshot = tmp_path / "report-screenshot.png"
    out = chromium(tmp_path, report.as_uri(), f"--window-size={WIDTH},{height}",
                   f"--screenshot={screenshot}")
    assert screenshot.is_file() and screenshot.stat().st_size > 50_000, out.stderr[-2000:]
    assert console_lines(out.stderr) == []
    print(f"\nreport screenshot: {screenshot} ({WIDTH}x{height})")


def test_report_prints_to_pdf(report, tmp_path):
    pdf = tmp_path / "report.pdf"
    out = chromium(tmp_path, report.as_uri(), "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
    assert pdf.is_file() and pdf.read_bytes()[:5] == b"%PDF-", out.stderr[-2000:]
    pages = len(re.findall(rb"/Type\s*/Page\b", pdf.read_bytes()))
    assert 2 <= pages <= 20, pages
    print(f"\nprinted: {pdf} ({pages} pages)")
