"""Issue 27: safe on shared machines and in CI. Hostile names, untrusted code, damaged
reports, torn records, hostile CI outputs, concurrent writers: each a test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof import names
from paprof.errors import UserError
from paprof.sweep import manifest as M
from paprof.sweep import run as run_module

try:
    from conftest_profiler import paprof_cli  # noqa: F401
    from sweep_fakes import FakeRunner
except ImportError:  # tests/ became a package
    from tests.conftest_profiler import paprof_cli  # noqa: F401
    from tests.sweep_fakes import FakeRunner

SWEEP = ["sweep", "--variant", "v5", "--grid", "batch=1,2", "--shape", "dtype=fp16"]


def invoke(cli, *args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line_exit_2(result):
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, result.output
    assert text.startswith("paprof: error: ")
    assert "\x1b" not in text


# -- F1 / F12: a name never escapes the store, nor hides in it ---------------------------

BAD_NAMES = ["../../escaped", "/tmp/abs-escaped", "a/b", "a\\b", ".", "..", ".hidden",
             "x.tmp-1", "a\x00b", "a\x1bb", "x" * 300, ""]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_names_module_refuses_unsafe_names(bad):
    assert names.problem(bad) is not None
    with pytest.raises(UserError):
        names.check(bad)


@pytest.mark.parametrize("good", ["paged_decode-bench-1234abcd", "my.sweep_2", "A-b+c"])
def test_names_module_accepts_plain_names(good):
    assert names.check(good) == good


@pytest.mark.parametrize("bad", ["../../escaped", "/tmp/abs-escaped", "a/b", ".", ".hidden", "x.tmp-1"])
def test_sweep_name_is_refused_before_anything_runs(paprof_cli, tmp_path, monkeypatch, bad):
    """Without a GPU and without a fake runner: the name is checked first."""
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "deep" / "er" / "st"
    result = invoke(paprof_cli, *SWEEP, "--runs", str(runs), "--name", bad)
    one_line_exit_2(result)
    assert "--name" in result.output
    assert not runs.exists()
    assert not list(tmp_path.rglob("*.json"))
    assert not Path("/tmp/abs-escaped.json").exists()


def test_merge_refuses_a_manifest_whose_name_escapes(tmp_path, monkeypatch):
    from paprof.sweep.merge import merge_stores

    monkeypatch.chdir(tmp_path)
    src = tmp_path / "a" / "b" / "src"
    (src / M.FOLDER).mkdir(parents=True)
    data = {"kind": M.KIND, "schema": 1, "name": "../../x", "family": "paged_decode",
            "variants": ["v5"], "mode": "bench", "axes": [], "fixed": {}, "shards": [],
            "points": []}
    (src / M.FOLDER / "x.json").write_text(json.dumps(data))
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(UserError, match="name"):
        merge_stores([src], out)
    assert not (tmp_path / "a" / "x.json").exists()
    assert not list(tmp_path.rglob("x.json"))[1:]  # only the source's own file


def test_a_string_parameter_never_makes_a_hidden_or_temporary_slug():
    from paprof.family import Params, param
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class P(Params):
        mode: str = param("x")

    for value in (".hidden", "..", "a.tmp-b", ".tmp-x"):
        slug = P(mode=value).slug()
        assert not slug.startswith(".") and ".tmp-" not in slug, slug
    assert P(mode="plain.value").slug() == "plain.value"


def test_a_variant_id_with_the_temp_mark_is_refused():
    from paprof.family import CommandVariant

    with pytest.raises(ValueError):
        CommandVariant(id="a.tmp-b", idea="", command=("true",), range_name="r")
