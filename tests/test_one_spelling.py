"""One spelling per idea (issue 39): overwriting is `force` everywhere, the MCP server
included; microseconds are "us" in every text and chart."""

from __future__ import annotations

import inspect
from pathlib import Path

from paprof.agent import tools

PACKAGE = Path(__file__).resolve().parents[1] / "paprof"


def test_no_mcp_tool_takes_replace_and_run_takes_force():
    for name, fn in inspect.getmembers(tools, inspect.isfunction):
        if fn.__module__ == tools.__name__ and not name.startswith("_"):
            assert "replace" not in inspect.signature(fn).parameters, name
    assert "force" in inspect.signature(tools.run).parameters


def test_microseconds_have_one_spelling():
    spelled = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".j2")
               and "\u00b5s" in p.read_text(encoding="utf-8")]
    assert spelled == []
