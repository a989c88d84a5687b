"""docs/api.md runs as written: its Python blocks, in order, in one namespace, from the
repository's root (on the shipped examples/h200), with the outputs it shows; and the
forms of ``paprof.compare`` it promises."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "api.md").read_text()
EXAMPLES = ROOT / "examples" / "h200"

needs_runs = pytest.mark.skipif(not (EXAMPLES / "nvidia-h200" / "paged_decode" / "v3").is_dir(),
                                reason="the shipped H200 runs are not there")


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE, flags=re.S)


def _shown(block: str) -> list[str]:
    """The output lines a block shows in comments after a print: '#   label ...'."""
    lines = []
    for line in block.splitlines():
        if line.startswith("# "):
            lines.append(line[2:])
        else:
            found = re.search(r"print\(.*\)\s+# (.*)$", line)
            if found and "(...)" not in found.group(1) and "->" not in found.group(1)[:3]:
                lines.append(found.group(1))
    return lines


@needs_runs
def test_the_pages_code_runs_and_prints_what_it_shows(monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = _blocks()
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/api.md", "exec"), namespace)
        printed = [" ".join(l.split()) for l in out.getvalue().splitlines()]
        for line in _shown(block):
            if line.startswith(("the columns these", "memory waits")):
                continue
            assert " ".join(line.split()) in printed, (line, printed)


@needs_runs
def test_the_cause_the_page_quotes_is_the_reports():
    import paprof

    quoted = re.search(r"print\(step\.cause\)\s+# (.*) \(\.\.\.\)", PAGE).group(1)
    step = paprof.compare(["v2", "v3"], runs=EXAMPLES).steps.iloc[0]
    assert step.cause.startswith(quoted)


@needs_runs
@pytest.mark.parametrize("call", [
    lambda c: c(["v2", "v3"], runs=EXAMPLES),
    lambda c: c(("v2", "v3"), runs=EXAMPLES),
    lambda c: c("v2", "v3", runs=EXAMPLES),
    lambda c: c(Path("v2"), "v3", runs=EXAMPLES),
], ids=["list", "tuple", "positional", "path-like"])
def test_compare_takes_a_list_or_several_ids(call):
    import paprof

    assert repr(call(paprof.compare)) == "<paprof.Report v2 -> v3>"


@pytest.mark.parametrize("args, error, words", [
    ((), "UserError", "compare needs at least 2 variants, got 0"),
    (("v2",), "UserError", "compare needs at least 2 variants, got 1"),
    ((["v2"],), "UserError", "compare needs at least 2 variants, got 1"),
    ((["v2", "v3"], "examples/h200"), "TypeError", "as one list"),
    (("v2", 3), "TypeError", "not int: 3"),
])
def test_compare_errors_say_what_to_give(args, error, words):
    import paprof

    with pytest.raises(Exception) as caught:
        paprof.compare(*args, runs=EXAMPLES)
    assert type(caught.value).__name__ == error and words in str(caught.value)


def test_load_needs_a_path():
    import paprof
    from paprof.errors import UserError

    with pytest.raises(UserError, match="at least one report or folder"):
        paprof.load()
