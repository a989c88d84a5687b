"""``paprof.outputs`` and the commands that write through it: only regular files are
replaced, never an input, never partially; failures are one line and exit 2.

Everything here works as root (which ignores file modes): failures come from
non-regular files, paths under a regular file, and monkeypatched system calls.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof import outputs
from paprof.cli import main
from paprof.errors import UserError
from helpers import recorded

RUNS = recorded("h200") / "nvidia-h200" / "paged_decode"
V2 = RUNS / "v2" / "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
V3 = RUNS / "v3" / "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, code: int = 2) -> str:
    """The single stderr line of a failed command (asserting the exit code)."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("paprof: error: "), result.stderr
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def no_hang():
    """Fail instead of blocking forever (a FIFO opened for reading blocks)."""
    def alarm(signum, frame):
        raise AssertionError("blocked on the target")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def guarded(tmp_path, monkeypatch):
    """Renames outside ``tmp_path`` fail the test instead of replacing, say, /dev/null
    (which as root would break the machine if the code under test regressed)."""
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if not Path(os.path.abspath(dst)).is_relative_to(tmp_path):
            raise AssertionError(f"tried to replace {dst}")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


# -- the module --------------------------------------------------------------------------


def test_write_replaces_atomically_with_the_umask_mode(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    outputs.write(target, "new")
    assert target.read_text() == "new"
    assert (target.stat().st_mode & 0o777) == 0o666 & ~outputs._umask()
    assert leftovers(tmp_path) == []


def test_each_write_gets_its_own_temporary_name(tmp_path):
    seen = []
    for _ in range(3):
        outputs.write(tmp_path / "b.json", lambda tmp: (seen.append(tmp), tmp.write_text("{}")))
    assert len(set(seen)) == 3 and all(p.parent == tmp_path for p in seen)


@pytest.mark.parametrize("kind", ["device", "symlink", "fifo", "folder"])
@pytest.mark.parametrize("force", [False, True])
def test_only_a_regular_file_is_replaced(tmp_path, kind, force, no_hang, guarded):
    if kind == "device":
        target = Path("/dev/null")
    elif kind == "symlink":
        (tmp_path / "real.html").write_text("mine")
        target = tmp_path / "link.html"
        target.symlink_to(tmp_path / "real.html")
    elif kind == "fifo":
        target = tmp_path / "pipe.html"
        os.mkfifo(target)
    else:
        target = tmp_path / "dir.html"
        target.mkdir()
    before = os.lstat(target).st_mode
    with pytest.raises(UserError, match="cannot write"):
        outputs.check_target(target, force=force)
    assert os.lstat(target).st_mode == before


def test_write_refuses_a_target_that_became_a_fifo(tmp_path, no_hang):
    target = tmp_path / "pipe.html"
    os.mkfifo(target)
    with pytest.raises(UserError, match="not a regular file"):
        outputs.write(target, "x")
    assert leftovers(tmp_path) == []


def test_an_input_is_never_replaced_even_with_force(tmp_path):
    report = tmp_path / "r.ncu-rep"
    report.write_bytes(b"NVR\x00data")
    with pytest.raises(UserError, match="one of this command's inputs"):
        outputs.check_target(report, force=True, inputs=[report])
    os.link(report, tmp_path / "hard.csv")  # another name of the same file
    with pytest.raises(UserError, match="inputs"):
        outputs.check_target(tmp_path / "hard.csv", force=True, inputs=[report])


def test_existing_files_need_force_unless_empty_or_marked(tmp_path):
    target = tmp_path / "t.csv"
    assert outputs.check_target(target) is False
    target.write_text("")
    assert outputs.check_target(target) is True
    target.write_text("someone's data")
    with pytest.raises(UserError, match="exists and is not a table; .*--force"):
        outputs.check_target(target, what="a table")
    assert outputs.check_target(target, force=True) is True
    target.write_text("<!-- mark -->")
    assert outputs.check_target(target, mark="<!-- mark") is True


def test_a_missing_folder_or_a_path_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="does not exist"):
        outputs.check_target(tmp_path / "nowhere" / "r.html")
    with pytest.raises(UserError, match="cannot write"):
        outputs.write(tmp_path / "file" / "r.html", "x", parents=True)
    outputs.write(tmp_path / "new" / "r.html", "x", parents=True)
    assert (tmp_path / "new" / "r.html").read_text() == "x"


@pytest.mark.parametrize("call, code", [("fsync", errno.ENOSPC), ("replace", errno.EROFS),
                                        ("mkstemp", errno.EACCES)])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, call, code):
    target = tmp_path / "out.md"
    target.write_text("old")

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    where = outputs.tempfile if call == "mkstemp" else outputs.os
    monkeypatch.setattr(where, call, fail)
    with pytest.raises(UserError, match=f"cannot write {target}: {os.strerror(code)}"):
        outputs.write(target, "new")
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_an_interrupt_mid_write_removes_the_temporary(tmp_path):
    target = tmp_path / "out.parquet"

    def half(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        outputs.write(target, half)
    assert not target.exists() and leftovers(tmp_path) == []


# -- compare --out / --markdown ------------------------------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_compare_refuses_a_device_symlink_or_fifo(tmp_path, force, no_hang, guarded):
    (tmp_path / "real.html").write_text("mine")
    (tmp_path / "link.html").symlink_to(tmp_path / "real.html")
    os.mkfifo(tmp_path / "pipe.html")
    for target in (Path("/dev/null"), tmp_path / "link.html", tmp_path / "pipe.html"):
        before = os.lstat(target).st_mode
        line = one_line_error(invoke("compare", V2, V3, "--out", target, *force))
        assert str(target) in line
        assert os.lstat(target).st_mode == before
    assert (tmp_path / "real.html").read_text() == "mine"


def test_compare_never_writes_over_its_inputs(tmp_path):
    for name in ("v2.ncu-rep", "v2.json"):
        (tmp_path / name).write_bytes((V2.parent / name.replace("v2", V2.stem)).read_bytes())
    report = tmp_path / "v2.ncu-rep"
    before = report.read_bytes()
    for option in ("--out", "--markdown"):
        for target in (report, tmp_path / "v2.json"):
            line = one_line_error(invoke("compare", report, V3, option, target, "--force"))
            assert "inputs" in line
    assert report.read_bytes() == before


def test_compare_on_a_read_only_file_system_is_one_line(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(outputs.tempfile, "mkstemp", read_only)
    line = one_line_error(invoke("compare", V2, V3, "--out", tmp_path / "r.html"))
    assert "Read-only file system" in line
    assert list(tmp_path.iterdir()) == []


# -- table --out ---------------------------------------------------------------------------


@pytest.fixture
def shipped_copy(tmp_path):
    """The shipped v3 report and its sidecar, copied (tests never touch the originals)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for suffix in (".ncu-rep", ".json"):
        (folder / f"v3{suffix}").write_bytes(V3.with_suffix(suffix).read_bytes())
    return folder / "v3.ncu-rep"


@pytest.mark.parametrize("fmt", ["csv", "json", "text", "parquet"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_table_never_writes_over_a_report_it_reads(shipped_copy, fmt, force):
    before = shipped_copy.read_bytes()
    for args in ([shipped_copy], [shipped_copy.parent]):
        for target in (shipped_copy, shipped_copy.with_suffix(".json")):
            line = one_line_error(invoke("table", *args, "--format", fmt, "--out", target, *force))
            assert "inputs" in line
    assert shipped_copy.read_bytes() == before
    assert leftovers(shipped_copy.parent) == []


def test_table_keeps_an_existing_file_unless_force(shipped_copy, tmp_path):
    out = tmp_path / "t.csv"
    out.write_text("my spreadsheet\n")
    line = one_line_error(invoke("table", shipped_copy, "--format", "csv", "--out", out))
    assert "--force" in line and out.read_text() == "my spreadsheet\n"
    result = invoke("table", shipped_copy, "--format", "csv", "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("variant,") and leftovers(tmp_path) == []


def test_table_disk_full_is_one_line_and_no_file(shipped_copy, tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", full)
    out = tmp_path / "t.json"
    line = one_line_error(invoke("table", shipped_copy, "--format", "json", "--out", out))
    assert "No space left on device" in line
    assert not out.exists() and leftovers(tmp_path) == []


# -- every command, pointed at /dev/full -----------------------------------------------------


@pytest.fixture
def baseline_json(tmp_path, shipped_copy):
    path = tmp_path / "b.json"
    result = invoke("baseline", "update", "--runs", shipped_copy.parent, "--out", path)
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("args", [
    ["table", "{report}", "--format", "csv", "--out", "/dev/full", "--force"],
    ["compare", V2, V3, "--out", "/dev/full", "--force"],
    ["compare", V2, V3, "--markdown", "/dev/full", "--force"],
    ["baseline", "update", "--runs", "{runs}", "--out", "/dev/full", "--force"],
    ["check", "--baseline", "{baseline}", "--runs", "{runs}", "--junit", "/dev/full", "--force"],
    ["check", "--baseline", "{baseline}", "--runs", "{runs}", "--markdown", "/dev/full"],
])
def test_every_output_refuses_a_device(args, shipped_copy, baseline_json, guarded):
    fill = {"report": shipped_copy, "runs": shipped_copy.parent, "baseline": baseline_json}
    args = [str(a).format(**fill) for a in args]
    line = one_line_error(invoke(*args))
    assert "/dev/full" in line and "not a regular file" in line
    assert Path("/dev/full").is_char_device()


def test_jsonsafe_dumps_writes_json_dumps_text():
    import json

    from paprof import jsonsafe

    shapes = [{}, [], {"a": []}, {"a": {}}, [[]], [{}], 1.5, "x", None, (1, 2),
              {"a": [1, 2, {"b": None}], "c": "\u00e9\u2028\"\\", "d": (1, 2), "e": {"f": 0.1}},
              [1, [2, [3, []]]], [True, False, 1e300, -0.0, 10**30],
              {"x": float("nan")}, {1: 2}, {"a": {1: 2}}, {"a": {2.5: True}}, [object()]]
    for value in shapes:
        for indent in (1, 2, 4):
            for allow_nan in (True, False):
                def made(dumps):
                    try:
                        return dumps()
                    except (TypeError, ValueError) as err:
                        return type(err).__name__ + str(err)
                assert made(lambda: jsonsafe.dumps(value, indent, allow_nan=allow_nan)) == made(
                    lambda: json.dumps(value, indent=indent, allow_nan=allow_nan)), (value, indent)
