"""Every command the README and the user pages show on the shipped runs works as shown
(no GPU needed): a user copying it gets exit 0, in a folder of their own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SERVED = ("paprof mcp",)  # runs until its client leaves: tests/test_mcp.py drives it


def _shown() -> list[tuple[str, str]]:
    """(page, command) of each `paprof ...` on the shipped runs, in code blocks or inline."""
    found = []
    for page in PAGES:
        text = page.read_text()
        lines = [l.split("#")[0].strip() for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
                 for l in block.splitlines()]
        inline = [" ".join(m.split()) for m in re.findall(r"`(paprof [^`]*)`", text)]
        for line in lines + inline:
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("paprof ") and "examples/" in part \
                        and not part.startswith(SERVED):
                    found.append((page.name, part))
    return sorted(set(found))


COMMANDS = _shown()


def test_the_pages_show_commands_on_the_shipped_runs():
    pages = {page for page, _ in COMMANDS}
    assert {"README.md", "getting-started.md", "kernels.md", "reading-a-report.md",
            "sweeps.md"} <= pages, pages


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[:60]}" for p, c in COMMANDS])
def test_a_shown_command_works_as_shown(page, command, tmp_path, monkeypatch):
    args = [str(ROOT / a) if a.startswith("examples/") else a for a in shlex.split(command)[1:]]
    monkeypatch.chdir(tmp_path)  # what it writes lands in the user's folder
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, f"{page}: {command}\n{done.output}"
