"""``paprof.profile``: profile a notebook's callables under ncu and get the ``Report``.

::

    report = paprof.profile({"torch": add_torch, "triton": add_triton},
                            configs=[{"n": 1 << 20}, {"n": 1 << 24}], inputs=make_inputs)

ncu must own the process it profiles, so the callables run in a child process, as
``paprof run`` runs a family's variants (``paprof.measure.profile.profile_variants``: a
check against the reference and CUDA-event timing without ncu, then ncu on
``python -m paprof.measure.kernels.launch``). The child cannot import a function defined in a
notebook cell, so paprof carries its source: the function, and what it uses from the
notebook (other functions, ``@triton.jit`` kernels with their decorators, constants,
the modules it imports), is written into a generated module in the run store
(``<runs>/.paprof-code/<module>/``), which the child imports as a family
(``$PAPROF_FAMILIES``); a function of an importable module is imported by its name
instead. What cannot be carried is a one-line ``UserError`` before anything runs: a
lambda, a closure, a class or another object (a tensor, a model) defined in the
notebook and used by the function.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import hashlib
import importlib
import inspect
import os
import re
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path

from paprof.errors import UserError, VerificationError
from paprof.notebook import Report
from paprof import registry
from paprof.registry import FAMILIES_ENV

DEFAULT_STORE = Path("paprof-runs")
"""Where ``paprof.profile`` stores its runs unless told: a folder of the current one, so
that the runs outlive the notebook (``paprof compare --runs paprof-runs`` reads them)."""
CODE_FOLDER = ".paprof-code"
"""The run store's folder of generated modules (holds no report: the store's readers
find nothing in it)."""
FAMILY_ATTR = "_paprof_family"


# -- carrying the notebook's code to the child -----------------------------------------


def _function(obj):
    """The Python function inside ``obj``: itself, or under a decorator's ``fn``
    (Triton's ``JITFunction``, ``Autotuner``, ``Heuristics``); None for anything else."""
    seen = 0
    while not isinstance(obj, types.FunctionType) and seen < 8:
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
        seen += 1
    return obj if isinstance(obj, types.FunctionType) else None


def _global_names(code) -> list[str]:
    """The globals ``code`` (and the code nested in it) loads, in order of first use."""
    names: list[str] = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval not in names:
            names.append(ins.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += [n for n in _global_names(const) if n not in names]
    return names


def _header_names(source: str) -> list[str]:
    """The names a ``def``'s decorators, defaults and annotations use (evaluated where
    it is defined)."""
    tree = ast.parse(source)
    node = tree.body[0]
    parts = list(node.decorator_list)
    args = node.args
    parts += [d for d in (*args.defaults, *args.kw_defaults) if d is not None]
    parts += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                     args.vararg, args.kwarg) if a is not None and a.annotation]
    if node.returns is not None:
        parts.append(node.returns)
    names: list[str] = []
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name) and sub.id not in names:
                names.append(sub.id)
    return names


def _import_ref(obj) -> tuple[str, str] | None:
    """(module, attribute) that imports ``obj`` itself, or None."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or module == "__main__":
        return None
    for name in dict.fromkeys((getattr(obj, "__qualname__", None), getattr(obj, "__name__", None))):
        if not isinstance(name, str) or not name.isidentifier():
            continue
        try:
            if getattr(importlib.import_module(module), name) is obj:
                return module, name
        except Exception:  # anything a module does on import is its own
            return None
    return None


def _literal(value) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value and type(value) in (
            int, float, bool, str, bytes, type(None), tuple, list, dict, frozenset, set)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return False


def _package_folder(module) -> str | None:
    """The folder the top-level package of ``module`` was imported from."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    depth = module.__name__.count(".") + (1 if Path(file).name == "__init__.py" else 0)
    return str(Path(file).resolve().parents[depth])


def _installed(folder: str) -> bool:
    """True for a folder every Python of this installation imports from (the standard
    library, site-packages): the child needs no path for it."""
    import sys

    roots = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return ("site-packages" in folder or "dist-packages" in folder
            or any(folder == r or folder.startswith(r + os.sep) for r in roots))


@dataclass
class Carried:
    """The source of the generated module, built name by name."""

    imports: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """Folders the child needs on its import path (where the imported modules live)."""
    bound: dict = field(default_factory=dict)
    """Name in the generated module -> the object it stands for."""

    def bind(self, name: str, obj, what: str) -> bool:
        """Claim ``name`` for ``obj``; False when it is already bound to it."""
        if name in self.bound:
            if self.bound[name] is obj:
                return False
            raise UserError(f"paprof.profile: two different objects are named {name!r} ({what}): "
                            "rename one")
        self.bound[name] = obj
        return True

    def needs_path(self, module_name: str) -> None:
        module = importlib.import_module(module_name)
        folder = _package_folder(module)
        if folder and folder not in self.paths and not _installed(folder):
            self.paths.append(folder)

    def add_import(self, name: str, obj, who: str) -> bool:
        """``name`` bound by an import of ``obj`` (a module, or an importable object)."""
        if isinstance(obj, types.ModuleType):
            if not self.bind(name, obj, who):
                return True
            top = obj.__name__
            self.imports.append(f"import {top}" if name == top else f"import {top} as {name}")
            self.needs_path(top)
            return True
        ref = _import_ref(obj)
        if ref is None:
            return False
        if self.bind(name, obj, who):
            module, attr = ref
            self.imports.append(f"from {module} import {attr}" + ("" if attr == name else f" as {name}"))
            self.needs_path(module)
        return True

    def add_global(self, name: str, value, who: str) -> None:
        if self.add_import(name, value, who):
            return
        fn = _function(value)
        if fn is not None and fn.__module__ == "__main__":
            self.add_definition(name, value, fn, who)
            return
        if _literal(value):
            if self.bind(name, value, who):
                self.constants.append(f"{name} = {value!r}")
            return
        raise UserError(
            f"paprof.profile: {who} uses the notebook's {name!r} (a {type(value).__name__}), which "
            "paprof cannot carry to the profiling process: pass it as an argument (inputs=), make "
            "it a constant, or put the code in a module file")

    def add_definition(self, name: str, obj, fn, who: str) -> None:
        what = f"{fn.__name__}()"
        if fn.__name__ == "<lambda>":
            raise UserError(f"paprof.profile: {who} is a lambda, whose source paprof cannot carry "
                            "to the profiling process: define it with def")
        if fn.__code__.co_freevars or "<locals>" in fn.__qualname__:
            raise UserError(f"paprof.profile: {what} is defined inside another function (it uses "
                            f"{', '.join(fn.__code__.co_freevars) or 'its scope'}): define it at "
                            "the top level of a cell or a module")
        if fn.__name__ != name:
            raise UserError(f"paprof.profile: {what} is used under the name {name!r}: paprof "
                            "carries it by its def, so use it under its own name")
        if not self.bind(name, obj, who):
            return
        try:
            source = textwrap.dedent(inspect.getsource(fn))
            ast.parse(source)
        except (OSError, TypeError, SyntaxError) as err:
            raise UserError(f"paprof.profile: the source of {what} cannot be read ({type(err).__name__}): "
                            "define it in a notebook cell or a file, not with exec") from None
        names = _header_names(source) + _global_names(fn.__code__)
        globs = fn.__globals__
        for used in dict.fromkeys(names):
            if used in globs and used != name:
                self.add_global(used, globs[used], what)
        self.definitions.append(source.rstrip() + "\n")

    def add_root(self, obj, what: str) -> str:
        """The name the generated module knows ``obj`` (a variant, inputs, reference or
        work function) by."""
        if isinstance(obj, types.FunctionType) and obj.__name__ == "<lambda>":
            raise UserError(f"paprof.profile: {what} is a lambda, whose source paprof cannot carry "
                            "to the profiling process: define it with def")
        fn = _function(obj)
        if fn is not None and fn.__module__ == "__main__":
            self.add_definition(fn.__name__, obj, fn, what)
            return fn.__name__
        ref = _import_ref(obj)
        if ref is None:
            if not callable(obj):
                raise UserError(f"paprof.profile: {what} is a {type(obj).__name__}, not a function")
            raise UserError(
                f"paprof.profile: {what} ({getattr(obj, '__qualname__', type(obj).__name__)}) can "
                "neither be imported by the profiling process nor carried as source: define it "
                "with def in the notebook or in a module file")
        alias = f"_paprof_{len(self.bound)}"
        self.add_import(alias, obj, what)
        return alias

    def text(self, family_call: str) -> str:
        parts = ["# Generated by paprof.profile: the notebook's code that the profiling process",
                 "# imports (paprof/profile_api.py). Do not edit: the next call writes it again.",
                 *self.imports, "", *self.constants, "", *(d + "\n" for d in self.definitions),
                 family_call]
        return "\n".join(parts) + "\n"


def generated_module(name: str, configs, variants: dict, inputs, reference, tolerance, work) -> tuple[str, Carried]:
    """(source, carried) of the module that defines the family for the child."""
    carried = Carried()
    names = {vid: carried.add_root(fn, f"variant {vid!r}") for vid, fn in variants.items()}
    inputs_name = carried.add_root(inputs, "inputs")
    ref_name = carried.add_root(reference, "reference") if reference is not None else "None"
    work_name = carried.add_root(work, "work") if work is not None else "None"
    if callable(tolerance):
        tol_text = carried.add_root(tolerance, "tolerance")
    else:
        tol_text = repr(tolerance)
    call = (
        "from paprof.callable_family import make_family as _paprof_make_family\n"
        f"{FAMILY_ATTR} = _paprof_make_family(\n"
        f"    {name!r}, {list(configs)!r},\n"
        "    {" + ", ".join(f"{vid!r}: {fn}" for vid, fn in names.items()) + "},\n"
        f"    {inputs_name}, reference={ref_name}, tolerance={tol_text}, work={work_name},\n"
        "    measure=True, folder=__import__('os').path.dirname(__file__), module=__name__)"
    )
    return carried.text(call), carried


# -- the call ----------------------------------------------------------------------------


def _variants(given) -> dict:
    """name -> callable: a dict as it is, a list or one callable by their names."""
    if isinstance(given, dict):
        out = dict(given)
    elif isinstance(given, (list, tuple)):
        out = {}
        for fn in given:
            key = getattr(_function(fn) or fn, "__name__", None) or type(fn).__name__
            if key in out:
                raise UserError(f"paprof.profile: two variants are named {key!r}: pass a dict "
                                "{'name': function, ...}")
            out[key] = fn
    elif callable(given):
        out = {getattr(_function(given) or given, "__name__", "variant"): given}
    else:
        raise UserError(f"paprof.profile: the variants are a function, a list of functions or a "
                        f"dict name -> function, not a {type(given).__name__}")
    if not out:
        raise UserError("paprof.profile: give at least one variant")
    from paprof.family import ID_PATTERN as _ID

    for vid, fn in out.items():
        if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
            raise UserError(f"paprof.profile: variant {vid!r} is a lambda, whose source paprof "
                            "cannot carry to the profiling process: define it with def")
        if not isinstance(vid, str) or not _ID.match(vid) or ".tmp-" in vid or len(vid) > 100:
            raise UserError(f"paprof.profile: the variant name {vid!r} is not a run-store id "
                            "(letters, digits, '_', '.', '+', '-')")
        if not callable(fn):
            raise UserError(f"paprof.profile: variant {vid!r} is a {type(fn).__name__}, not a function")
    return out


def _check_inputs(inputs, configs) -> None:
    if not callable(inputs):
        raise UserError("paprof.profile: inputs is a function of the config's parameters that "
                        "returns the variants' arguments, e.g. def inputs(n): return "
                        "torch.randn(n, device='cuda'), torch.randn(n, device='cuda')")
    try:
        signature = inspect.signature(inputs)
    except (TypeError, ValueError):
        return
    for config in configs:
        try:
            signature.bind(**config)
        except TypeError as err:
            raise UserError(f"paprof.profile: inputs{signature} cannot take the config {config}: "
                            f"{err}") from None


def _check_machine() -> str:
    """ncu's path; a one-line ``UserError`` where there is no ncu or no GPU."""
    from paprof.api import find_ncu, query_gpus

    ncu = find_ncu()
    if not query_gpus():
        raise UserError("paprof.profile needs an NVIDIA GPU (nvidia-smi lists none here): it runs "
                        "each variant on the GPU under ncu; paprof.compare and paprof.load read "
                        "stored runs without one")
    return ncu


@contextlib.contextmanager
def _child_environment(module: str, paths: list[str]):
    """The child's ``PYTHONPATH`` (the generated module and the user's packages) and
    ``$PAPROF_FAMILIES``, set in this process's environment for the length of the runs
    (``paprof.measure.profile.child_env`` copies it into each child's), then restored."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", FAMILIES_ENV)}
    old = [p for p in (saved["PYTHONPATH"] or "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *old]))
    os.environ[FAMILIES_ENV] = f"{module}:{FAMILY_ATTR}"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _write_module(runs: Path, text: str) -> tuple[str, Path]:
    """Write the generated module into ``<runs>/.paprof-code/<module>/``: its folder and
    those on the way made without following a link out of the store, and held to the
    trust rule of ``[tool.paprof]`` code before anything is written (this user's or
    root's, others may not write it nor rename or replace it or a folder above it),
    because the child imports it: a store others may write gets no code of ours."""
    from paprof.api import store_folder
    from paprof.outputs import write

    module = "paprof_notebook_" + hashlib.sha256(text.encode()).hexdigest()[:12]
    folder = store_folder(runs, runs / CODE_FOLDER / module).resolve()
    registry.check_code_folder(folder, f"the code paprof.profile generates for {runs}")
    write(folder / f"{module}.py", text)
    return module, folder


def profile(variants, *, configs, inputs, reference=None, tolerance=None, work=None,
            runs=DEFAULT_STORE, family: str = "notebook", preset: str = "default",
            launches: int = 1, seed: int | None = None, force: bool = True, baseline=None):
    """Profile ``variants`` at each of ``configs`` under ncu, store the runs in ``runs``
    and return the ``Report`` that compares them (docs/api.md).

    ``variants``: a function, a list of functions, or a dict name -> function; each is
    called with the arguments ``inputs(**config)`` returns (a tuple, a dict of keyword
    arguments or one array) and returns its output, one array (PyTorch, CuPy). It is
    checked against ``reference`` (a function of the same arguments, called on float64
    copies; without one, every variant is checked against the first) within
    ``tolerance`` (by the output's dtype unless given); ``work(**config)`` may give
    ``{"bytes": ..., "flops": ...}`` (default: the arguments read once and the output
    written once). ``force`` (the default) replaces an earlier run of the same variant
    and config, as a cell run again should. With one config the report compares the
    variants in order (``baseline="name"``: each against that one); with one variant, its
    configs in order; with several of both, the variants at the first config, and
    ``report.at(config)`` the others."""
    from paprof.callable_family import check_configs, make_family
    from paprof.api import PRESETS, NcuSettings, profile_variants

    chosen = _variants(variants)
    configs = check_configs(configs)
    if len(chosen) < 2 and len(configs) < 2:
        raise UserError("paprof.profile compares runs: give two variants or two configs (one "
                        "variant at one config is one run, nothing to explain)")
    if not (isinstance(family, str) and re.fullmatch(r"[a-z_][a-z0-9_]*", family)):
        raise UserError(f"paprof.profile: family {family!r} is not a family name (lower-case "
                        "letters, digits and '_'): it is a folder of the run store")
    if preset not in PRESETS:
        raise UserError(f"paprof.profile: unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    if baseline is not None and baseline not in chosen:
        raise UserError(f"paprof.profile: baseline {baseline!r} is not one of the variants "
                        f"({', '.join(chosen)})")
    _check_inputs(inputs, configs)
    text, carried = generated_module(family, configs, chosen, inputs, reference, tolerance, work)
    ncu = _check_machine()
    runs = Path(runs)
    module, folder = _write_module(runs, text)
    fam = make_family(family, configs, chosen, inputs, reference=reference, tolerance=tolerance,
                      work=work, folder=folder, module=module)
    settings = NcuSettings(ncu=ncu, preset=preset, launches=launches, seed=seed)
    done: dict[tuple[str, int], Path] = {}
    failed, skipped = [], []
    with _child_environment(module, [str(folder), *carried.paths]):
        for i, config in enumerate(configs):
            params = fam.params(**config)
            for outcome in profile_variants(fam.variants, params, settings, runs, force, family=fam):
                if outcome.run is not None:
                    done[(outcome.variant.id, i)] = outcome.run.report
                elif outcome.failed is not None:
                    failed.append(str(outcome.failed))
                else:
                    skipped.append(str(outcome.skipped))
    if failed:
        raise VerificationError(failed[0] + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    return ProfileResult(done, list(chosen), configs, runs, baseline, skipped).report()


class ProfileResult:
    """The runs one ``paprof.profile`` call stored, and the reports made of them."""

    def __init__(self, done: dict, variants: list[str], configs: list[dict], runs: Path, baseline,
                 skipped=()):
        self.done, self.variants, self.configs, self.runs, self.baseline = (
            done, variants, configs, runs, baseline)
        self.skipped = list(skipped)
        """Why the variants that could not take a config were skipped."""

    def paths_at(self, i: int) -> list[Path]:
        order = self.variants
        if self.baseline is not None:
            order = [self.baseline] + [v for v in order if v != self.baseline]
        return [self.done[(v, i)] for v in order if (v, i) in self.done]

    def compare(self, paths, cross: bool):
        from paprof.api import build_context, explanation, finished_comparison

        if len(paths) < 2:
            raise UserError(f"paprof.profile: {len(paths)} run to compare ({', '.join(map(str, paths))}); "
                            "the others were skipped: " + "; ".join(self.skipped or ["no reason given"]))
        cmp = finished_comparison(paths, cross=cross, baseline=self.baseline is not None and not cross)
        return ProfileReport(cmp, build_context(cmp, explained=explanation(cmp)), paths, self)

    def report(self):
        if len(self.variants) == 1:
            paths = [self.done[(self.variants[0], i)] for i in range(len(self.configs))
                     if (self.variants[0], i) in self.done]
            return self.compare(paths, cross=True)
        return self.compare(self.paths_at(0), cross=False)


class ProfileReport(Report):
    """A ``Report`` made by ``paprof.profile``: also ``runs`` (the store) and ``at(config)``."""

    def __init__(self, comparison, context, reports, result: ProfileResult):
        super().__init__(comparison, context, reports)
        self.result = result

    @property
    def runs(self) -> Path:
        """The run store the runs are in (``paprof.compare(..., runs=report.runs)``)."""
        return self.result.runs

    def at(self, config) -> "ProfileReport":
        """The variants compared at another config (a dict of the call's configs, or its
        index)."""
        configs = self.result.configs
        i = config if isinstance(config, int) else next(
            (k for k, c in enumerate(configs) if c == config), None)
        if i is None or not 0 <= i < len(configs):
            raise UserError(f"paprof.profile: {config!r} is not one of the configs profiled: "
                            + ", ".join(map(str, configs)))
        if len(self.result.variants) == 1:
            raise UserError("paprof.profile: one variant was profiled: this report already "
                            "compares its configs")
        return self.result.compare(self.result.paths_at(i), cross=False)
