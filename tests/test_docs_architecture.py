"""docs/architecture.md, the design the code cites: every column of the tidy table's
schema and every bottleneck label is there, and every citation of it resolves."""

from __future__ import annotations

import re
from pathlib import Path

from paprof.model import bottleneck
from paprof.read import metrics as M

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def test_every_design_column_is_described_in_order():
    table = PAGE.split("## The tidy table", 1)[1].split("\n## ", 1)[0]
    named = [c for c in re.findall(r"`([a-z_0-9]+)`", table) if c in M.DESIGN_COLUMNS]
    first = list(dict.fromkeys(named))
    assert first == list(M.DESIGN_COLUMNS)
    for column in M.TRAILING_COLUMNS:
        assert f"`{column}`" in table, column


def test_every_bottleneck_label_is_described():
    labels = PAGE.split("## Bottleneck labels", 1)[1].split("\n## ", 1)[0]
    for label in bottleneck.LABELS:
        assert f"| `{label}` |" in labels, label


def test_the_modules_the_page_names_exist():
    for path in set(re.findall(r"`(paprof/[\w/.]+)`", PAGE)):
        assert (ROOT / path).exists(), path


def test_every_design_citation_resolves():
    """No code cites a design file that no clone has: the design is docs/architecture.md."""
    citing = [p for d in ("paprof", "tests") for p in (ROOT / d).rglob("*.py")
              if "DESIGN" + ".md" in p.read_text()]
    assert citing == []
    assert "docs/architecture.md" in (ROOT / "paprof/render/export.py").read_text()
