"""The family interface: parameters, work model, variant kinds, discovery, broken families."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.errors import ShapeError, UserError
from paprof.family import (
    CallableVariant,
    CommandVariant,
    CudaVariant,
    Family,
    Launcher,
    Params,
    Work,
    chose,
    param,
    relative_error,
    throughput,
)
from paprof.measure.argv import NcuSettings, launcher_argv, ncu_argv

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Knobs(Params):
    rows: int = param(1024, aliases=("r",), min=1, max=1 << 20, help="rows")
    scale: float = param(0.5, min=0)
    mode: str = param("fast", choices=("fast", "slow"))
    causal: bool = param(False)
    lens: tuple[int, ...] = param((1, 2), min=1)
    ctx: int | tuple[int, ...] = param(64, min=1)
    tile: int = param(0, key="t", omit_default=True)

    def validate(self):
        if self.mode == "slow" and self.causal:
            raise ShapeError("a slow causal mode is not a thing")


# -- parameters ----------------------------------------------------------------------------


def test_defaults_spec_and_slug_round_trip():
    k = Knobs()
    assert k.spec() == "rows=1024,scale=0.5,mode=fast,causal=false,lens=1:2,ctx=64"
    assert Knobs.parse(k.spec()) == k
    assert k.slug() == "rows1024_scale0.5_fast_causalfalse_lens1-2_ctx64"
    k2 = Knobs.parse("r=8,causal=yes,ctx=1:17:4096,t=16,mode=slow".replace(",mode=slow", ""))
    assert (k2.rows, k2.causal, k2.ctx, k2.tile) == (8, True, (1, 17, 4096), 16)
    assert Knobs.parse(k2.spec()) == k2 and "t=16" in k2.spec()
    assert k2.to_dict()["ctx"] == [1, 17, 4096] and json.dumps(k2.to_dict())
    assert Knobs.from_dict(k2.to_dict()) == k2
    assert Knobs.parse("tile=4").tile == 4  # the field's name is accepted beside its key


def test_long_tuples_get_a_digest_in_the_slug():
    k = Knobs(lens=tuple(range(1, 200)))
    slug = k.slug()
    assert len(slug) < 120 and "199x-max199-" in slug
    assert Knobs(lens=tuple(range(1, 199)) + (7,)).slug() != slug


@pytest.mark.parametrize("text, message", [
    ("rows=4,rows=8", "parameter rows is given twice"),
    ("r=4,rows=8", "parameter rows is given twice"),
    ("rows=99999999999999999999", "rows must be at most 1048576"),
    ("ctx=99999999999999999999", "ctx must be at most 2147483647"),
    ("rows=0", "rows must be at least 1, got 0"),
    ("rows=abc", "rows must be an integer, got 'abc'"),
    ("rows=1.5", "rows must be an integer"),
    ("scale=nan", "scale must be a finite number"),
    ("scale=-1", "scale must be at least 0"),
    ("mode=turbo", "mode must be one of fast, slow"),
    ("causal=maybe", "causal must be true or false"),
    ("lens=1:x", "lens must be an integer"),
    ("ctx=0:4", "ctx must be at least 1, got 0"),
    ("colour=blue", "unknown parameter 'colour'; known: rows, scale, mode"),
    ("rows", "parameter 'rows' is not KEY=VALUE"),
    ("rows=", "parameter rows has no value"),
    ("mode=slow,causal=true", "a slow causal mode is not a thing"),
])
def test_bad_parameters_are_one_line_errors(text, message):
    with pytest.raises(ShapeError) as err:
        Knobs.parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_construction_checks_types_too():
    with pytest.raises(ShapeError, match="rows must be int"):
        Knobs(rows="8")
    with pytest.raises(ShapeError, match="causal must be bool"):
        Knobs(causal=1)
    with pytest.raises(ShapeError, match="unknown parameter 'nope'"):
        Knobs.from_dict({"nope": 1})


def test_unsupported_field_types_and_clashing_keys_fail_when_declared():
    @dataclass(frozen=True)
    class Bad(Params):
        x: float | str = param(1.0)

    with pytest.raises(TypeError, match="not supported"):
        Bad.fields()

    @dataclass(frozen=True)
    class Clash(Params):
        a: int = param(1, aliases=("b",))
        b: int = param(2)

    with pytest.raises(TypeError, match="key 'b' names both a and b"):
        Clash.fields()


# -- the work model ------------------------------------------------------------------------


def test_work_model_and_throughput():
    w = Work(bytes=2_000_000, flops=8_000_000)
    assert w.intensity == 4 and w.to_dict() == {"bytes": 2_000_000, "flops": 8_000_000, "flop_kind": "fp32"}
    assert Work.from_dict(w.to_dict()) == w and Work.from_dict({}) is None
    assert throughput(w, 1.0) == {"tbs": 2.0, "tflops": 8.0}
    assert throughput(Work(bytes=10), 0) == {"tbs": None, "tflops": None}
    assert throughput(Work(bytes=1_000_000), 1.0)["tflops"] is None
    with pytest.raises(ValueError):
        Work(bytes=-1)
    with pytest.raises(ValueError):
        Work(bytes=1, flop_kind="int8")


def test_relative_error_never_passes_nan():
    ref = np.ones(4)
    assert relative_error(ref * 1.001, ref) == pytest.approx(1e-3)
    assert relative_error(np.array([1, np.nan, 1, 1.0]), ref) == float("inf")


# -- families and variants -----------------------------------------------------------------


def _family(**kw):
    args = dict(
        name="toy", params=Knobs,
        inputs=lambda p, seed, xp: {"x": xp.random.default_rng(seed).standard_normal(p.rows)},
        output=lambda p, xp: xp.empty(p.rows),
        reference=lambda p, inputs, xp: inputs["x"] * 2.0,
        work=lambda p: Work(bytes=16 * p.rows, flops=p.rows),
        variants=[
            CudaVariant("cu", "a kernel", sources=("toy.cu",), kernel="toy_kernel",
                        grid=lambda p: (p.rows // 256 + 1,), block=(256,),
                        args=lambda p, inputs, out: (inputs["x"], out, np.int32(p.rows))),
            CallableVariant("py", "a callable", fn="math:sqrt", order=-1),
        ],
    )
    args.update(kw)
    return Family(**args)


def test_a_declared_kernels_default_regex_is_its_name_exactly():
    """``vadd`` must not pick up ``vadd4`` (issue 29): the default is anchored, for
    ``re.search`` (the static gate) and for ncu's ``-k regex:`` alike."""
    import re

    from paprof.family import kernel_name_regex

    cu = _family().variant("cu")
    assert cu.kernel_regex == kernel_name_regex("toy_kernel") == "^toy_kernel$"
    assert re.search(cu.kernel_regex, "toy_kernel")
    assert not re.search(cu.kernel_regex, "toy_kernel4")
    assert not re.search(cu.kernel_regex, "my_toy_kernel")
    assert kernel_name_regex("k.v2") == r"^k\.v2$"
    given = CudaVariant("own", "its own regex", sources=("toy.cu",), kernel="toy_kernel",
                        kernel_regex="toy_kernel|merge", grid=(1,), block=(32,),
                        args=lambda p, i, out: ())
    assert given.kernel_regex == "toy_kernel|merge"
    argv = ncu_argv(NcuSettings(ncu="/opt/ncu"), cu, Knobs(), "/tmp/x.ncu-rep", "/tmp/r.json")
    assert argv[argv.index("-k") + 1] == "regex:^toy_kernel$"


def test_family_attaches_its_variants_in_story_order():
    fam = _family()
    assert [v.id for v in fam.variants] == ["py", "cu"]  # the explicit order first
    assert all(v.family == "toy" for v in fam.variants)
    cu = fam.variant("cu")
    assert cu.kernel_regex == "^toy_kernel$" and cu.folder == Path(__file__).resolve().parent
    assert cu.source_paths() == [Path(__file__).resolve().parent / "toy.cu"]
    assert cu.nvtx_range == "toy.cu" and cu.name == "toy/cu" and cu.verified
    assert fam.module == __name__ and fam.tolerance_for(Knobs()) == 1e-5
    with pytest.raises(UserError, match="family toy has no variant 'zz'; it has: py, cu"):
        fam.variant("zz")
    described = fam.describe()
    assert described["default_shape"] == Knobs().spec()
    assert described["params"][6] == {"name": "t", "field": "tile", "kind": "int", "default": 0,
                                      "aliases": ["tile"], "help": ""}


@pytest.mark.parametrize("change, message", [
    (dict(name="Toy"), "family name 'Toy'"),
    (dict(params=dict), "params must be a Params subclass"),
    (dict(variants=[CallableVariant("a", "x", fn="m:f"), CallableVariant("a", "y", fn="m:g")]),
     "variant id 'a' appears twice"),
])
def test_bad_families_fail_when_defined(change, message):
    with pytest.raises(ValueError, match=message):
        _family(**change)


def test_bad_variants_fail_when_defined():
    with pytest.raises(ValueError, match="give build=..., or kernel, grid, block and args"):
        CudaVariant("x", "idea", sources=("a.cu",), kernel="k")
    with pytest.raises(ValueError, match="name its .cu sources"):
        CudaVariant("x", "idea", build=lambda *a: None)
    with pytest.raises(ValueError, match="arrays must be"):
        CallableVariant("x", "idea", fn="m:f", arrays="jax")
    with pytest.raises(ValueError, match="variant id"):
        CallableVariant("no spaces", "idea", fn="m:f")
    with pytest.raises(ValueError, match="give the command"):
        CommandVariant("x", "idea")


# -- the argv each kind gets ---------------------------------------------------------------


def test_callable_kind_runs_the_launcher_without_a_kernel_filter_or_launch_count():
    fam = _family()
    py = fam.variant("py")
    params = Knobs(rows=8)
    argv = ncu_argv(NcuSettings(ncu="/opt/ncu", preset="memory", kernels_per_launch=None), py,
                    params, "/tmp/x.ncu-rep", "/tmp/r.json")
    expected_launcher = [sys.executable, "-m", "paprof.measure.kernels.launch", "--variant", "py",
                         "--family", "toy", "--shape", params.spec(), "--profile-launches", "1",
                         "--result", "/tmp/r.json", "--time", "0", "--no-check"]
    assert argv[-len(expected_launcher):] == expected_launcher
    assert "-k" not in argv and "--launch-count" not in argv
    assert argv[argv.index("--nvtx-include") + 1] == "toy.py/"
    assert launcher_argv(py, params, python="py", result="r", profile_launches=0,
                         time_launches=20) == [
        "py", "-m", "paprof.measure.kernels.launch", "--variant", "py", "--family", "toy",
        "--shape", params.spec(), "--profile-launches", "0", "--result", "r", "--time", "20"]


def test_command_kind_profiles_the_program_inside_its_range():
    v = registry.command_variant(["./train", "--steps", "3"], "nccl@step", "mine", "gemm")
    assert (v.family, v.id, v.kind, v.verified) == ("command", "mine", "command", False)
    argv = ncu_argv(NcuSettings(ncu="/opt/ncu", kernels_per_launch=None), v, None,
                    "/tmp/x.ncu-rep", None)
    assert argv[:9] == ["/opt/ncu", "-o", "/tmp/x.ncu-rep", "--force-overwrite",
                        "--clock-control", "none", "--target-processes", "all", "--section"]
    assert argv[-8:] == ["--nvtx", "--nvtx-include", "nccl@step/", "-k", "regex:gemm",
                         "./train", "--steps", "3"]


# -- discovery -----------------------------------------------------------------------------

FAMILY_MODULE = '''
from dataclasses import dataclass
import numpy as np
from paprof.family import CudaVariant, Family, Params, Work, param

@dataclass(frozen=True)
class Size(Params):
    n: int = param(1 << 20, min=1)

family = Family(
    name="{name}", params=Size, summary="y = 2 x",
    inputs=lambda p, seed, xp: {{"x": xp.random.default_rng(seed).standard_normal(p.n, dtype=xp.float32)}},
    output=lambda p, xp: xp.empty(p.n, xp.float32),
    reference=lambda p, inputs, xp: 2.0 * inputs["x"].astype(xp.float64),
    work=lambda p: Work(bytes=8 * p.n, flops=p.n),
    variants=[CudaVariant("twice", "one thread an element", sources=("twice.cu",),
                          kernel="twice", grid=lambda p: ((p.n + 255) // 256,), block=(256,),
                          args=lambda p, i, out: (i["x"], out, np.int32(p.n)))],
)
'''


@pytest.fixture
def user_repo(tmp_path, monkeypatch):
    """A user's repository with a [tool.paprof] table, the current folder; no installed
    family is visible (the kernel lab, where installed, is hidden: these test paprof with
    the user's family alone)."""
    monkeypatch.setattr(registry, "_entry_points", lambda: [])
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(textwrap.dedent('''
        [project]
        name = "mine"
        [tool.paprof]
        families = ["mine_family:family"]
        path = ["kernels"]
    '''))
    (repo / "kernels" / "mine_family.py").write_text(FAMILY_MODULE.format(name="mine"))
    (repo / "kernels" / "twice.cu").write_text(
        'extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
        '  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\n')
    monkeypatch.chdir(repo / "kernels")  # any folder below the pyproject
    registry.clear()
    saved = list(sys.path)
    yield repo
    registry.clear()
    sys.path[:] = saved
    for name in [m for m in sys.modules if m.startswith(("mine_family", "broken_", "ep_family"))]:
        del sys.modules[name]


def test_repository_families_are_found_from_any_folder_below_the_pyproject(user_repo):
    fams = registry.discover()
    assert list(fams) == ["mine"]
    mine = fams["mine"]
    assert mine.origin == f"[tool.paprof] of {user_repo / 'pyproject.toml'}"
    assert mine.variant("twice").source_paths() == [user_repo / "kernels" / "twice.cu"]
    assert registry.get("twice").name == "mine/twice"
    assert [v.name for v in registry.resolve(["all"], "mine")] == ["mine/twice"]


def test_list_json_shows_user_families_with_where_they_come_from(user_repo):
    from paprof.cli import main

    result = CliRunner().invoke(main, ["list", "--json"])
    assert result.exit_code == 0, result.output
    data = {f["family"]: f for f in json.loads(result.stdout)}
    assert data["mine"]["origin"].startswith("[tool.paprof] of ")
    assert data["mine"]["module"] == "mine_family"
    assert data["mine"]["params"][0]["name"] == "n"
    assert data["mine"]["variants"][0]["kind"] == "cuda"
    assert data["mine"]["variants"][0]["sources"] == [str(user_repo / "kernels" / "twice.cu")]


def test_all_needs_a_family_when_several_are_visible(user_repo, monkeypatch):
    assert [v.name for v in registry.resolve(["all"])] == ["mine/twice"]  # the only one
    assert registry.the_family().name == "mine"
    (user_repo / "kernels" / "ep_family.py").write_text(
        FAMILY_MODULE.format(name="other").replace('"twice", "one thread', '"thrice", "one thread'))
    points = [EntryPoint("other", "ep_family:family", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "_entry_points", lambda: points)
    registry.clear()
    with pytest.raises(UserError, match=re.escape(registry.ALL_NEEDS_A_FAMILY + "mine, other")):
        registry.resolve(["all"])
    with pytest.raises(UserError, match="several kernel families are visible; say which with --family: other, mine"):
        registry.the_family()
    with pytest.raises(UserError, match="must be of one family"):
        registry.resolve(["twice", "thrice"])
    assert registry.resolve(["all", "twice"])[0].name == "mine/twice"
    assert registry.get("thrice").name == "other/thrice"  # unique: no --family needed


def test_no_family_visible_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_entry_points", lambda: [])
    monkeypatch.chdir(tmp_path)
    registry.clear()
    try:
        for call in (lambda: registry.get("v3"), lambda: registry.resolve(["all"]),
                     registry.the_family, lambda: registry.family("x")):
            with pytest.raises(UserError, match="no kernel family is visible: install one"):
                call()
    finally:
        registry.clear()


def test_run_checks_the_users_parameters_before_looking_for_ncu(user_repo, monkeypatch):
    from paprof.cli import main

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("NCU", raising=False)
    result = CliRunner().invoke(main, ["run", "--family", "mine", "--variant", "all", "--shape", "n=0"])
    assert result.exit_code == 2
    assert result.output == "paprof: error: n must be at least 1, got 0\n"


def test_the_launcher_process_finds_the_same_family(user_repo):
    """The child ncu runs resolves the family from its own folder, as the parent did."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "paprof.measure.kernels.launch", "--variant", "twice",
                           "--family", "mine", "--shape", "n=0"], capture_output=True, text=True,
                          env=env, cwd=user_repo / "kernels")
    assert done.returncode == 2
    assert done.stderr.strip() == "paprof launch: error: n must be at least 1, got 0"


@pytest.mark.parametrize("module, message", [
    ("raise RuntimeError('no GPU here')",
     "importing module 'broken_a' failed (RuntimeError: no GPU here)"),
    ("x = 1", "module 'broken_a' has no attribute 'family'"),
    ("family = {'name': 'x'}", "broken_a:family is a dict, not a paprof.family.Family"),
    ("import not_a_module_anywhere",
     "importing module 'broken_a' failed (ModuleNotFoundError: No module named 'not_a_module_anywhere')"),
    ("from paprof.family import Family\nfamily = Family(name='Bad', params=None, variants=[], "
     "inputs=None, output=None, reference=None, work=None)",
     "importing module 'broken_a' failed (ValueError: family name 'Bad'"),
])
def test_a_broken_family_module_is_one_line_naming_it(user_repo, module, message):
    from paprof.cli import main

    (user_repo / "kernels" / "broken_a.py").write_text(module + "\n")
    text = (user_repo / "pyproject.toml").read_text().replace('"mine_family:family"', '"broken_a:family"')
    (user_repo / "pyproject.toml").write_text(text)
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith("paprof: error: the paprof family 'broken_a:family' ([tool.paprof] of ")
    assert message in line


def test_a_module_reference_without_attribute_uses_FAMILY_or_family(user_repo):
    text = (user_repo / "pyproject.toml").read_text().replace('"mine_family:family"', '"mine_family"')
    (user_repo / "pyproject.toml").write_text(text)
    assert registry.family("mine").module == "mine_family"


def test_a_bad_tool_paprof_table_is_one_line(user_repo):
    (user_repo / "pyproject.toml").write_text("[tool.paprof]\nfamilies = [1]\n")
    with pytest.raises(UserError, match=r"\[tool.paprof\] families and path are lists of strings"):
        registry.discover()
    (user_repo / "pyproject.toml").write_text("[tool.paprof\n")
    registry.clear()
    with pytest.raises(UserError, match="cannot read"):
        registry.discover()


def test_entry_point_families(user_repo, monkeypatch):
    (user_repo / "kernels" / "ep_family.py").write_text(FAMILY_MODULE.format(name="from_ep"))
    points = [EntryPoint("from_ep", "ep_family:family", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "_entry_points", lambda: points)
    monkeypatch.syspath_prepend(str(user_repo / "kernels"))  # as if installed
    registry.clear()
    fams = registry.discover()
    assert list(fams) == ["from_ep", "mine"]
    assert fams["from_ep"].origin == "entry point from_ep"


def test_two_families_of_one_name_are_refused(user_repo, monkeypatch):
    points = [EntryPoint("mine", "mine_family:family", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "_entry_points", lambda: points)
    monkeypatch.syspath_prepend(str(user_repo / "kernels"))  # as if installed
    registry.clear()
    (user_repo / "kernels" / "mine2.py").write_text(FAMILY_MODULE.format(name="mine"))
    text = (user_repo / "pyproject.toml").read_text().replace('"mine_family:family"', '"mine2:family"')
    (user_repo / "pyproject.toml").write_text(text)
    with pytest.raises(UserError, match="two families are named 'mine'"):
        registry.discover()
    del sys.modules["mine2"]


def test_the_users_kernel_compiles(user_repo):
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    src = registry.family("mine").variant("twice").source_paths()[0]
    done = subprocess.run([nvcc, "-arch=sm_90", "-c", "-o", str(user_repo / "t.o"), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_launchers_words_are_what_the_run_records_of_its_choices():
    """``Launcher.words()`` is the record's ``launch_words``: a clause or several, the
    reason only with them; ``chose`` says raw details the same way the reports do."""
    def launcher(**kw):
        return Launcher("v", [], lambda inputs, out: None, details={"splits": 4}, **kw)

    assert launcher().words() is None
    assert launcher(why="a reason alone says nothing").words() is None
    assert launcher(said="split the rows 4 ways (splits 4)").words() == {"said": ["split the rows 4 ways (splits 4)"]}
    assert launcher(said=["split the rows 4 ways", "", "chose order longest"], why="128 CTAs for 132 SMs").words() == {
        "said": ["split the rows 4 ways", "chose order longest"], "why": "128 CTAs for 132 SMs"}
    assert chose({"tile": 64, "order": "longest"}) == "chose tile 64, order longest"


def test_an_unknown_tool_paprof_key_is_one_line_naming_it_and_the_known_ones(user_repo):
    # issue 39: a misspelt key was ignored in silence
    (user_repo / "pyproject.toml").write_text('[tool.paprof]\nfamilys = ["mine_family:family"]\n')
    registry.clear()
    with pytest.raises(UserError, match=r"unknown key 'familys' \(did you mean 'families'\?\); "
                                        r"known: families, path"):
        registry.discover()
