"""The family ``paprof.profile`` makes of a notebook's callables (docs/api.md).

``make_family(name, configs, variants, inputs, ...)`` is an ordinary ``paprof.family.Family``:
its parameters class is made from the configs (one field per key, the first config's
values as defaults), each variant is a ``CallableVariant`` that calls the user's function
on the arguments ``inputs(**config)`` made, and the reference is the user's function
called on float64 copies of those arguments (or, without one, the first variant on the
arguments as they are). ``paprof.profile`` builds it twice: in the notebook's process,
which never touches the GPU (``measure=False``), and in the generated module that the
launcher imports under ncu (``measure=True``), where a first set of inputs and the first
variant's output on it, made once per configuration outside the timed and profiled
launches, give the output's shape and, without a ``work`` function, the work model: every
argument read once and the output written once. The default tolerance follows the dtype
of the checked variant's own output (the reference's is float64). The launcher writes that work model beside the generated module
(``<slug>.work``) and the notebook's side reads it back for the run's record.

Nothing here imports a GPU library at module level; the array conversions import CuPy,
PyTorch or NumPy only when they are handed such arrays.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Callable

from paprof.errors import UserError
from paprof.family import CallableVariant, Family, Params, Work, param

CONFIG_TYPES = (bool, int, float, str)
"""The types a config's value may have (also a tuple of ints)."""

WORK_SUFFIX = ".work"
"""The work model the launcher measured for one configuration, beside the generated module
(not ``.json``: nothing in a run store reads it as a record)."""


# -- configs -> parameters ----------------------------------------------------------------


def _kind(value):
    if isinstance(value, bool):
        return bool
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple[int, ...]
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind
    return None


def check_configs(configs) -> list[dict]:
    """``configs`` as a list of dicts of the same keys, each value a bool, int, float,
    str or tuple of ints (an int beside a float of the same key counts as a float); a
    one-line ``UserError`` naming what is wrong otherwise."""
    if isinstance(configs, dict):
        configs = [configs]
    if not isinstance(configs, (list, tuple)) or not configs:
        raise UserError("paprof.profile: configs is a list of dicts, one per configuration, "
                        "e.g. configs=[{'n': 1 << 20}, {'n': 1 << 24}]")
    out: list[dict] = []
    for i, config in enumerate(configs):
        if not isinstance(config, dict):
            raise UserError(f"paprof.profile: config {i} is a {type(config).__name__}, not a dict "
                            "of parameters such as {'n': 1024}")
        for key, value in config.items():
            if not (isinstance(key, str) and key.isidentifier() and not key.startswith("_")):
                raise UserError(f"paprof.profile: config {i}: the key {key!r} is not a Python name "
                                "(letters, digits and '_', not first '_')")
            if _kind(value) is None or (isinstance(value, float) and not math.isfinite(value)):
                raise UserError(f"paprof.profile: config {i}: {key}={value!r} is not a bool, int, "
                                "finite float, str or tuple of ints")
        if out and set(config) != set(out[0]):
            raise UserError(f"paprof.profile: config {i} has the keys {sorted(config)}, config 0 "
                            f"{sorted(out[0])}: every config names the same parameters")
        if config in out:
            raise UserError(f"paprof.profile: config {i} repeats config {out.index(config)}: {config}")
        out.append({k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})
    for key in out[0]:
        kinds = {_kind(c[key]) for c in out}
        if kinds == {int, float}:
            continue
        if len(kinds) > 1:
            raise UserError(f"paprof.profile: the parameter {key} has values of several types: "
                            + ", ".join(repr(c[key]) for c in out))
    return out


def params_class(configs: list[dict]) -> type:
    """The ``Params`` subclass of these (checked) configs: one field per key, typed by its
    values, the first config's value as its default."""
    fields = []
    for key, first in configs[0].items():
        kinds = {_kind(c[key]) for c in configs}
        kind = float if kinds == {int, float} else kinds.pop()
        fields.append((key, kind, param(float(first) if kind is float else first)))
    cls = dataclasses.make_dataclass("Config", fields, bases=(Params,), frozen=True)
    cls.__module__ = __name__
    return cls


# -- the arguments and what the variants return -----------------------------------------


@dataclasses.dataclass
class Call:
    """The arguments ``inputs(**config)`` made: positional and keyword."""

    args: tuple
    kwargs: dict

    @classmethod
    def of(cls, made, where: str) -> "Call":
        if isinstance(made, dict):
            return cls((), dict(made))
        if isinstance(made, (tuple, list)):
            return cls(tuple(made), {})
        if made is None:
            raise UserError(f"{where} returned None: return the variants' arguments (a tuple, "
                            "a dict of keyword arguments, or one array)")
        return cls((made,), {})

    def values(self) -> list:
        return [*self.args, *self.kwargs.values()]

    def mapped(self, fn) -> "Call":
        return Call(tuple(fn(a) for a in self.args), {k: fn(v) for k, v in self.kwargs.items()})


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "dtype")


def float64(value):
    """A float64 copy of a floating-point array (PyTorch, CuPy or NumPy); anything else
    as it is."""
    if _is_torch(value):
        return value.double() if value.is_floating_point() else value
    dtype = getattr(value, "dtype", None)
    if getattr(dtype, "kind", None) == "f" and hasattr(value, "astype"):
        return value.astype("float64")
    return value


def nbytes(value) -> int:
    """The bytes an array holds (0 for anything that is not an array)."""
    if _is_torch(value):
        return int(value.numel() * value.element_size())
    size = getattr(value, "nbytes", None)
    return int(size) if isinstance(size, int) and hasattr(value, "shape") else 0


class Returned:
    """What a variant returned, handed to the check as DLPack (what the harness reads):
    a bf16 tensor as float32 (CuPy has no bf16), converted only when the check reads it,
    never in a timed or profiled launch."""

    def __init__(self, value):
        self.value = value

    def _array(self):
        value = self.value
        if _is_torch(value) and str(value.dtype) == "torch.bfloat16":
            return value.float()
        return value

    def __dlpack__(self, *args, **kwargs):
        return self._array().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array().__dlpack_device__()


def as_array(value, xp):
    """``value`` (a PyTorch, CuPy or NumPy array, or a ``Returned``) as an array of ``xp``."""
    if isinstance(value, Returned):
        value = value._array()
    if isinstance(value, xp.ndarray):
        return value
    if _is_torch(value):
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        if xp.__name__ == "numpy":
            return value.detach().cpu().numpy()
        return xp.from_dlpack(value.detach())
    if xp.__name__ != "numpy" and hasattr(value, "__dlpack__") and not hasattr(value, "__array__"):
        return xp.from_dlpack(value)
    return xp.asarray(value)


def _seed(seed) -> None:
    """The random generators a notebook's inputs draw from, seeded."""
    if seed is None:
        return
    import numpy as np

    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "cupy" in sys.modules:
        sys.modules["cupy"].random.seed(seed % 2**32)


def _named(fn) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _idea(fn) -> str:
    """The variant's one line: where its function comes from."""
    module = getattr(fn, "__module__", None)
    if module in (None, "__main__") or module.startswith("paprof_notebook_"):
        return f"{_named(fn)}() from the notebook"
    return f"{module}.{_named(fn)}()"


def _call_variant(vid: str, fn: Callable, last: dict):
    """The ``CallableVariant``'s ``fn(inputs, out, params)``: the user's function on the
    arguments, its output returned for the check; ``last["dtype"]`` the dtype of what it
    returned (the default tolerance, asked for just after the checked call)."""
    def run(inputs, out, params):
        call = inputs["call"]
        produced = fn(*call.args, **call.kwargs)
        if produced is None or isinstance(produced, (tuple, list)):
            what = "None" if produced is None else f"a {type(produced).__name__}"
            raise UserError(f"paprof.profile: variant {vid} ({_named(fn)}) returned {what}: "
                            "return its output, one array (it is checked against the reference)")
        last["dtype"] = _dtype_name(produced)
        return Returned(produced)

    return run


# -- the family -------------------------------------------------------------------------


DEFAULT_TOLERANCE = {"float64": 1e-10, "float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
"""The relative error accepted by the output's dtype when ``tolerance`` is not given
(integers and anything else: 0, exact)."""


def _dtype_name(value) -> str:
    return str(getattr(value, "dtype", "")).replace("torch.", "")


class _Measure:
    """The launcher's side: one set of inputs per configuration, made once, and the first
    variant's output on it give the output's shape and dtype and the measured work (the
    reference's output may be wider: it is computed in float64)."""

    def __init__(self, folder: Path | None, first: Callable, inputs: Callable, reference, work):
        self.folder, self.first, self.inputs, self.reference, self.work = (
            folder, first, inputs, reference, work)
        self.seen: dict[str, dict] = {}

    def expected(self, call: Call, xp):
        if self.reference is not None:
            wide = call.mapped(float64)
            made = self.reference(*wide.args, **wide.kwargs)
        else:
            made = self.first(*call.args, **call.kwargs)
        if made is None:
            raise UserError("paprof.profile: the reference returned None: return the expected output")
        return made

    def probe(self, params, xp) -> dict:
        key = params.slug()
        if key not in self.seen:
            _seed(0)
            call = make_call(self.inputs, params)
            out = self.first(*call.args, **call.kwargs)
            if out is None or not hasattr(out, "shape"):
                raise UserError(f"paprof.profile: the first variant ({_named(self.first)}) returned "
                                f"{type(out).__name__}: return its output, one array")
            shape = tuple(int(s) for s in out.shape)
            self.seen[key] = {"shape": shape, "dtype": _dtype_name(out),
                              "bytes": sum(nbytes(v) for v in call.values()) + nbytes(out)}
            del call, out
        return self.seen[key]


def make_call(inputs: Callable, params) -> Call:
    where = f"paprof.profile: inputs({params.spec()})"
    return Call.of(inputs(**params.to_values()), where)


def work_file(folder: Path, params) -> Path:
    return Path(folder) / (params.slug() + WORK_SUFFIX)


def _user_work(work: Callable, params) -> Work:
    made = work(**params.to_values())
    if isinstance(made, Work):
        return made
    if isinstance(made, dict):
        try:
            return Work(int(made.get("bytes", 0)), int(made.get("flops", 0)),
                        made.get("flop_kind", "fp32"))
        except (TypeError, ValueError) as err:
            raise UserError(f"paprof.profile: work({params.spec()}) gave {made!r}: {err}") from None
    raise UserError(f"paprof.profile: work({params.spec()}) returned {type(made).__name__}: return "
                    "{'bytes': ..., 'flops': ...} (what must move and be computed at the least)")


def make_family(name: str, configs, variants: dict, inputs: Callable, *, reference=None,
                tolerance=None, work=None, measure: bool = False, folder=None,
                module: str = "") -> Family:
    """The family of ``variants`` (name -> function of the arguments ``inputs(**config)``
    makes) at ``configs``; ``measure`` on the launcher's side (GPU), off on the
    notebook's (never calls anything of the user's)."""
    configs = check_configs(configs)
    cls = params_class(configs)
    folder = Path(folder) if folder is not None else None
    fns = list(variants.values())
    probe = _Measure(folder, fns[0], inputs, reference, work) if measure else None

    def make_inputs(params, seed, xp):
        _seed(seed)
        return {"call": make_call(inputs, params)}

    def output(params, xp):
        if probe is None:
            raise UserError("paprof.profile: the notebook's side of the family makes no output")
        return xp.empty(probe.probe(params, xp)["shape"], dtype=xp.float32)

    def expected(params, inputs_made, xp):
        made = probe.expected(inputs_made["call"], xp) if probe else None
        return as_array(made, xp).astype(xp.float64)

    def work_of(params) -> Work:
        if work is not None:
            return _user_work(work, params)
        if probe is not None:
            import numpy as np

            measured = Work(probe.probe(params, np)["bytes"])
            if folder is not None:
                _write_work(work_file(folder, params), measured)
            return measured
        return _read_work(work_file(folder, params)) if folder is not None else Work(0)

    def tolerance_of(params) -> float:
        if tolerance is not None:
            return float(tolerance(**params.to_values()) if callable(tolerance) else tolerance)
        if probe is None:
            return DEFAULT_TOLERANCE["float32"]
        import numpy as np

        dtype = last.get("dtype") or probe.probe(params, np)["dtype"]
        return DEFAULT_TOLERANCE.get(dtype, 0.0)

    last: dict = {}
    made = [CallableVariant(id=vid, idea=_idea(fn),
                            launch="the callable's own launches", fn=_call_variant(vid, fn, last))
            for vid, fn in variants.items()]
    return Family(name=name, params=cls, variants=made, inputs=make_inputs, output=output,
                  reference=expected, work=work_of, tolerance=tolerance_of,
                  summary="callables profiled with paprof.profile", folder=folder,
                  module=module or __name__)


def _write_work(path: Path, work: Work) -> None:
    from paprof.outputs import write

    write(path, json.dumps(work.to_dict()))


def _read_work(path: Path) -> Work:
    """The work the launcher measured; no bytes (unknown) before it has run."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return Work(0)
    return Work.from_dict(data) or Work(0)
