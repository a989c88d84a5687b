"""``paprof.profile`` (paprof/profile_api.py, paprof/callable_family.py): a notebook's
callables to a ``Report``, with the fake ncu and launcher here (the whole path but the GPU),
the generated module imported by another process, the one-line errors; the ``gpu`` test
profiles docs/api.md's Triton cell and a torch op for real."""

from __future__ import annotations

import itertools
import json
import linecache
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import paprof
import paprof.callable_family  # used as paprof.<module> below, whatever ran before
import paprof.notebook
from paprof.errors import UserError, VerificationError
from paprof.measure import profile as profiler

from helpers import shipped

ROOT = Path(__file__).resolve().parents[1]
_CELLS = itertools.count(1)


def notebook(source: str, namespace: dict | None = None) -> dict:
    """Run ``source`` as a notebook cell does: in ``__main__``'s namespace (a new one, or
    an earlier cell's), its text held by ``linecache`` under a cell's name (IPython's
    way), not in any file."""
    name = f"<ipython-input-{next(_CELLS)}-paprof>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    exec(compile(source, name, "exec"), namespace)
    return namespace


def docs_cell() -> str:
    """docs/api.md's notebook cell of ``paprof.profile``."""
    page = (ROOT / "docs" / "api.md").read_text()
    (cell,) = [b for b in re.findall(r"```py\n(.*?)```", page, flags=re.S) if "paprof.profile(" in b]
    return cell


class _JIT:
    """What ``@triton.jit`` makes, as far as paprof sees it: an object holding ``fn``."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return self.fn


def _stand_ins(monkeypatch) -> None:
    """``torch``, ``triton`` and ``triton.language`` as far as the cell needs them to be
    defined (nothing of theirs runs: the launcher is the fake one)."""
    torch = types.ModuleType("torch")
    torch.randn = torch.empty_like = lambda *a, **k: None
    triton = types.ModuleType("triton")
    triton.jit, triton.cdiv = _JIT, lambda a, b: -(-a // b)
    language = types.ModuleType("triton.language")
    language.constexpr = int
    triton.language = language
    for name, module in (("torch", torch), ("triton", triton), ("triton.language", language)):
        monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def fake_gpu(fake_bin, fake_launcher, monkeypatch, tmp_path):
    """The fake ncu and launcher; ncu's report is shipped v2's for a run at block=64 or of
    a variant named slow, else v3's; the current folder tmp_path."""
    real = profiler.run_ncu

    def run_ncu(argv, log, report, on_kernel=None, env=None, shown_log=None):
        shape, variant = argv[argv.index("--shape") + 1], argv[argv.index("--variant") + 1]
        slow = "block=64" in shape.split(",") or variant == "slow"
        env = dict(env or os.environ, FAKE_NCU_REPORT=str(shipped("v2" if slow else "v3")))
        return real(argv, log, report, on_kernel=on_kernel, env=env, shown_log=shown_log)

    monkeypatch.setattr(profiler, "run_ncu", run_ncu)
    monkeypatch.chdir(tmp_path)
    return fake_launcher


def test_the_docs_cell_profiles_a_triton_kernel_at_two_configs(fake_gpu, monkeypatch, tmp_path, capsys):
    """docs/api.md's cell as written, in a notebook's namespace: two runs of one variant,
    stored in ./paprof-runs, compared config to config, with the cause; the launcher
    asked for the generated family by name, with it on its import path."""
    _stand_ins(monkeypatch)
    before = {k: os.environ.get(k) for k in ("PYTHONPATH", "PAPROF_FAMILIES")}
    cell = notebook(docs_cell())
    report = cell["report"]
    assert isinstance(report, paprof.notebook.Report)
    assert report.runs == Path("paprof-runs")
    assert list(report.variants["variant"]) == ["add", "add"]
    assert list(report.variants["shape"]) == ["n=16777216,block=64", "n=16777216,block=1024"]
    step = report.steps.iloc[0]
    assert step.speedup > 2 and step.cause and step.cause in capsys.readouterr().out
    assert report._repr_html_().startswith("<iframe srcdoc=")
    assert report.explanation["transitions"][0]["cause"]

    runs = tmp_path / "paprof-runs"
    sidecars = sorted(p for p in runs.rglob("*.json"))
    assert [p.relative_to(runs).as_posix() for p in sidecars] == [
        "nvidia-h200/notebook/add/n16777216_block1024.json",
        "nvidia-h200/notebook/add/n16777216_block64.json"]
    record = json.loads(sidecars[0].read_text())
    assert (record["family"], record["kind"], record["verified"]) == ("notebook", "callable", True)
    assert record["params"] == {"n": 16777216, "block": 1024}

    (code,) = (runs / ".paprof-code").glob("*/paprof_notebook_*.py")
    text = code.read_text()
    assert "@triton.jit\ndef add_kernel(x, y, out, n, BLOCK: tl.constexpr):" in text
    assert "import triton.language as tl" in text and "import torch" in text
    assert "def add(x, y, block):" in text and "def reference(x, y, block):" in text

    verify = fake_gpu.calls[0]
    assert verify[verify.index("--family") + 1] == "notebook"
    env = fake_gpu.envs[0]
    assert env["PAPROF_FAMILIES"] == f"{code.stem}:_paprof_family"
    assert str(code.parent) in env["PYTHONPATH"].split(os.pathsep)
    assert {k: os.environ.get(k) for k in before} == before  # the notebook's own, restored


SOURCE = '''
import numpy as np
import math as m
from helpers import FAKE_DIR

SCALE = 2.0
table = {"a": (1, 2)}

@jit
def twice(x):
    return x * SCALE

def helper(x):
    return twice.fn(x) + m.sqrt(4.0) + len(table["a"]) - 2

def add(x, y):
    return helper(x) + y

def add_np(x, y):
    return np.add(helper(x), y)

def wrong(x, y):
    return x - y

def inputs(n):
    return np.random.rand(n), np.random.rand(n)

def reference(x, y):
    assert x.dtype == np.float64
    return x * SCALE + 2.0 + y
'''


def _cell():
    import helpers

    helpers.jit = _JIT  # a decorator of an importable module, as triton.jit is
    return notebook("from helpers import jit\n" + SOURCE)


def test_the_child_imports_the_carried_code_and_checks_it(fake_gpu, tmp_path, monkeypatch):
    """The generated module in another Python (as the launcher imports it): the family
    found through the registry, the notebook's decorated function, constants and modules
    carried, inputs made from the config, the reference on float64 copies, each variant
    returning its output, the work model measured and read back by the notebook's side."""
    from paprof import profile_api

    monkeypatch.setattr(profile_api.ProfileResult, "report", lambda self: self)  # runs, no report
    cell = _cell()
    result = paprof.profile({"slow": cell["add"], "fast": cell["add_np"]}, configs=[{"n": 64}],
                            inputs=cell["inputs"], reference=cell["reference"], runs=tmp_path / "runs")
    assert sorted(result.done) == [("fast", 0), ("slow", 0)]
    env = fake_gpu.envs[0]
    code = '''
import numpy as np
from paprof import registry
from paprof.measure.kernels import kinds
from paprof.callable_family import as_array
fam = registry.family("notebook")
params = fam.parse("n=64")
made = fam.inputs(params, 7, np)
ref = fam.reference(params, made, np)
print(fam.output(params, np).shape, fam.tolerance_for(params), fam.work(params).bytes)
for v in fam.variants:
    out = kinds.build(v, params, None)(made, None)
    print(v.id, float(np.abs(as_array(out, np) - ref).max()))
'''
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "(64,) 1e-10 1536"  # float64 output: its tolerance; 3 x 64 float64 moved
    assert [line.split()[0] for line in lines[1:]] == ["slow", "fast"]
    assert all(float(line.split()[1]) < 1e-12 for line in lines[1:])
    (measured,) = (tmp_path / "runs" / ".paprof-code").glob("*/n64.work")
    assert json.loads(measured.read_text())["bytes"] == 3 * 64 * 8
    fam = paprof.callable_family.make_family("notebook", [{"n": 64}], {"a": cell["add"]}, cell["inputs"],
                                             folder=measured.parent)
    assert fam.work(fam.params(n=64)).bytes == 1536  # the notebook's side reads what was measured


def test_without_a_reference_the_first_variant_is_it():
    cell = _cell()
    fam = paprof.callable_family.make_family("nb", [{"n": 8}], {"a": cell["add"], "w": cell["wrong"]},
                                             cell["inputs"], measure=True)
    params = fam.params(n=8)
    made = fam.inputs(params, 1, np)
    ref = fam.reference(params, made, np)
    from paprof.callable_family import as_array
    from paprof.measure.kernels import kinds

    errors = [float(np.abs(as_array(kinds.build(v, params, None)(made, None), np) - ref).max())
              for v in fam.variants]
    assert errors[0] == 0 and errors[1] > 0.5


def test_the_tolerance_follows_the_checked_output_not_the_float64_reference():
    """float32 arguments and output: the reference computes in float64, the check holds
    the float32 output to float32's tolerance and counts float32 bytes; a float16 variant
    checked next gets float16's."""
    cell = notebook("import numpy as np\ndef inputs(n):\n    return np.ones(n, np.float32), np.ones(n, np.float32)\n"
                    "def f32(x, y):\n    return x + y\ndef f16(x, y):\n    return (x + y).astype(np.float16)\n"
                    "def reference(x, y):\n    assert x.dtype == np.float64\n    return x + y\n")
    fam = paprof.callable_family.make_family("nb", [{"n": 4}], {"a": cell["f32"], "b": cell["f16"]},
                                             cell["inputs"], reference=cell["reference"], measure=True)
    from paprof.measure.kernels import kinds

    params = fam.params(n=4)
    made = fam.inputs(params, 0, np)
    assert fam.reference(params, made, np).dtype == np.float64
    assert fam.work(params).bytes == 3 * 4 * 4 and fam.tolerance_for(params) == 1e-5
    kinds.build(fam.variants[1], params, None)(made, None)
    assert fam.tolerance_for(params) == 1e-2


def test_a_variant_that_returns_nothing_is_one_line():
    cell = notebook("import numpy as np\ndef inputs(n):\n    return np.ones(n)\n"
                    "def inplace(x):\n    x += 1\n")
    fam = paprof.callable_family.make_family("nb", [{"n": 4}], {"inplace": cell["inplace"]}, cell["inputs"],
                                             measure=True)
    from paprof.measure.kernels import kinds

    params = fam.params(n=4)
    with pytest.raises(UserError, match=r"variant inplace \(inplace\) returned None: return its output"):
        kinds.build(fam.variants[0], params, None)(fam.inputs(params, 0, np), None)


def test_a_failed_check_stops_with_the_verification_error(fake_gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPROF_RUN_ALONE", "1")  # the fake launcher answers one variant a call
    fake_gpu.returncode = 1
    fake_gpu.output = "paprof: error: output differs: rel_error 0.5 > 1e-05\n"
    cell = _cell()
    with pytest.raises(VerificationError, match="notebook/slow failed verification"):
        paprof.profile({"slow": cell["add"], "fast": cell["wrong"]}, configs=[{"n": 8}],
                       inputs=cell["inputs"], runs=tmp_path / "runs")


def test_a_variant_that_turns_the_config_down_is_named(fake_gpu, monkeypatch, tmp_path):
    monkeypatch.setenv("PAPROF_RUN_ALONE", "1")  # the fake launcher answers one variant a call
    """A variant that cannot take the config (the launcher writes why) is skipped; with
    one run left there is nothing to compare, and the one line says why."""
    real = profiler.run_launcher

    def launcher(argv, env):
        if argv[argv.index("--variant") + 1] == "fast":
            Path(argv[argv.index("--result") + 1]).write_text(json.dumps({"skipped": "no kernel for n=8"}))
            return profiler.LauncherOutcome(2, "paprof launch: error: no kernel for n=8")
        return real(argv, env)

    monkeypatch.setattr(profiler, "run_launcher", launcher)
    cell = _cell()
    with pytest.raises(UserError, match="1 run to compare .*the others were skipped: no kernel for n=8"):
        paprof.profile({"slow": cell["add"], "fast": cell["add_np"]}, configs=[{"n": 8}],
                       inputs=cell["inputs"], runs=tmp_path / "runs")


def test_several_variants_and_configs_give_a_report_per_config(fake_gpu, tmp_path, monkeypatch):
    """Four runs; the report compares the variants at the first config (the baseline
    first), ``at`` at another; each comparison is of one config (no cross comparison)."""
    from paprof import profile_api

    compared = []
    monkeypatch.setattr(profile_api.ProfileResult, "compare",
                        lambda self, paths, cross: compared.append((paths, cross)) or self)
    cell = _cell()
    result = paprof.profile({"slow": cell["add"], "fast": cell["add_np"]},
                            configs=[{"n": 8}, {"n": 16}], inputs=cell["inputs"], runs=tmp_path / "r",
                            baseline="fast")
    report = profile_api.ProfileReport.__new__(profile_api.ProfileReport)
    report.result = result
    report.at({"n": 16})
    ((first, cross), (second, _)) = compared
    assert [p.parent.name for p in first] == ["fast", "slow"] and not cross
    assert {p.name for p in first} == {"n8.ncu-rep"} and {p.name for p in second} == {"n16.ncu-rep"}
    with pytest.raises(UserError, match="not one of the configs"):
        report.at({"n": 3})


NO_ARGS = "def inputs(n):\n    return n\n"


@pytest.mark.parametrize("source, call, message", [
    (NO_ARGS, lambda c: ({"f": lambda x: x}, [{"n": 1}]), "variant 'f' is a lambda"),
    (NO_ARGS + "def outer():\n    k = 2\n    def inner(x):\n        return x * k\n    return inner\n",
     lambda c: ({"a": c["outer"](), "b": c["outer"]()}, [{"n": 1}]), "inner() is defined inside another function"),
    (NO_ARGS + "import numpy as np\nweights = np.ones(3)\ndef f(x):\n    return x * weights\n",
     lambda c: (c["f"], [{"n": 1}, {"n": 2}]), "f() uses the notebook's 'weights' (a ndarray)"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}]), "give two variants or two configs"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], {"n": 1, "m": 2.5j}), "is not a bool, int"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}, {"m": 2}]), "every config names the same"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}, {"n": 1}]), "config 1 repeats config 0"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}, {"n": "a"}]), "values of several types"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}, {"n": 2}, 3]), "config 2 is a int"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], []), "configs is a list of dicts"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"size": 1}, {"size": 2}]), "cannot take the config"),
    (NO_ARGS + "def f(x):\n    return x\n", lambda c: (c["f"], [{"n": 1}, {"n": 2}], {"family": "My-Kernels"}),
     "is not a family name"),
], ids=["lambda", "closure", "object", "one-run", "bad-value", "keys", "repeat", "types", "not-dict", "empty",
        "inputs", "family"])
def test_what_cannot_be_profiled_is_one_line_before_anything_runs(source, call, message, fake_gpu, tmp_path):
    cell = notebook(source)
    variants, configs, *more = call(cell)
    with pytest.raises(UserError) as caught:
        paprof.profile(variants, configs=configs, inputs=cell["inputs"], runs=tmp_path / "runs",
                       **(more[0] if more else {}))
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert fake_gpu.calls == [] and not (tmp_path / "runs").exists()


def test_no_ncu_or_no_gpu_is_one_line(fake_bin, monkeypatch, tmp_path):
    from paprof.read import locate

    cell = notebook(NO_ARGS + "def f(x):\n    return x\ndef g(x):\n    return x\n")
    args = dict(configs=[{"n": 1}], inputs=cell["inputs"], runs=tmp_path / "runs")
    monkeypatch.setenv("FAKE_NVIDIA_SMI", "fail")
    with pytest.raises(UserError, match="paprof.profile needs an NVIDIA GPU"):
        paprof.profile([cell["f"], cell["g"]], **args)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(locate, "INSTALL_ROOT", tmp_path / "none")
    monkeypatch.setattr(locate, "CUDA_NCU", tmp_path / "none" / "ncu")
    with pytest.raises(UserError, match="ncu"):
        paprof.profile([cell["f"], cell["g"]], **args)
    assert not (tmp_path / "runs").exists()


def test_a_scripts_functions_are_carried_too(tmp_path):
    """A cell run as a script (``python cell.py``: the functions in ``__main__``, their
    source in the file) is carried as a notebook's is: what the device script runs."""
    script = tmp_path / "cell.py"
    script.write_text("import numpy as np\nK = 3\ndef f(x):\n    return x * K\n"
                      "def inputs(n):\n    return np.ones(n)\n"
                      "from paprof.profile_api import generated_module\n"
                      "print(generated_module('nb', [{'n': 1}], {'f': f}, inputs, None, None, None)[0])\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    assert "K = 3\n" in done.stdout and "def f(x):\n    return x * K\n" in done.stdout
    assert "{'f': f}" in done.stdout


def test_import_paprof_stays_light():
    done = subprocess.run([sys.executable, "-c", "import sys, paprof; paprof.profile; "
                           "print(sorted(m for m in ('pandas', 'numpy', 'cupy', 'torch') if m in sys.modules))"],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


# -- on the GPU ---------------------------------------------------------------------------


def _ncu_or_skip():
    from paprof.read.locate import find_ncu

    try:
        find_ncu()
    except UserError as err:
        pytest.skip(f"no ncu: {err}")
    for module in ("torch", "triton"):
        pytest.importorskip(module)


@pytest.mark.gpu
def test_gpu_the_docs_cell_and_a_torch_op(tmp_path, monkeypatch):
    """docs/api.md's Triton cell on the GPU (two configs, its cause), then the same kernel
    beside torch.add (imported by name, not carried) at one config."""
    _ncu_or_skip()
    monkeypatch.chdir(tmp_path)
    cell = notebook(docs_cell())
    report = cell["report"]
    assert list(report.variants["variant"]) == ["add", "add"]
    assert report.steps.iloc[0].cause
    import torch

    notebook("def pair(n):\n    return torch.randn(n, device='cuda'), torch.randn(n, device='cuda')\n\n"
             "def add_1024(x, y):\n    return add(x, y, 1024)\n", cell)
    versus = paprof.profile({"torch": torch.add, "triton": cell["add_1024"]}, configs=[{"n": 1 << 22}],
                            inputs=cell["pair"], runs=tmp_path / "runs")
    assert list(versus.variants["label"]) == ["torch", "triton"]
    assert versus.steps.iloc[0].headline
