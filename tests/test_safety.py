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

from helpers import FakeRunner

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


# -- F2 / F11 / F9: no code from folders the user does not own; broken families one line --

import sys  # noqa: E402

from paprof import registry  # noqa: E402

PLANTED = '''
from pathlib import Path
Path({marker!r}).write_text("ran")
from paprof.family import Family, Params, Work
from dataclasses import dataclass
@dataclass(frozen=True)
class P(Params):
    pass
family = Family(name="planted", params=P, inputs=None, output=None, reference=None,
                work=lambda p: Work(bytes=1), variants=[])
'''


def _plant(folder: Path, module: str, marker: Path, body: str = PLANTED):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        f'[tool.paprof]\nfamilies = ["{module}:family"]\npath = ["."]\n')
    (folder / f"{module}.py").write_text(body.format(marker=str(marker)))


def test_discovery_stops_at_the_repository_root(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    _plant(tmp_path / "shared", "planted", marker)
    work = tmp_path / "shared" / "alice" / "work"
    work.mkdir(parents=True)
    (tmp_path / "shared" / "alice" / ".git").mkdir()
    monkeypatch.chdir(work)
    assert "planted" not in registry.discover()
    assert not marker.exists()


def test_discovery_stops_at_the_first_pyproject(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    _plant(tmp_path / "shared", "planted", marker)
    project = tmp_path / "shared" / "bob"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "bob"\n')
    monkeypatch.chdir(project / "src")
    assert "planted" not in registry.discover()
    assert not marker.exists()


def test_a_world_writable_project_is_refused_until_trusted(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    repo = tmp_path / "repo"
    _plant(repo, "planted", marker)
    repo.chmod(0o777)
    monkeypatch.chdir(repo)
    with pytest.raises(UserError, match=r"writable by group or others.*PAPROF_TRUST=") as err:
        registry.discover()
    assert "\n" not in str(err.value) and str(repo) in str(err.value)
    assert not marker.exists()
    monkeypatch.setenv(registry.TRUST_ENV, str(repo))
    registry.clear()
    assert registry.discover()["planted"].origin.startswith("[tool.paprof] of ")
    assert marker.exists()


def test_a_writable_module_file_is_refused(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    repo = tmp_path / "repo"
    _plant(repo, "planted", marker)
    (repo / "planted.py").chmod(0o666)
    monkeypatch.chdir(repo)
    with pytest.raises(UserError, match="planted.py is writable"):
        registry.discover()
    assert not marker.exists()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="no file owners")
def test_a_project_owned_by_another_user_is_refused(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    repo = tmp_path / "repo"
    _plant(repo, "planted", marker)
    monkeypatch.chdir(repo)
    if os.getuid() == 0:  # root: give the project to someone else
        os.chown(repo / "planted.py", 4243, -1)
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    with pytest.raises(UserError, match="owned by another user"):
        registry.discover()
    assert not marker.exists()


def test_tool_as_a_string_is_one_line(paprof_cli, tmp_path, monkeypatch, clean_registry):
    (tmp_path / "pyproject.toml").write_text('tool = "x"\n')
    monkeypatch.chdir(tmp_path)
    result = invoke(paprof_cli, "list")
    one_line_exit_2(result)
    assert "'tool' must be a table" in result.output


def test_a_family_calling_sys_exit_is_one_line_exit_2(paprof_cli, tmp_path, monkeypatch, clean_registry):
    _plant(tmp_path, "fam_exit", tmp_path / "ran", "import sys\nsys.exit(0)\n")
    monkeypatch.chdir(tmp_path)
    result = invoke(paprof_cli, "list")
    one_line_exit_2(result)
    assert "fam_exit" in result.output and "sys.exit(0)" in result.output


BROKEN_FAMILY = '''
from dataclasses import dataclass
from paprof.family import Family, Params, Work, param
@dataclass(frozen=True)
class P(Params):
    n: int = param(4)
    def validate(self):
        {validate}
family = Family(name="fam_bad", params=P, inputs=None, output=None, reference=None,
                work=lambda p: {work}, variants=[])
'''


@pytest.mark.parametrize("validate, work, message", [
    ("pass", "Work(bytes=float('nan'))", "finite"),
    ("pass", "Work(bytes=float('inf'))", "finite"),
    ("pass", "Work(bytes=-1)", "negative"),
    ("pass", "None", "returned NoneType"),
    ("pass", "1 / 0", "ZeroDivisionError"),
    ("raise RuntimeError('boom')", "Work(bytes=1)", "validate() failed (RuntimeError: boom)"),
])
@pytest.mark.lab
def test_a_broken_family_is_flagged_by_list(paprof_cli, tmp_path, monkeypatch, clean_registry,
                                             validate, work, message):
    (tmp_path / "pyproject.toml").write_text('[tool.paprof]\nfamilies = ["fam_bad:family"]\n')
    (tmp_path / "fam_bad.py").write_text(BROKEN_FAMILY.format(validate=validate, work=work))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(paprof_cli, ["list"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "paged_decode" in result.stdout  # the others are still listed
    assert "fam_bad" in result.stdout and "BROKEN" in result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    fam = registry.family("fam_bad")
    with pytest.raises(UserError, match="fam_bad|validate"):
        fam.work_of(fam.params())


# -- F3: a damaged report is one line, and ncu_report never takes paprof down ------------

import struct  # noqa: E402

from paprof.read import ncu_fastread, ncu_reader  # noqa: E402

from helpers import recorded  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
V5_REPORT = (recorded("sweeps/h200-profile") / "nvidia-h200/paged_decode/v5/"
             "b16_ctx16384_h32x8_d128_p16_fp16.ncu-rep")


def _damaged(tmp_path, offset=62443, delta=1) -> Path:
    data = bytearray(V5_REPORT.read_bytes())
    struct.pack_into("<I", data, offset, struct.unpack_from("<I", data, offset)[0] + delta)
    path = tmp_path / "damaged.ncu-rep"
    path.write_bytes(bytes(data))
    return path


def test_a_payload_length_off_by_one_is_corrupt_not_unsupported(tmp_path):
    with pytest.raises(ncu_fastread.Corrupt, match="runs past its block"):
        ncu_fastread.read_report(_damaged(tmp_path), ["gpu__time_duration.sum"])


def test_a_report_cut_short_is_corrupt(tmp_path):
    path = tmp_path / "short.ncu-rep"
    path.write_bytes(V5_REPORT.read_bytes()[:-3])
    with pytest.raises(ncu_fastread.Corrupt):
        ncu_fastread.read_report(path, ["gpu__time_duration.sum"])


def test_table_of_a_damaged_report_is_one_line_exit_2(paprof_cli, tmp_path, monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("ncu_report must not see a file the fast reader found damaged")

    monkeypatch.setattr(ncu_reader, "import_ncu_report", never)
    result = invoke(paprof_cli, "table", str(_damaged(tmp_path)))
    one_line_exit_2(result)
    assert "damaged.ncu-rep: corrupt Nsight Compute report" in result.output


FAKE_NCU_REPORT = '''
import os
def load_report(path):
    if os.path.basename(path).startswith("abort"):
        os.abort()
    raise RuntimeError("cannot read " + path)
'''


def test_ncu_report_aborting_is_a_one_line_error_in_a_child(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "ncu_report.py").write_text(FAKE_NCU_REPORT)
    spec = importlib.util.spec_from_file_location("ncu_report", tmp_path / "mod" / "ncu_report.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    monkeypatch.setattr(ncu_reader, "import_ncu_report", lambda: fake)
    monkeypatch.setattr(ncu_reader, "NCU_CHILD", True)
    path = tmp_path / "abort.ncu-rep"
    path.write_bytes(b"whatever")
    with pytest.raises(UserError, match=r"abort.ncu-rep: damaged Nsight Compute report .*SIGABRT"):
        ncu_reader._load(path)  # without the child this process would die here
    other = tmp_path / "plain.ncu-rep"
    other.write_bytes(b"whatever")
    with pytest.raises(UserError, match="cannot load the report: cannot read"):
        ncu_reader._load(other)


# -- F6: a record is whole or absent -------------------------------------------------------

from paprof.read import store  # noqa: E402
from paprof.sweep import results as sweep_results  # noqa: E402


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (the temp-file cleanup aside)."""


def _write_run(paths, variant, replace=False, kill_after_renames=None, monkeypatch=None):
    real = os.replace
    done = []

    def replace_then_die(a, b, **at):  # at: the folder's descriptor
        if kill_after_renames is not None and len(done) == kill_after_renames:
            raise Killed()
        done.append(b)
        real(a, b, **at)

    if monkeypatch is not None:
        monkeypatch.setattr(store.os, "replace", replace_then_die)
    try:
        with store.writing(paths, replace) as pending:
            pending.report.write_bytes(b"NVR\x00" + variant.encode() * (10 + len(variant)))
            store.write_sidecar(pending.sidecar, {"variant": variant, "family": "paged_decode",
                                                  "shape_slug": "s", "gpu_slug": "g"})
    finally:
        if monkeypatch is not None:
            monkeypatch.setattr(store.os, "replace", real)


@pytest.mark.parametrize("kill_after", [0, 1])
def test_a_kill_between_the_renames_leaves_no_run(tmp_path, monkeypatch, kill_after):
    paths = store.run_paths(tmp_path, "g", "paged_decode", "v5", "s")
    with pytest.raises(Killed):
        _write_run(paths, "v5", kill_after_renames=kill_after, monkeypatch=monkeypatch)
    assert store.find_runs(tmp_path) == []
    assert sweep_results.stored(tmp_path, "g", "paged_decode", "v5", "s", "profile") is None
    _write_run(paths, "v5")  # resume writes it, no --replace needed
    (run,) = store.find_runs(tmp_path)
    assert run.sidecar["variant"] == "v5" and run.sidecar[store.REPORT_BYTES] == paths.report.stat().st_size
    assert sweep_results.stored(tmp_path, "g", "paged_decode", "v5", "s", "profile") == paths.report


@pytest.mark.parametrize("kill_after", [0, 1])
def test_a_kill_while_replacing_never_mixes_two_records(tmp_path, monkeypatch, kill_after):
    paths = store.run_paths(tmp_path, "g", "paged_decode", "v5", "s")
    _write_run(paths, "v3")
    with pytest.raises(Killed):
        _write_run(paths, "v5-new", replace=True, kill_after_renames=kill_after, monkeypatch=monkeypatch)
    runs = store.find_runs(tmp_path)
    assert runs == [] or [r.sidecar["variant"] for r in runs] == ["v3"]
    for run in runs:  # whatever is there is one record
        assert store.belongs(run.report, run.sidecar)


def test_a_sidecar_of_another_report_is_not_read_as_its_own(tmp_path):
    paths = store.run_paths(tmp_path, "g", "paged_decode", "v5", "s")
    _write_run(paths, "v3")
    paths.report.write_bytes(b"NVR\x00" + b"another, longer report" * 3)  # as after a torn --force
    (run,) = store.find_runs(tmp_path)
    assert run.sidecar is None and run.variant == "v5"  # the folder's, not the sidecar's v3
    assert sweep_results.stored(tmp_path, "g", "paged_decode", "v5", "s", "profile") is None


def test_the_shipped_runs_still_load():
    runs = store.find_runs(REPO / "examples" / "h200")
    assert runs and all(r.sidecar is not None for r in runs)


def test_refusing_an_existing_run_names_the_commands_option(tmp_path):
    """F21: a sweep has --force, not --replace."""
    paths = store.run_paths(tmp_path, "g", "paged_decode", "v5", "s")
    _write_run(paths, "v5")
    with pytest.raises(UserError, match="pass --force to overwrite"):
        store.refuse_existing(paths, False, "--force")


def test_a_sweep_profiles_with_force_as_its_replace_option(tmp_path, monkeypatch):
    from paprof.measure import profile

    seen = {}

    def fake(variants, params, ncu, runs, **kwargs):
        seen.update(kwargs)
        return []

    monkeypatch.setattr(profile, "profile_variants", fake)
    run_module.profile_point(None, [], None, tmp_path, run_module.SweepSettings(mode="profile"),
                             lambda _t: None)
    assert seen["replace_option"] == "--force"


# -- F16 / F17: hostile names in CI outputs -------------------------------------------------

import xml.etree.ElementTree as ET  # noqa: E402

from paprof.gate import make_baseline  # noqa: E402
from helpers import make_rows, make_table, verdict_for  # noqa: E402

HOSTILE = "v<script>alert(1)</script><img src=x onerror=alert(2)>[a](javascript:alert(3))\x01\x08\x1b[31m]]>\ufffe"
HOSTILE_SHAPE = "batch=64,<svg onload=alert(4)>\x1b[2J"
HOSTILE_GPU = "NVIDIA <b>H200</b>\x1b]0;owned\x07"


def _hostile_verdict():
    rows = lambda **kw: make_rows(variant=HOSTILE, shape=HOSTILE_SHAPE, gpu=HOSTILE_GPU, **kw)  # noqa: E731
    return verdict_for(make_baseline(make_table(rows())), rows(dram=(57.0,)))


def test_check_markdown_escapes_hostile_names():
    from paprof.render.check_markdown import verdict_markdown

    text = verdict_markdown(_hostile_verdict())
    import re

    assert re.search(r"(?<!\\)<", text) is None  # every < escaped: no HTML at all
    assert re.search(r"(?<!\\)\]\(", text) is None  # no link
    for raw in ("\x1b", "\x01", "\x08"):
        assert raw not in text, raw
    assert "\\<script\\>" in text and "\\[a\\](javascript:alert(3))" in text


def test_junit_with_control_characters_is_well_formed(tmp_path):
    from paprof.render.junit import write_junit

    path = write_junit(_hostile_verdict(), tmp_path / "check.xml")
    root = ET.parse(path).getroot()  # well-formed
    names = [s.get("name") for s in root.iter("testsuite")]
    assert names and "<script>" in names[0] and "\x1b" not in names[0]
    raw = path.read_text(encoding="utf-8")
    assert "\x1b" not in raw and "\x01" not in raw and "\ufffe" not in raw
    from xml.dom import minidom

    minidom.parse(str(path))  # a second, strict parser agrees


def test_names_printed_to_the_terminal_hold_no_escape_characters():
    from paprof.safetext import shown

    assert shown("a\x1b[31mb\x08\x00") == "a\\x1b[31mb\\x08\\x00"
    assert shown("one\ttab") == "one\ttab"
    assert shown("two\nlines", newlines=True) == "two\nlines"
    from paprof.commands.check import _verdict_table
    from rich.console import Console

    console = Console(record=True, width=300, force_terminal=False)
    console.print(_verdict_table(_hostile_verdict())[0])
    shown = console.export_text()
    assert "\x1b" not in shown and "\\x1b" in shown


def test_an_error_line_holds_no_escape_characters(paprof_cli, tmp_path):
    result = invoke(paprof_cli, "table", str(tmp_path / "no\x1b[2Jsuch"))
    assert result.exit_code == 2 and "\x1b" not in result.output and "\\x1b" in result.output


# -- F5: two writers of one store lose nothing ---------------------------------------------

import subprocess  # noqa: E402

SHARD_WRITER = r'''
import sys, time
sys.path.insert(0, {tests!r})
from rich.console import Console
from paprof import registry
from paprof.sweep import grid as G
from paprof.sweep.run import run_sweep
from helpers import FakeRunner, GPU

class Slow(FakeRunner):
    def __call__(self, *a, **k):
        time.sleep(0.01)
        return super().__call__(*a, **k)

k, n = int(sys.argv[1]), int(sys.argv[2])
fam = registry.family("paged_decode")
variants = registry.resolve(["v5", "v6"], fam.name)
grid = G.make_grid(fam.params, ["batch=1,2,4,8,16,32", "context=1024,2048,4096,8192"], "dtype=fp16")
run_sweep(fam, variants, grid, sys.argv[3], shard=(k, n), runner=Slow(), gpu_name=GPU,
          console=Console(stderr=True, force_terminal=False))
'''


@pytest.mark.lab
def test_two_shards_at_once_on_one_store_lose_no_status(tmp_path):
    runs = tmp_path / "runs"
    script = SHARD_WRITER.format(tests=str(Path(__file__).resolve().parent))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k), "2", str(runs)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for k in (1, 2)]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    data = M.find(runs)
    assert M.status_counts(data)["done"] == 48  # 24 points x 2 variants, from both shards
    assert sorted((s["shard"], s["of"]) for s in data["shards"]) == [(1, 2), (2, 2)]


@pytest.mark.lab
def test_two_merges_into_one_out_at_once_lose_no_status(tmp_path):
    runs = tmp_path / "runs"
    script = SHARD_WRITER.format(tests=str(Path(__file__).resolve().parent))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for k in (1, 2, 3, 4):
        subprocess.run([sys.executable, "-c", script, str(k), "4", str(tmp_path / f"s{k}")],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    merge = ("import sys; from paprof.sweep.merge import merge_stores; "
             "merge_stores(sys.argv[1:-1], sys.argv[-1])")
    procs = [subprocess.Popen([sys.executable, "-c", merge, str(tmp_path / a), str(tmp_path / b),
                               str(runs)], env=env, stderr=subprocess.PIPE)
             for a, b in (("s1", "s2"), ("s3", "s4"))]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    assert M.status_counts(M.find(runs))["done"] == 48


def test_the_store_lock_is_reentrant_and_hidden(tmp_path):
    with store.locked(tmp_path):
        with store.locked(tmp_path):
            pass
    assert (tmp_path / store.LOCK_NAME).is_file() and store.find_runs(tmp_path) == []


# -- F4: a manifest of the wrong structure is one line, and merge does not copy it on -----

def _manifest(tmp_path, **change):
    from paprof.sweep import grid as G

    fam = registry.family("paged_decode")
    grid = G.make_grid(fam.params, ["batch=1,2"], "dtype=fp16")
    defn = M.definition(fam.name, ["v5"], grid, "bench")
    data = M.new("s", defn, grid, (1, 1))
    data.update(change)
    src = tmp_path / "src"
    (src / M.FOLDER).mkdir(parents=True)
    (src / M.FOLDER / "s.json").write_text(json.dumps(data))
    return src, data


@pytest.mark.parametrize("change", [
    {"points": None}, {"points": "abc"}, {"shards": "1/2"}, {"gpus": [1]},
    {"points": [{"index": 0, "variants": {}}]},  # cut short: 1 of 2 points
    {"points": [{"index": 0, "variants": {"v5": {"status": "great"}}}, {"index": 1, "variants": {}}]},
    {"axes": "batch"},
])
@pytest.mark.lab
def test_a_manifest_of_the_wrong_structure_is_one_line(paprof_cli, tmp_path, change):
    src, _data = _manifest(tmp_path, **change)
    if change.get("points") is None:
        raw = json.loads((src / M.FOLDER / "s.json").read_text())
        del raw["points"]
        (src / M.FOLDER / "s.json").write_text(json.dumps(raw))
    with pytest.raises(UserError, match="damaged sweep manifest"):
        M.find(src)
    result = invoke(paprof_cli, "merge", str(src), "--out", str(tmp_path / "out"))
    one_line_exit_2(result)
    assert not (tmp_path / "out" / M.FOLDER / "s.json").exists()


@pytest.mark.lab
def test_a_whole_manifest_still_loads(tmp_path):
    src, data = _manifest(tmp_path)
    assert M.find(src)["points"] == data["points"]


# -- F23: a sweep error or Ctrl-C is one line ------------------------------------------------

@pytest.mark.lab
def test_a_sweep_error_is_one_line(paprof_cli, tmp_path, monkeypatch):
    from paprof.errors import UserError as UE

    def broken(*_a, **_k):
        raise UE("no GPU here")

    monkeypatch.setitem(run_module.RUNNERS, "bench", broken)
    result = invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "r"))
    one_line_exit_2(result)
    assert "no GPU here" in result.output and "stopped at batch 1" in result.output


@pytest.mark.lab
def test_a_sweep_interrupt_is_one_line(paprof_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(run_module.RUNNERS, "bench", FakeRunner(interrupt_at=2))
    result = CliRunner().invoke(paprof_cli, [*SWEEP, "--runs", str(tmp_path / "r")])
    assert result.exit_code == 130
    lines = [l for l in result.output.strip().splitlines() if not l.startswith("[")]  # progress
    assert len(lines) == 1 and lines[0].startswith("paprof: interrupted (stopped at batch 2")


# -- F13 / F14 / F15: an output never overlaps an input ------------------------------------

def test_merge_refuses_a_source_inside_the_output(tmp_path):
    from paprof.sweep.merge import merge_stores

    outer = tmp_path / "outer"
    (outer / "s2").mkdir(parents=True)
    (tmp_path / "s1").mkdir()
    with pytest.raises(UserError, match="lies inside --out"):
        merge_stores([tmp_path / "s1", outer / "s2"], outer)


@pytest.mark.lab
def test_sweep_report_never_overwrites_its_manifest(paprof_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(run_module.RUNNERS, "bench", FakeRunner())
    runs = tmp_path / "r"
    assert invoke(paprof_cli, *SWEEP, "--runs", str(runs), "--name", "n").exit_code == 0
    manifest = runs / M.FOLDER / "n.json"
    before = manifest.read_bytes()
    result = invoke(paprof_cli, "sweep-report", "--runs", str(runs), "--out", str(tmp_path / "s.html"),
                    "--json", str(manifest), "--force")
    one_line_exit_2(result)
    assert "inputs" in result.output and manifest.read_bytes() == before


def test_check_refuses_one_file_for_junit_and_markdown(paprof_cli, tmp_path):
    same = tmp_path / "x"
    result = invoke(paprof_cli, "check", "--baseline", str(tmp_path / "none.json"),
                    "--junit", str(same), "--markdown", str(same))
    one_line_exit_2(result)
    assert "same file" in result.output and not same.exists()


# -- F8: a sidecar of the wrong types is one line -------------------------------------------

import shutil  # noqa: E402


@pytest.mark.parametrize("change", [{"created": 5}, {"gpu_slug": ["a"]}, {"read_ceiling_tbs": "fast"},
                                    {"params": "batch=1"}, {"duration_us_event": float("nan")}])
def test_a_sidecar_of_the_wrong_types_is_one_line(paprof_cli, tmp_path, change):
    folder = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / "v5"
    folder.mkdir(parents=True)
    shutil.copy(V5_REPORT, folder)
    side = json.loads(V5_REPORT.with_suffix(".json").read_text())
    side.update(change)
    (folder / V5_REPORT.with_suffix(".json").name).write_text(json.dumps(side))
    other = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / "v6"
    other.mkdir(parents=True)
    result = invoke(paprof_cli, "table", str(tmp_path / "runs"))
    one_line_exit_2(result)
    assert "damaged record" in result.output and next(iter(change)) in result.output


def test_a_bench_record_of_the_wrong_types_is_one_line(tmp_path):
    path = tmp_path / "x.bench.json"
    path.write_text(json.dumps({"kind": sweep_results.BENCH_KIND, "median_us": "fast"}))
    with pytest.raises(UserError, match="'median_us' must be a finite number"):
        sweep_results.read_bench(path)


# -- F7: a full or read-only disk, or a name too long: one line, nothing half-written -------

import errno  # noqa: E402


@pytest.mark.lab
def test_merge_on_a_full_disk_is_one_line_and_leaves_no_temp(paprof_cli, tmp_path, monkeypatch):
    from paprof.sweep import merge as merge_module

    monkeypatch.setitem(run_module.RUNNERS, "bench", FakeRunner())
    assert invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "src")).exit_code == 0
    real = merge_module.store_files.copy

    def full(src, fd, *a, **k):
        os.write(fd, b"half")  # a partial copy, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device", str(src))

    monkeypatch.setattr(merge_module.store_files, "copy", full)
    out = tmp_path / "out"
    result = invoke(paprof_cli, "merge", str(tmp_path / "src"), "--out", str(out))
    one_line_exit_2(result)
    assert "No space left on device" in result.output
    assert not [p for p in out.rglob("*") if p.is_file() and ".tmp-" in p.name]
    monkeypatch.setattr(merge_module.store_files, "copy", real)


@pytest.mark.lab
def test_an_environment_oserror_anywhere_is_one_line(paprof_cli, tmp_path, monkeypatch):
    def readonly(*_a, **_k):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "x"))

    monkeypatch.setitem(run_module.RUNNERS, "bench", readonly)
    result = invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "r"))
    assert result.exit_code == 2, result.output
    lines = [l for l in result.output.splitlines() if l.startswith("paprof")]
    assert len(lines) == 1 and lines[0].startswith(f"paprof: error: cannot write {tmp_path / 'x'}: Read-only file system")


def test_a_300_character_name_is_one_line(paprof_cli, tmp_path):
    result = invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "r"), "--name", "n" * 300)
    one_line_exit_2(result)


def test_the_cli_turns_an_environment_oserror_into_one_line(paprof_cli, tmp_path, monkeypatch):
    from paprof.sweep import merge as merge_module

    def denied(*_a, **_k):
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere")

    monkeypatch.setattr(merge_module, "merge_stores", denied)
    result = invoke(paprof_cli, "merge", str(tmp_path), "--out", str(tmp_path / "o"))
    one_line_exit_2(result)
    assert "cannot write /somewhere: Permission denied" in result.output

    def bug(*_a, **_k):
        raise FileNotFoundError(errno.ENOENT, "No such file", "/x")

    monkeypatch.setattr(merge_module, "merge_stores", bug)
    with pytest.raises(FileNotFoundError):  # not the machine's state: a bug keeps its traceback
        invoke(paprof_cli, "merge", str(tmp_path), "--out", str(tmp_path / "o"))


# -- F10: a CuPy that cannot start is the environment (exit 2), not a failed verification ----

@pytest.fixture
def broken_cupy(tmp_path, monkeypatch):
    from paprof.measure.kernels import gpu

    pkg = tmp_path / "fakecupy" / "cupy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        'raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "fakecupy"))
    for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
        monkeypatch.delitem(sys.modules, name)
    gpu.cupy.cache_clear()
    yield
    gpu.cupy.cache_clear()


def test_a_cupy_that_cannot_start_is_a_user_error(broken_cupy):
    from paprof.measure.kernels import gpu

    with pytest.raises(UserError, match="driver version is insufficient"):
        gpu.cupy()


@pytest.mark.lab
def test_a_sweep_on_a_broken_cupy_exits_2_and_records_no_failure(paprof_cli, tmp_path, broken_cupy,
                                                                 monkeypatch):
    monkeypatch.setattr(run_module, "visible_gpu", lambda environ=None: "NVIDIA H200")
    runs = tmp_path / "r"
    result = invoke(paprof_cli, *SWEEP, "--runs", str(runs))
    one_line_exit_2(result)
    assert "insufficient" in result.output
    assert M.status_counts(M.find(runs))["failed"] == 0


@pytest.mark.lab
def test_a_launcher_traceback_is_not_a_failed_verification(tmp_path, monkeypatch):
    from paprof.measure import profile
    from paprof.measure.argv import NcuSettings

    monkeypatch.setattr(profile, "run_launcher", lambda argv, env: profile.LauncherOutcome(
        1, "Traceback (most recent call last):\n  ...\nRuntimeError: driver version is insufficient"))
    variant = registry.get("v5")
    params = registry.family("paged_decode").parse("batch=1")
    with pytest.raises(UserError, match="insufficient") as err:
        profile.verify(variant, params, NcuSettings(), tmp_path / "r.json", {})
    assert not isinstance(err.value, profile.VerificationError)


# -- F22: an interrupt during merge leaves no partial temp file in --out --------------------

@pytest.mark.lab
def test_an_interrupt_during_a_merge_copy_leaves_no_temp(paprof_cli, tmp_path, monkeypatch):
    from paprof.sweep import merge as merge_module

    monkeypatch.setitem(run_module.RUNNERS, "bench", FakeRunner())
    assert invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "src")).exit_code == 0

    def interrupted(src, fd, *a, **k):
        os.write(fd, b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(merge_module.store_files, "copy", interrupted)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        merge_module.merge_stores([tmp_path / "src"], out)
    assert not [p for p in out.rglob("*") if p.is_file() and ".tmp-" in p.name]


# -- F22: SIGTERM while workers run: one line, exit 143, no worker tracebacks ----------------

import signal  # noqa: E402
import time  # noqa: E402

TERM_SCRIPT = r'''
import sys, time
from paprof import parallel

def slow(x):
    if x == 0:  # a worker is at work: the pool, and its SIGTERM handler, are in place
        print("working", flush=True)
    time.sleep(0.2)
    return x

if __name__ == "__main__":
    with parallel.ordered_map(slow, range(10000), 2) as results:
        for r in results:
            pass
'''


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX")
def test_sigterm_while_workers_run_is_one_line(tmp_path):
    script = tmp_path / "term.py"
    script.write_text(TERM_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout.readline().strip() == b"working"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.decode().strip().splitlines() == ["paprof: terminated"], err.decode()


# -- F18 / F19 / F20: impossible baselines refused, gates that cannot fail say so ----------

from paprof import gate  # noqa: E402


def _baseline_dict():
    data = make_baseline(make_table(make_rows(duration=(1000.0, 1010.0, 1020.0),
                                              dram=(80.0, 80.5, 81.0)))).to_dict()
    return data


@pytest.mark.parametrize("metric, change, message", [
    ("duration_us", {"value": 1e300, "samples": []}, "impossible"),
    ("duration_us", {"spread": 1e300}, "half-range"),
    ("duration_us", {"n": 3, "samples": [1000.0] * 20}, "n is 3 but 20 samples"),
    ("duration_us", {"value": 5.0}, "not the median"),
    ("duration_us", {"value": 0.0, "spread": 0.0, "samples": [0.0, 0.0, 0.0]}, "impossible"),
    ("duration_us", {"value": int("9" * 400), "samples": []}, "finite number"),
    ("dram_throughput_pct", {"spread": 70.0, "samples": []}, "at most 50"),
])
def test_an_impossible_baseline_is_refused(tmp_path, metric, change, message):
    data = _baseline_dict()
    data["entries"][0]["metrics"][metric].update(change)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=message):
        gate.load_baseline(path)


def test_the_untouched_baseline_still_loads(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_baseline_dict()))
    assert gate.load_baseline(path).entries


@pytest.mark.parametrize("text", ["5%%", "1e300%", "dram_throughput_pct=5%%", "inf", "nan%"])
def test_a_tolerance_that_is_no_number_or_lets_anything_pass_is_refused(text):
    with pytest.raises(UserError):
        gate.parse_tolerance(text)


def test_a_gate_that_cannot_fail_says_so():
    base = make_baseline(make_table(make_rows()))
    for tol in ("dram_throughput_pct=100%", "duration_us=1e300", "dram_bytes=5000%"):
        metric, t = gate.parse_tolerance(tol)
        verdict = gate.compare_to_baseline(base, make_table(make_rows()),
                                              gate.Settings(tolerances={metric: t}))
        (r,) = [r for r in verdict.results if r.metric == metric]
        if tol != "dram_bytes=5000%":
            assert r.cannot_fail, tol
            assert any("cannot fail" in n for n in verdict.notes), tol
        else:
            assert not r.cannot_fail  # fiftyfold: a regression can still exceed it


@pytest.mark.lab
def test_a_family_tolerance_of_inf_is_refused():
    fam = registry.family("paged_decode")
    import dataclasses

    for bad in (float("inf"), float("nan"), -1e-3):
        broken = dataclasses.replace(fam, tolerance=bad)
        with pytest.raises(UserError, match="finite number, 0 or more"):
            broken.tolerance_for(fam.params())
    exact = dataclasses.replace(fam, tolerance=0.0)  # an exact answer (a transpose) is fine
    assert exact.tolerance_for(fam.params()) == 0.0


# -- the store under concurrent writers and random kills: nothing mixed ----------------------

import random  # noqa: E402

KILLED_WRITER = r'''
import os, random, sys, json
from pathlib import Path
from paprof.read import store
paths = store.run_paths(sys.argv[1], "g", "paged_decode", "v5", "s")
rng = random.Random(int(sys.argv[2]))
for i in range(10**6):
    tag = f"{sys.argv[2]}-{i}"
    with store.writing(paths, replace=True) as pending:
        body = (tag + "|") * rng.choice([3, 3, 3, 4])  # equal sizes happen: not relied on
        pending.report.write_text(body)
        store.write_sidecar(pending.sidecar, {"variant": "v5", "tag": tag})
    if i == 0:
        print("wrote", flush=True)
'''


def test_concurrent_writers_killed_at_random_never_leave_a_mixed_record(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(27)
    for _round in range(6):
        procs = [subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(k)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                 for k in range(3)]
        for p in procs:  # each has written a record: the kills below land mid-writing
            assert p.stdout.readline() == b"wrote\n"
        time.sleep(rng.random() * 0.4)
        for p in procs:
            time.sleep(rng.random() * 0.05)
            p.kill()
            p.wait()
            p.stdout.close()
        for run in store.find_runs(tmp_path):
            assert run.sidecar is not None, "a report without its sidecar"
            body = run.report.read_text()
            assert body.split("|")[0] == run.sidecar["tag"], "a report beside another's sidecar"


@pytest.mark.parametrize("bad", ["../x", "a/b", ".", ".hidden", "x.tmp-1", "n" * 300])
def test_run_name_of_a_command_is_one_safe_component(paprof_cli, tmp_path, bad):
    result = invoke(paprof_cli, "run", "--cmd", "true", "--nvtx-range", "r", "--name", bad,
                    "--runs", str(tmp_path / "r"))
    one_line_exit_2(result)
    assert "--name" in result.output and not (tmp_path / "r").exists()
