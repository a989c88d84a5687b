"""Ctrl-C (SIGINT) at any moment: exit 130, one line on stderr, nothing half-written.

Real processes (``python -m paprof`` and the console script's ``paprof.entry:main``)
that get SIGINT at a chosen point: an import hook or a patched call sends it to the process
itself, or, for a real ``python -m paprof compare``, the child says it has reached a moment
and the test sends it then (no sleeps: the moments are the same on a loaded machine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import select
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.cli import main
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
RUNS = recorded("h200")
V2 = RUNS / "nvidia-h200" / "paged_decode" / "v2" / "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
V3 = RUNS / "nvidia-h200" / "paged_decode" / "v3" / "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"
ONE_LINE = "paprof: interrupted\n"

# A suite started as a background job (``cmd &`` in a script) hands its children SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler: the children here get the
# disposition a user's shell gives, the default.
_PRELUDE = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
def sigint():
    os.kill(os.getpid(), signal.SIGINT)
    signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a bytecode boundary: the handler runs
"""


def _sigint_default() -> None:
    """In a child before exec: SIGINT at its default, so that Python installs its handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _python(code: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", _PRELUDE + code, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _entry(before: str) -> str:
    """Code that runs ``before``, then the console script's entry point on sys.argv."""
    return textwrap.dedent(before) + "\nfrom paprof.entry import main\nsys.exit(main(sys.argv[1:]))\n"


@pytest.mark.parametrize("module", ["click", "pandas", "matplotlib", "jinja2"])
def test_interrupt_during_an_import(tmp_path, module):
    hook = f"""
    class Hook:
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                sigint()
            return None
    sys.meta_path.insert(0, Hook())
    """
    out = tmp_path / "r.html"
    done = _python(_entry(hook), "compare", str(V2), str(V3), "--out", str(out), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, ONE_LINE), done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("call", ["mkstemp", "fsync", "replace"])
def test_interrupt_while_writing_finishes_the_file_first(tmp_path, call):
    patch = f"""
    import paprof.outputs as outputs
    where = outputs.tempfile if {call!r} == "mkstemp" else outputs.os
    real = getattr(where, {call!r})
    def interrupted(*args, **kwargs):
        sigint()
        return real(*args, **kwargs)
    setattr(where, {call!r}, interrupted)
    """
    out = tmp_path / "t.csv"
    args = ("table", str(V3), "--format", "csv", "--out")
    done = _python(_entry(patch), *args, str(out), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, ONE_LINE), done.stderr
    whole = _python(_entry(""), *args, str(tmp_path / "whole.csv"), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert out.read_text() == (tmp_path / "whole.csv").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "whole.csv"]


# The child's side of the moments below: a sitecustomize the test puts first on the child's
# PYTHONPATH (so ``python -m paprof`` itself is run, unchanged). In the paprof process (not
# its workers), the first time it reaches the moment $PAPROF_TEST_STOP_AT names (``import:M``,
# just before module M is imported; ``open:D``, as it opens a file in folder D) it says so on
# the pipe $PAPROF_TEST_STOP_FD and waits for the parent's SIGINT; it then hands the signal
# to the handler that was in place, as if the SIGINT had come in at that very point.
_STOP_SHIM = """
import os, signal, sys, threading, time

_AT = os.environ["PAPROF_TEST_STOP_AT"]
_FD = int(os.environ["PAPROF_TEST_STOP_FD"])
_PID = int(os.environ.setdefault("PAPROF_TEST_STOP_PID", str(os.getpid())))
_done = []


def _stop_here():
    if _done or os.getpid() != _PID or threading.current_thread() is not threading.main_thread():
        return
    _done.append(True)
    got = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(frame))
    os.write(_FD, (_AT + "\\n").encode())
    deadline = time.monotonic() + 300  # the test's own timeout ends it first
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)  # a SIGINT cuts it short
    signal.signal(signal.SIGINT, previous)
    if got and callable(previous):
        previous(signal.SIGINT, got[0])
    elif got and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


class _Imports:
    def find_spec(self, name, path=None, target=None):
        if _AT == "import:" + name:
            _stop_here()
        return None


def _opens(event, args):
    if (event == "open" and isinstance(args[0], str)
            and _AT == "open:" + os.path.dirname(os.path.abspath(args[0]))):
        _stop_here()


sys.meta_path.insert(0, _Imports())
sys.addaudithook(_opens)
"""


def _stop_at(moment: str, tmp_path: Path) -> tuple[dict, int, int]:
    """The environment of a child that stops at ``moment`` (see ``_STOP_SHIM``), and the
    two ends of the pipe it reports on."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(_STOP_SHIM)
    read, write = os.pipe()
    path = [str(shim), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join(path),
           "PAPROF_TEST_STOP_AT": moment, "PAPROF_TEST_STOP_FD": str(write)}
    env.pop("PAPROF_TEST_STOP_PID", None)
    return env, read, write


def _reached(read: int, proc: subprocess.Popen) -> str:
    """The moment the child reports on ``read``; fails if it exits first."""
    ready, _, _ = select.select([read], [], [], 240)
    said = os.read(read, 200).decode() if ready else ""
    if not said:  # EOF: it ended (or hung) without reaching the moment
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the child never reached its moment (exit {proc.returncode}): {err}")
    return said.strip()


# From the first import of the command line to the write of the report: the imports the
# command makes on the way (matplotlib's interrupted in CI once), then the write itself.
MOMENTS = ["import:click", "import:paprof.render.html", "import:pandas",
           "import:paprof.model.decompose", "import:matplotlib", "write"]


@pytest.mark.parametrize("moment", MOMENTS)
def test_interrupt_at_several_moments_of_python_m_paprof(tmp_path, moment):
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "r.html"
    stop = f"open:{folder}" if moment == "write" else moment
    env, read, write = _stop_at(stop, tmp_path)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "paprof", "compare", "baseline", "v1", "v2", "v3", "v4",
             "handbook", "v5", "v6", "--runs", str(RUNS), "--out", str(out)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            pass_fds=(write,), preexec_fn=_sigint_default)
        os.close(write)
        assert _reached(read, proc) == stop
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=240)
    finally:
        os.close(read)
    assert (proc.returncode, err) == (130, ONE_LINE), f"SIGINT at {moment}: {err}"
    if moment == "write":  # the write is finished first, never left partial
        assert out.read_text().rstrip().endswith("</html>")
    else:
        assert not out.exists()
    assert [p.name for p in folder.iterdir()] == ([out.name] if moment == "write" else [])


def test_interrupt_in_process_is_one_line_not_aborted(monkeypatch):
    from paprof.commands import list_variants

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(list_variants.registry, "discover", stop)
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 130
    assert result.stderr == ONE_LINE and "Aborted" not in result.output


def test_an_import_a_ctrl_c_broke_is_an_interrupt_not_a_traceback(tmp_path):
    # matplotlib's ft2font interrupted while it initialises raises ImportError from the
    # KeyboardInterrupt (seen in CI at 0.6 s into a compare): one line, 130, no abort
    done = _python(_entry("""
        import paprof.cli
        def broken(*args, **kwargs):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as err:
                raise ImportError("initialization failed") from err
        paprof.cli.main.main = broken
    """), "list", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, ONE_LINE)
    # any other exception is still a bug, shown as one
    other = _python(_entry("""
        import paprof.cli
        def broken(*args, **kwargs):
            raise ImportError("initialization failed")
        paprof.cli.main.main = broken
    """), "list", cwd=tmp_path)
    assert other.returncode == 1 and "ImportError: initialization failed" in other.stderr


# A Ctrl-C whose KeyboardInterrupt is raised inside a weakref callback or a __del__ (the
# collector runs them at any moment; matplotlib's and pandas' caches are
# WeakValueDictionaries) is swallowed by Python ("Exception ignored in ..."): compare went
# on, wrote its reports and exited 0. The child below hands itself SIGINT inside such a
# callback at several points of a compare.
_SWALLOWED = """
import weakref
import {module} as where

class Box:
    def __del__(self):
        if {how!r} == "del":
            sigint()

def _callback(ref):
    sigint()

_real = where.{name}

def _patched(*args, **kwargs):
    box = Box()
    keep = weakref.ref(box, _callback if {how!r} == "weakref" else None)
    del box  # the callback (or __del__) runs now, and the handler inside it
    return _real(*args, **kwargs)

where.{name} = _patched
"""


@pytest.mark.parametrize("module, name, how", [
    ("paprof.model.analysis", "analyse", "weakref"),
    ("paprof.render.context", "build_context", "del"),
    ("paprof.render.html", "render_html", "weakref"),
])
def test_a_ctrl_c_swallowed_in_a_callback_still_ends_compare(tmp_path, module, name, how):
    out = tmp_path / "r.html"
    done = _python(_entry(_SWALLOWED.format(module=module, name=name, how=how)),
                   "compare", "v2", "v3", "--runs", str(RUNS), "--out", str(out),
                   "--markdown", str(tmp_path / "r.md"), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, ONE_LINE)
    assert done.stdout == ""
    assert not out.exists() and not (tmp_path / "r.md").exists()


def test_after_a_swallowed_ctrl_c_is_raised_again_a_cleanup_may_still_write(tmp_path):
    """The swallowed Ctrl-C comes back as a KeyboardInterrupt in the code it interrupted;
    a writer is refused only until then (a sweep saves its manifest when interrupted)."""
    done = _python(textwrap.dedent(f"""
        import time, weakref
        from pathlib import Path
        from paprof import interrupts, outputs
        interrupts.install()

        class Box:
            pass

        box = Box()
        keep = weakref.ref(box, lambda ref: sigint())
        try:
            del box  # the Ctrl-C is swallowed in the callback
            try:
                outputs.write(Path({str(tmp_path / "refused")!r}), "x")
            except KeyboardInterrupt:
                print("refused")
            while True:
                time.sleep(0.001)  # raised again here
        except KeyboardInterrupt:
            outputs.write(Path({str(tmp_path / "saved")!r}), "manifest")
        print("saved")
    """), cwd=tmp_path)
    assert done.stdout.split() in (["refused", "saved"], ["saved"]), done.stderr
    assert (tmp_path / "saved").read_text() == "manifest" and done.stderr == ""
    assert not (tmp_path / "refused").exists()
