"""The family interface: everything paprof needs to know about a family of kernels.

A *family* is one problem (paged-attention decode, a row softmax, a GEMM ...) and the
kernels that solve it, in the order of their story. paprof's profiler, run store,
bench, gate and reports know a family only through what this module defines:

``Params``
    the problem's parameters, a frozen dataclass per family. Each field is declared with
    :func:`param` (default, aliases, bounds, choices, help) and typed with ``int``,
    ``float``, ``str``, ``bool``, ``tuple[int, ...]`` or ``int | tuple[int, ...]``.
    ``Params.parse("rows=4096,cols=1024")`` reads the ``--shape`` text (duplicate keys,
    unknown keys, values out of bounds: one-line :class:`ParamError`), ``spec()`` writes
    text that parses back, ``slug()`` a file-safe id, ``to_dict()`` plain JSON values.
    Cross-field rules go in ``validate()``.
``Work``
    the work model: the bytes that must move through device memory and the FLOPs that
    must be done for given parameters. Throughput (TB/s, TFLOP/s) and the share of the
    measured ceilings are derived from it.
``CudaVariant`` / ``CallableVariant`` / ``CommandVariant``
    the three kinds of variant: a CUDA source compiled at run time, a Python callable that
    launches on the current stream (Triton, PyTorch, CuPy), an external program profiled
    inside its NVTX range (no reference check: "not verified").
``Family``
    the parameters class, the variants, and three functions of the parameters: ``inputs``
    (fresh random arrays from a seed), ``output`` (the array the variant writes; paprof
    poisons it with NaN before every check) and ``reference`` (the expected output in
    float64), with a tolerance on ``||out - ref|| / ||ref||``. A reference too costly for the
    whole output returns a :class:`Sample` instead: float64 values on chosen rows, each row
    held to the tolerance on its own. ``ceiling`` names the measured ceiling the family's
    throughput is held to: the DRAM read ceiling (the default) or a tensor-core GEMM's.

A family module must import without a GPU: CuPy, PyTorch or Triton are imported inside
the functions that launch, never at module level. The functions receive ``xp``, the array
module (NumPy in tests, CuPy on the GPU). See ``examples/custom_family/`` for a complete
family in a user's repository, and ``kernels/paprof_kernels/paged_decode/`` and
``kernels/paprof_kernels/flash_fwd/`` for the built-in ones (the second uses a sampled
reference, PyTorch peers that return their own output, and the GEMM ceiling).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from paprof.errors import ShapeError, UserError

ParamError = ShapeError
"""Bad parameters, or parameters a variant cannot take: one line, exit 2."""

INT_LIMIT = 2**31 - 1
"""The largest integer parameter accepted unless a field sets its own ``max``."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
"""What a variant id may be: a file name in the run store (``Variant.check_id``)."""
_ID = ID_PATTERN


# ---------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamInfo:
    """What :func:`param` records about one field (kept in the field's metadata)."""

    aliases: tuple[str, ...] = ()
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    omit_default: bool = False
    """Leave the field out of ``spec()`` while it has its default (an optional knob)."""
    key: str | None = None
    """The key ``spec()``, help and errors use, when it is not the field's name
    (``num_elements`` written ``n``); the field's name is then accepted as an alias."""


def param(default, *, aliases: Sequence[str] = (), help: str = "", min=None, max=None,
          choices: Sequence | None = None, omit_default: bool = False, key: str | None = None):
    """Declare a parameter field: ``batch: int = param(64, aliases=("b",), min=1)``."""
    info = ParamInfo(tuple(aliases), help, min, max, tuple(choices) if choices else None,
                     omit_default, key)
    return field(default=default, metadata={"paprof": info})


def _kind_of(hint) -> str:
    """``int``, ``float``, ``str``, ``bool``, ``ints`` (tuple of ints) or ``int|ints``."""
    if hint in (int, float, str, bool):
        return hint.__name__
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple and args in ((int, ...),):
        return "ints"
    if origin in (typing.Union, types.UnionType) and set(args) == {int, tuple[int, ...]}:
        return "int|ints"
    raise TypeError(f"parameter type {hint!r} is not supported; use int, float, str, bool, "
                    "tuple[int, ...] or int | tuple[int, ...]")


@dataclass(frozen=True)
class Field:
    """One parameter as the parser sees it."""

    name: str
    kind: str
    default: Any
    info: ParamInfo

    @property
    def key(self) -> str:
        """The key as written in ``spec()``, help and errors."""
        return self.info.key or self.name

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key that names the field: its key, its name, its aliases."""
        return tuple(dict.fromkeys((self.key, self.name, *self.info.aliases)))

    def describe(self) -> str:
        """``batch (int, default 64, aliases b)``: for ``--help`` and ``paprof list``."""
        bits = [self.kind.replace("ints", "ints a:b:c"), f"default {format_value(self.default)}"]
        if self.info.choices:
            bits.append("one of " + "/".join(map(str, self.info.choices)))
        if len(self.keys) > 1:
            bits.append("also " + ", ".join(self.keys[1:]))
        text = f"{self.key} ({', '.join(bits)})"
        return f"{text}: {self.info.help}" if self.info.help else text


def format_value(value) -> str:
    """A parameter value as ``--shape`` text: tuples as ``1:17:4096``, booleans lower-case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ":".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _parse_int(key: str, text: str) -> int:
    try:
        return int(text.strip().replace("_", ""), 10)
    except ValueError:
        raise ParamError(f"{key} must be an integer, got {text!r}") from None


def parse_value(f: Field, key: str, text: str):
    if f.kind == "int":
        return _parse_int(key, text)
    if f.kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise ParamError(f"{key} must be a number, got {text!r}") from None
        return value
    if f.kind == "bool":
        low = text.strip().lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise ParamError(f"{key} must be true or false, got {text!r}")
    if f.kind == "str":
        return text.strip()
    # ints, or int|ints
    if ":" in text or f.kind == "ints":
        return tuple(_parse_int(key, part) for part in text.split(":"))
    return _parse_int(key, text)


class Params:
    """Base of a family's parameters. Subclass it as a frozen dataclass::

        @dataclass(frozen=True)
        class Size(Params):
            rows: int = param(4096, min=1, help="rows of the matrix")
            cols: int = param(1024, min=32, max=65536)

    Values are checked on construction (types, bounds, choices, then ``validate()``).
    """

    # -- the fields ----------------------------------------------------------------------
    @classmethod
    def fields(cls) -> list[Field]:
        cached = cls.__dict__.get("_paprof_fields")
        if cached is not None:
            return cached
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a @dataclass(frozen=True)")
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{f.name} needs a default (use param(...))")
            out.append(Field(f.name, _kind_of(hints[f.name]), f.default,
                             f.metadata.get("paprof", ParamInfo())))
        keys: dict[str, str] = {}
        for f in out:
            for key in f.keys:
                if key in keys:
                    raise TypeError(f"{cls.__name__}: key {key!r} names both {keys[key]} and {f.name}")
                keys[key] = f.name
        setattr(cls, "_paprof_fields", out)
        return out

    @classmethod
    def _keys(cls) -> dict[str, Field]:
        return {key: f for f in cls.fields() for key in f.keys}

    # -- checks ----------------------------------------------------------------------------
    def __post_init__(self):
        for f in self.fields():
            value = getattr(self, f.name)
            if isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, f.name, value)
            self._check_field(f, value)
        try:
            self.validate()
        except ParamError:
            raise
        except Exception as err:  # a family's own check is the family's to fix
            raise UserError(f"{type(self).__module__}.{type(self).__name__}.validate() failed "
                            f"({_one_line(err)})") from None

    def _check_field(self, f: Field, value) -> None:
        kind, info = f.kind, f.info
        values = value if isinstance(value, tuple) else (value,)
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok and not math.isfinite(value):
                raise ParamError(f"{f.key} must be a finite number, got {value!r}")
        elif kind == "str":
            ok = isinstance(value, str)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            is_tuple = isinstance(value, tuple)
            if kind == "ints" and not is_tuple:
                ok = False
            else:
                ok = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
                ok = ok and (not is_tuple or len(values) > 0)
        if not ok:
            raise ParamError(f"{f.key} must be {f.kind.replace('|', ' or ').replace('ints', 'integers a:b:c')}, "
                             f"got {value!r}")
        if info.choices is not None and value not in info.choices:
            raise ParamError(f"{f.key} must be one of {', '.join(map(str, info.choices))}, got {value!r}")
        if kind in ("int", "float", "ints", "int|ints"):
            low = info.min
            high = info.max if info.max is not None else (INT_LIMIT if kind != "float" else None)
            for v in values:
                if low is not None and v < low:
                    raise ParamError(f"{f.key} must be at least {low}, got {v}")
                if high is not None and v > high:
                    raise ParamError(f"{f.key} must be at most {high}, got {v}")

    def validate(self) -> None:
        """Cross-field rules (``rows`` a multiple of ``tile`` ...): raise ``ParamError``."""

    # -- text ------------------------------------------------------------------------------
    @classmethod
    def resolve(cls, values: dict, given: set[str]) -> dict:
        """Adjust parsed values before construction (``given``: the fields named in the
        text). The default changes nothing; a family may derive one field from another."""
        return values

    @classmethod
    def parse(cls, text: str | None = None, base: "Params | None" = None):
        """``key=value,...`` (any alias of a key) over ``base`` (the defaults when None)."""
        keys = cls._keys()
        values = (base if base is not None else cls()).to_values()
        given: dict[str, str] = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            if "=" not in item:
                example = ",".join(f"{f.key}={format_value(f.default)}" for f in cls.fields()[:2])
                raise ParamError(f"parameter {item!r} is not KEY=VALUE (e.g. {example})")
            key, value = (s.strip() for s in item.split("=", 1))
            f = keys.get(key)
            if f is None:
                raise ParamError(f"unknown parameter {key!r}; known: "
                                 + ", ".join(g.key for g in cls.fields()))
            if f.name in given:
                raise ParamError(f"parameter {f.key} is given twice ({given[f.name]}=..., {key}=...)")
            if not value:
                raise ParamError(f"parameter {key} has no value")
            given[f.name] = key
            values[f.name] = parse_value(f, key, value)
        values = cls.resolve(values, set(given))
        return cls(**values)

    def to_values(self) -> dict:
        """Field name -> value (tuples kept), in declaration order."""
        return {f.name: getattr(self, f.name) for f in self.fields()}

    def to_dict(self) -> dict:
        """Field name -> JSON value (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.to_values().items()}

    @classmethod
    def from_dict(cls, data: dict):
        """The inverse of ``to_dict`` (unknown keys are an error)."""
        names = {f.name for f in cls.fields()}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ParamError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(names))}")
        return cls(**data)

    def spec(self) -> str:
        """The ``--shape`` text that parses back into these parameters."""
        parts = []
        for f in self.fields():
            value = getattr(self, f.name)
            if f.info.omit_default and value == f.default:
                continue
            parts.append(f"{f.key}={format_value(value)}")
        return ",".join(parts)

    def slug(self) -> str:
        """A file-name-safe id, ``rows4096_cols1024``; long tuples become a digest."""
        parts = []
        for f in self.fields():
            value = getattr(self, f.name)
            if f.info.omit_default and value == f.default:
                continue
            if isinstance(value, tuple):
                text = "-".join(map(str, value))
                if len(text) > 40:
                    text = f"{len(value)}x-max{max(value)}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"
            else:
                text = format_value(value)
            text = re.sub(r"[^A-Za-z0-9.+-]+", "-", text)
            parts.append(text if f.kind == "str" else f"{f.key.replace('_', '')}{text}")
        text = "_".join(parts) or "default"
        # never a hidden or temporary-looking file name (the store's readers skip those)
        text = re.sub(r"^\.+", lambda m: "-" * len(m.group()), text).replace(".tmp-", "-tmp-")
        if len(text) > 120:
            text = f"{text[:100]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"
        return text


# ---------------------------------------------------------------------------------------
# The work model
# ---------------------------------------------------------------------------------------

FLOP_KINDS = ("fp32", "tensor", "fp64")
"""Which compute roof the FLOPs are measured against: CUDA-core fp32, tensor cores, fp64."""


@dataclass(frozen=True)
class Work:
    """What the problem costs at the least, whatever the kernel does."""

    bytes: int
    """Bytes that must move through device memory: each input read once, each output
    written once (re-reads are the kernel's own cost, not the problem's)."""
    flops: int = 0
    """Floating-point operations that must be done (a multiply-add counts two)."""
    flop_kind: str = "fp32"
    """The unit that does them (``FLOP_KINDS``): which compute ceiling they are held to."""

    def __post_init__(self):
        for key in ("bytes", "flops"):
            value = getattr(self, key)
            if (not isinstance(value, (int, float)) or isinstance(value, bool)
                    or not math.isfinite(value)):
                raise ValueError(f"work {key} must be a finite number, got {value!r}")
        if self.bytes < 0 or self.flops < 0:
            raise ValueError(f"work must not be negative: {self}")
        if self.flop_kind not in FLOP_KINDS:
            raise ValueError(f"flop_kind must be one of {FLOP_KINDS}, got {self.flop_kind!r}")

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte (None without bytes)."""
        return self.flops / self.bytes if self.bytes else None

    def to_dict(self) -> dict:
        return {"bytes": int(self.bytes), "flops": int(self.flops), "flop_kind": self.flop_kind}

    @classmethod
    def from_dict(cls, data: dict | None) -> "Work | None":
        if not isinstance(data, dict) or data.get("bytes") is None:
            return None
        return cls(int(data["bytes"]), int(data.get("flops") or 0), data.get("flop_kind") or "fp32")


def throughput(work: "Work | dict | None", duration_us: float | None) -> dict:
    """``{"tbs": ..., "tflops": ...}`` for work done in ``duration_us`` (None where unknown)."""
    if isinstance(work, dict):
        work = Work.from_dict(work)
    if work is None or not duration_us or duration_us <= 0:
        return {"tbs": None, "tflops": None}
    return {"tbs": work.bytes / duration_us / 1e6,
            "tflops": work.flops / duration_us / 1e6 if work.flops else None}


# ---------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------


def _accept_all(params) -> None:
    return None


@dataclass(frozen=True)
class Variant:
    """What every kind of variant has. Use one of the three kinds below."""

    id: str
    """Unique within the family (``baseline``, ``v1`` ...): also a folder of the run store."""
    idea: str
    """One line: what this version changes and why it should be faster."""
    kernel_regex: str | None = None
    """Matches the names of the kernels it launches (ncu's kernel filter, the grouping of
    a report's rows, the static gate's choice of a cubin's kernels; searched, so anchor it
    with ``^...$`` to mean one name exactly). None: every kernel inside the variant's NVTX
    range. A ``CudaVariant`` with a declared ``kernel`` defaults to that name exactly
    (``^vadd$``)."""
    launch: str = ""
    """Grid and block in words, for ``paprof list`` and the reports."""
    accepts: Callable[[Any], None] = field(default=_accept_all, repr=False, compare=False)
    """Raises ``ParamError`` (one line, why) for parameters the variant cannot take."""
    order: int | None = None
    """Position in the story; None: the position in the family's list."""
    family: str = ""
    """Set by the family that holds the variant."""

    kind: ClassVar[str] = ""

    def __post_init__(self):
        if not _ID.match(self.id or "") or ".tmp-" in self.id or len(self.id) > 100:
            raise ValueError(f"variant id {self.id!r}: letters, digits, '_', '.', '+', '-' only (no '.tmp-', at most 100 characters)")

    @property
    def name(self) -> str:
        return f"{self.family}/{self.id}" if self.family else self.id

    @property
    def nvtx_range(self) -> str:
        """The NVTX push/pop range the launcher wraps the profiled launches in."""
        return f"{self.family}.{self.id}"

    @property
    def verified(self) -> bool:
        """True when paprof checks this kind against the family's reference."""
        return True

    def check(self, params) -> None:
        """Raise ``ParamError`` when the variant cannot take ``params``."""
        self.accepts(params)

    def kernel_regex_for(self, params) -> str | None:
        """``kernel_regex`` at ``params`` (a ``CudaVariant`` whose kernel the parameters
        pick has no fixed one)."""
        return self.kernel_regex

    def to_dict(self) -> dict:
        return {"family": self.family, "variant": self.id, "kind": self.kind, "idea": self.idea,
                "kernel_regex": self.kernel_regex, "launch": self.launch}


ArgsFn = Callable[[Any, dict, Any], tuple]


@dataclass(frozen=True)
class CudaVariant(Variant):
    """A CUDA source compiled at run time (CuPy ``RawModule``, cached on disk).

    Either declare one kernel (``kernel``, ``grid``, ``block``, ``args`` and optionally
    ``shared_mem`` and ``defines``, each a value or a function of the parameters) or give
    ``build(variant, params, device) -> Launcher`` for anything more (several kernels,
    scratch buffers, a choice of code path).
    """

    sources: tuple[str, ...] = ()
    """``.cu`` files, relative to the family's folder (``Family.folder``) or absolute."""
    kernel: Any = None
    """The ``extern "C" __global__`` function to launch (declarative form), or
    ``fn(params) -> str`` where a family parameter picks it (``f"gemm_{params.dtype}"``)."""
    grid: Any = None
    """``(x, y, z)`` or ``fn(params) -> tuple``."""
    block: Any = None
    """``(x, y, z)`` or ``fn(params) -> tuple``."""
    args: ArgsFn | None = field(default=None, repr=False, compare=False)
    """``fn(params, inputs, out) -> tuple`` of kernel arguments (NumPy scalars for values)."""
    shared_mem: Any = 0
    """Dynamic shared memory in bytes, or ``fn(params) -> int``."""
    defines: Any = None
    """``-D`` macros: a dict, or ``fn(params) -> dict``."""
    options: Any = None
    """Compiler options, the same for NVRTC (the run) and nvcc (the static gate, the SASS
    hash): a tuple, or ``fn(params) -> tuple``, of ``-maxrregcount=N``, ``--use_fast_math``,
    ``-lineinfo``, ``--ftz=true|false``, ``--prec-div=true|false``,
    ``--prec-sqrt=true|false``, ``--fmad=true|false`` (``COMPILER_OPTIONS``); macros go in
    ``defines``. A ``build`` hook passes ``variant.compiler_options(params)`` to
    ``paprof.measure.kernels.gpu.compile_module`` itself."""
    arch: str | None = None
    """The one GPU target this variant compiles for (``"sm_90a"``: Hopper's wgmma and its
    kin, which exist only for the ``a`` target), or None for CuPy's choice for the current
    GPU. A variant with an arch is skipped, with the reason, on a GPU of another compute
    capability; the static gate compiles it for this arch too."""
    build: Callable | None = field(default=None, repr=False, compare=False)
    """``fn(variant, params, device) -> Launcher``: replaces the declarative form."""
    compile_units: Callable | None = field(default=None, repr=False, compare=False)
    """``fn(params) -> [(sources, defines), ...]``: what a ``build`` hook compiles for these
    parameters (sources as in ``sources``), for the static gate (``paprof check
    --static``). The declarative form needs none: its ``sources`` and ``defines``."""
    folder: Path | None = None
    """Set by the family: where ``sources`` live."""

    kind: ClassVar[str] = "cuda"

    def __post_init__(self):
        super().__post_init__()
        if self.build is None and not (self.kernel and self.grid and self.block and self.args):
            raise ValueError(f"CUDA variant {self.id}: give build=..., or kernel, grid, block and args")
        if not self.sources:
            raise ValueError(f"CUDA variant {self.id}: name its .cu sources")
        if self.kernel_regex is None and isinstance(self.kernel, str) and self.kernel:
            object.__setattr__(self, "kernel_regex", kernel_name_regex(self.kernel))
        if self.options is not None and not callable(self.options):
            check_compiler_options(self.options, self.id)

    def kernel_name(self, params) -> str | None:
        """The kernel launched at ``params`` (``kernel``, called when the parameters pick it)."""
        name = self.kernel(params) if callable(self.kernel) else self.kernel
        if name is not None and not (isinstance(name, str) and re.fullmatch(r"[A-Za-z_]\w*", name)):
            raise UserError(f"CUDA variant {self.id}: its kernel function returned {name!r}, "
                            "not a C identifier")
        return name

    def kernel_regex_for(self, params) -> str | None:
        if self.kernel_regex is not None or self.kernel is None:
            return self.kernel_regex
        return kernel_name_regex(self.kernel_name(params))

    def compiler_options(self, params) -> tuple[str, ...]:
        """The compiler options at ``params`` (``options``), checked."""
        given = self.options(params) if callable(self.options) else self.options
        return check_compiler_options(given or (), self.id)

    def source_paths(self) -> list[Path]:
        base = self.folder or Path.cwd()
        return [Path(s) if Path(s).is_absolute() else base / s for s in self.sources]

    def to_dict(self) -> dict:
        options = "set by the parameters" if callable(self.options) else list(self.options or ())
        return {**super().to_dict(), "sources": [str(p) for p in self.source_paths()],
                "options": options}


COMPILER_OPTIONS = (
    r"-{1,2}maxrregcount=\d+", r"-{1,2}use_fast_math", r"-lineinfo", r"--generate-line-info",
    r"--(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
)
"""The compiler options a CUDA variant may give (``CudaVariant.options``): those NVRTC and
nvcc spell alike and that change the code, not where it goes."""


def check_compiler_options(options, variant: str) -> tuple[str, ...]:
    """``options`` as a tuple of strings when each is one of ``COMPILER_OPTIONS``; else a
    one-line ``UserError`` naming the variant and the option."""
    if isinstance(options, str):
        options = (options,)
    out = []
    for option in options:
        if not isinstance(option, str) or not any(re.fullmatch(p, option) for p in COMPILER_OPTIONS):
            raise UserError(
                f"CUDA variant {variant}: compiler option {option!r} is not one paprof passes "
                "to both NVRTC and nvcc (-maxrregcount=N, --use_fast_math, -lineinfo, "
                "--ftz=, --prec-div=, --prec-sqrt=, --fmad=true|false); macros go in defines")
        out.append(option)
    return tuple(out)


def kernel_name_regex(kernel: str) -> str:
    """The ``kernel_regex`` a declared kernel gets by default: its name and nothing else,
    anchored (``^vadd$``), so that ``vadd`` does not also pick up ``vadd4``. Python's
    ``re.search`` (the static gate) and ncu's ``-k regex:`` (the profiler) both read it."""
    return f"^{re.escape(kernel)}$"


def _ref(obj) -> str | None:
    """``module:function`` naming a function (a string as it is; None for None)."""
    if obj is None or isinstance(obj, str):
        return obj
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', '?')}"


@dataclass(frozen=True)
class CallableVariant(Variant):
    """A Python function that launches on the current stream: ``fn(inputs, out, params)``.

    ``inputs`` is the family's dict of arrays and ``out`` the output, as CuPy arrays or
    (``arrays="torch"``) as PyTorch tensors sharing the same memory (DLPack, no copy).
    ``fn`` is a function or ``"module:function"``, imported when the variant is built, so
    the family module itself need not import Triton or PyTorch. The first call (compiling,
    autotuning) happens before timing and outside the profiled range.

    A framework operation that allocates its own output (PyTorch's
    ``scaled_dot_product_attention`` has no ``out=``) may return that array instead of
    writing into ``out``: paprof then checks what the first call returned (any array with
    ``__dlpack__``, of the output's size), and no copy is timed or profiled. It may raise
    ``ParamError`` when the framework turns the parameters down at run time (no kernel for
    them): the variant is then skipped, as when ``accepts`` refuses.

    Work that must happen once for given inputs and never inside the timing (a library's
    plan for the batch layout, a workspace, the inputs converted to another type) goes in
    ``prepare(inputs, out, params) -> launch``: called once for each input set as the
    variant is prepared, before any check, timing or profile; ``launch()`` then enqueues
    one step on those inputs. With ``prepare``, ``fn`` is not needed.
    """

    fn: Any = None
    arrays: str = "cupy"
    prepare: Any = None
    """``prepare(inputs, out, params) -> launch``: a function or ``"module:function"``."""

    kind: ClassVar[str] = "callable"

    def __post_init__(self):
        super().__post_init__()
        if self.fn is None and self.prepare is None:
            raise ValueError(f"callable variant {self.id}: give fn=function or 'module:function' "
                             "(or prepare=...)")
        if self.arrays not in ("cupy", "torch"):
            raise ValueError(f"callable variant {self.id}: arrays must be 'cupy' or 'torch'")

    @property
    def fn_ref(self) -> str:
        return _ref(self.fn if self.fn is not None else self.prepare)

    def resolve_fn(self) -> Callable:
        return self.fn if callable(self.fn) else load_object(self.fn, what=f"variant {self.id}'s fn")

    def resolve_prepare(self) -> Callable | None:
        if self.prepare is None or callable(self.prepare):
            return self.prepare
        return load_object(self.prepare, what=f"variant {self.id}'s prepare")

    def to_dict(self) -> dict:
        extra = {"prepare": _ref(self.prepare)} if self.prepare is not None else {}
        return {**super().to_dict(), "fn": self.fn_ref, "arrays": self.arrays, **extra}


@dataclass(frozen=True)
class CommandVariant(Variant):
    """An external program, profiled inside its own NVTX range; never verified.

    Made by ``paprof run --cmd '...' --nvtx-range NAME --name ID``: paprof knows neither
    its inputs nor a reference, so every report says "not verified".
    """

    command: tuple[str, ...] = ()
    range_name: str = ""
    """The program's NVTX range (``domain@range`` where it uses a domain)."""

    kind: ClassVar[str] = "command"

    def __post_init__(self):
        super().__post_init__()
        if not self.command:
            raise ValueError("command variant: give the command to run")

    @property
    def nvtx_range(self) -> str:
        return self.range_name

    @property
    def verified(self) -> bool:
        return False

    def to_dict(self) -> dict:
        return {**super().to_dict(), "command": list(self.command), "nvtx_range": self.range_name}


# ---------------------------------------------------------------------------------------
# What building a variant gives (GPU side fills these in; the classes need no GPU)
# ---------------------------------------------------------------------------------------


@dataclass
class KernelLaunch:
    """One kernel a variant launches, as it is configured."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int = 0
    registers: int | None = None
    static_smem: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Launcher:
    """Enqueues one step of a variant: ``launcher(inputs, out)``.

    ``kernels`` lists what it launches where that is known (a CUDA variant); ``details``
    holds the choices it made for these parameters (``{"splits": 16}``), which the
    run records and the reports show. ``said`` and ``why`` say those choices in the
    family's own words, recorded with the run (``launch_words``) so that a stored run
    explains itself wherever it is read: ``said`` one clause or several, each read after
    the variant's label ("split each sequence 16 ways (splits 16)"), ``why`` what made
    the first one right here ("512 CTAs where 32 would leave 100 of 132 SMs idle"), said
    after it where a sentence has room. Without words the reports say the raw details
    ("v6 chose splits 16", :func:`chose`). ``convert``, when set, turns each array into
    what ``run`` takes (a PyTorch tensor over the same memory): the harness applies it
    once. ``setup``, when set, is called once for each (converted) input set and the
    output before any step on them, outside timing and profiling (a callable's
    ``prepare``).
    """

    variant: str
    kernels: list[KernelLaunch]
    run: Callable = field(repr=False)
    details: dict = field(default_factory=dict)
    convert: Callable | None = field(default=None, repr=False)
    setup: Callable | None = field(default=None, repr=False)
    said: str | Sequence[str] = ()
    why: str = ""

    def __call__(self, inputs, out):
        """Enqueue one step; what ``run`` returns (a callable's own output, or None)."""
        return self.run(inputs, out)

    def words(self) -> dict | None:
        """The run record's ``launch_words``: ``{"said": [clause, ...], "why": text}``
        (``why`` left out when empty); None when the family said nothing."""
        said = [self.said] if isinstance(self.said, str) else list(self.said)
        said = [str(clause) for clause in said if clause]
        if not said:
            return None
        return {"said": said, **({"why": str(self.why)} if self.why else {})}


def chose(details: dict) -> str:
    """A variant's launch choices as they were recorded, read after its label: "chose
    splits 16, order longest" (what the reports say for a run without words)."""
    return "chose " + ", ".join(f"{key} {value}" for key, value in details.items())


# ---------------------------------------------------------------------------------------
# The family
# ---------------------------------------------------------------------------------------

CEILINGS = ("read", "gemm")
"""The measured ceilings a family can be held to (``Family.ceiling``)."""


@dataclass
class Family:
    """A kernel family: parameters, variants, inputs, reference, tolerance, work model."""

    name: str
    """Family id: ``[a-z_][a-z0-9_]*``, also a folder of the run store."""
    params: type
    """The family's ``Params`` subclass."""
    variants: Sequence[Variant]
    """In story order (or ordered by their ``order``)."""
    inputs: Callable[[Any, int | None, Any], dict]
    """``inputs(params, seed, xp) -> {name: array}``: fresh random values, never zeros."""
    output: Callable[[Any, Any], Any]
    """``output(params, xp) -> array`` the variant writes into."""
    reference: Callable[[Any, dict, Any], Any]
    """``reference(params, inputs, xp) -> array``, the expected output in float64, or a
    :class:`Sample` of it (chosen rows only, for outputs too large to compute whole)."""
    work: Callable[[Any], Work]
    """``work(params) -> Work``: bytes that must move, FLOPs that must be done."""
    tolerance: float | Callable[[Any], float] = 1e-5
    """Largest accepted ``||out - ref|| / ||ref||``: a number or ``fn(params)`` (for a
    :class:`Sample`, the largest over its rows)."""
    summary: str = ""
    """One line: what the family computes."""
    folder: Path | None = None
    """Where relative CUDA sources live; default: the folder of the module defining it."""
    gate_metrics: tuple[str, ...] = ()
    """The regression gate's default metrics (empty: the gate's own defaults)."""
    notes: tuple[str, ...] = ()
    """Extra sentences for the reports' story (one idea each)."""
    origin: str = ""
    """Where discovery found it (``entry point NAME of DIST``, ``[tool.paprof] of PATH``)."""
    module: str = ""
    """The module that defines it (recorded with runs; set automatically)."""
    ceiling: str = "read"
    """The measured ceiling ``bench`` holds the family to (``CEILINGS``): ``read``, the
    streaming-read DRAM ceiling (TB/s); ``gemm``, a cuBLAS bf16 GEMM's FLOP rate (TFLOP/s),
    for work whose ``flop_kind`` is ``tensor``. The read ceiling is measured either way."""
    arch: str | None = None
    """The GPU target the static gate compiles the CUDA variants for when neither the
    variant (``CudaVariant.arch``) nor ``baseline update --static --arch`` names one
    (``"sm_90"`` for an H100 or H200, ``"sm_80"`` for an A100). paprof assumes no GPU."""

    def __post_init__(self):
        if not re.match(r"^[a-z_][a-z0-9_]*$", self.name or ""):
            raise ValueError(f"family name {self.name!r}: lower-case letters, digits and '_'")
        if self.ceiling not in CEILINGS:
            raise ValueError(f"family {self.name}: ceiling must be one of {', '.join(CEILINGS)}, "
                             f"got {self.ceiling!r}")
        if not (isinstance(self.params, type) and issubclass(self.params, Params)):
            raise ValueError(f"family {self.name}: params must be a Params subclass")
        self.params.fields()  # type errors surface when the family is defined
        caller = sys._getframe(2).f_globals  # the module that writes Family(...)
        if not self.module:
            self.module = caller.get("__name__", "")
        if self.folder is None and caller.get("__file__"):
            self.folder = Path(caller["__file__"]).resolve().parent
        ids, attached = set(), []
        for i, v in enumerate(self.variants):
            if not isinstance(v, Variant):
                raise ValueError(f"family {self.name}: {v!r} is not a Variant")
            if v.id in ids:
                raise ValueError(f"family {self.name}: variant id {v.id!r} appears twice")
            ids.add(v.id)
            changes: dict = {"family": self.name, "order": i if v.order is None else v.order}
            if isinstance(v, CudaVariant) and v.folder is None:
                changes["folder"] = self.folder
            attached.append(dataclasses.replace(v, **changes))
        self.variants = sorted(attached, key=lambda v: v.order)

    # -- parameters --------------------------------------------------------------------
    def parse(self, text: str | None = None):
        return self.params.parse(text)

    def tolerance_for(self, params) -> float:
        """The verification tolerance at ``params``: a finite number, 0 or more (0: the
        answer must be exact, as a transpose's is; an infinite, NaN or negative one would
        pass, or fail, every answer: a one-line ``UserError``)."""
        try:
            value = float(self.tolerance(params) if callable(self.tolerance) else self.tolerance)
        except Exception as err:  # the family's own function
            raise UserError(f"family {self.name}: tolerance failed ({_one_line(err)})") from None
        if not math.isfinite(value) or value < 0:
            raise UserError(f"family {self.name}: the verification tolerance must be a finite "
                            f"number, 0 or more, got {value!r} (it would pass or fail any answer)")
        return value

    def variant(self, vid: str) -> Variant:
        for v in self.variants:
            if v.id == vid:
                return v
        raise UserError(f"family {self.name} has no variant {vid!r}; it has: "
                        + ", ".join(v.id for v in self.variants))

    def describe(self) -> dict:
        """What ``paprof list --json`` shows of the family."""
        return {
            "family": self.name,
            "summary": self.summary,
            "origin": self.origin,
            "module": self.module,
            "params": [{"name": f.key, "field": f.name, "kind": f.kind,
                        "default": _jsonable(f.default), "aliases": list(f.keys[1:]),
                        "help": f.info.help}
                       for f in self.params.fields()],
            "default_shape": self.params().spec(),
            "gate_metrics": list(self.gate_metrics),
            "ceiling": self.ceiling,
        }

    def work_of(self, params) -> Work:
        """``work(params)``, checked (``checked_work``)."""
        return checked_work(self, params)

    def holds_to_gemm(self, work: Work) -> bool:
        """True when this work is held to the GEMM ceiling (a ``gemm`` family's tensor-core
        FLOPs; its fp32 shapes are not)."""
        return self.ceiling == "gemm" and work.flop_kind == "tensor" and work.flops > 0


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


def checked_work(family, params) -> Work:
    """``family.work(params)``, checked: a ``Work`` of finite, non-negative bytes and
    FLOPs; anything else (or an exception) is a one-line ``UserError`` naming the family."""
    name = getattr(family, "name", "?")
    spec = params.spec() if hasattr(params, "spec") else params
    try:
        work = family.work(params)
    except Exception as err:  # the family's work model is the family's to fix
        raise UserError(f"family {name}: work({spec}) failed ({_one_line(err)})") from None
    if not isinstance(work, Work):
        raise UserError(f"family {name}: work({spec}) returned {type(work).__name__}, "
                        "not a paprof.family.Work")
    return work


def _one_line(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return (text.splitlines() or [type(err).__name__])[0][:300]


# ---------------------------------------------------------------------------------------
# Verification: shared by every family
# ---------------------------------------------------------------------------------------


def relative_error(out, ref, xp=None) -> float:
    """``||out - ref|| / ||ref||`` in float64; a non-finite value anywhere gives inf."""
    import numpy as np

    xp = xp or np
    out = out.astype(xp.float64)
    ref = ref.astype(xp.float64)
    if not bool(xp.isfinite(out).all()):
        return math.inf
    norm = float(xp.linalg.norm(ref))
    diff = float(xp.linalg.norm(out - ref))
    return diff / norm if norm else (0.0 if diff == 0 else math.inf)


@dataclass
class Sample:
    """A reference on chosen rows of the output, for outputs too large to compute whole.

    ``out[index]`` (NumPy/CuPy fancy indexing) are the checked elements; ``values`` their
    float64 expected values, of the same shape. A *row* is a vector along the last axis:
    each is held to the tolerance on its own (``||out_r - ref_r|| / ||ref_r||``, the largest
    over the rows is the error), so that one wrong row among thousands cannot hide in a
    norm. ``decode(array, xp)`` gives the float64 values of output elements where the
    output's storage is not a float type (bf16 bit patterns); None: ``astype(float64)``.
    Every element of the output, sampled or not, must still be finite: the check poisons
    the output with NaN first, so an element no one wrote fails.
    """

    index: tuple
    values: Any
    decode: Callable | None = field(default=None, repr=False)

    def as_float(self, array, xp):
        """``array`` (output elements) as float64 values."""
        return self.decode(array, xp) if self.decode is not None else array.astype(xp.float64)

    def take(self, out, xp):
        """The sampled elements of ``out`` as float64."""
        return self.as_float(out[self.index], xp)

    def all_finite(self, out, xp) -> bool:
        """Every element of ``out`` finite (decoded some 64 M elements at a time)."""
        if out.ndim == 0 or out.size == 0:
            return bool(xp.isfinite(self.as_float(out, xp)).all())
        step = max(1, (1 << 26) // max(1, out.size // out.shape[0]))
        return all(bool(xp.isfinite(self.as_float(out[i:i + step], xp)).all())
                   for i in range(0, out.shape[0], step))

    def error(self, out, xp) -> tuple[float, float]:
        """(largest relative error over the sampled rows, largest absolute error); inf when
        any element of ``out`` is not finite."""
        if not self.all_finite(out, xp):
            return math.inf, math.inf
        got = self.take(out, xp)
        ref = self.values.astype(xp.float64)
        if got.shape != ref.shape:
            raise ValueError(f"sampled output shape {got.shape} != reference {ref.shape}")
        return row_relative_error(got, ref, xp), float(xp.abs(got - ref).max()) if ref.size else 0.0


def row_relative_error(got, ref, xp=None) -> float:
    """The largest ``||got_r - ref_r|| / ||ref_r||`` over the rows (last axis) in float64;
    a row whose reference is zero counts 0 when matched exactly, else inf."""
    import numpy as np

    xp = xp or np
    got = got.astype(xp.float64)
    ref = ref.astype(xp.float64)
    if not bool(xp.isfinite(got).all()):
        return math.inf
    if ref.size == 0:
        return 0.0
    diff = xp.linalg.norm((got - ref).reshape(-1, ref.shape[-1]), axis=-1)
    norm = xp.linalg.norm(ref.reshape(-1, ref.shape[-1]), axis=-1)
    exact = diff == 0
    rel = xp.where(norm > 0, diff / xp.where(norm > 0, norm, 1.0), xp.where(exact, 0.0, xp.inf))
    return float(rel.max())


# ---------------------------------------------------------------------------------------
# Loading user code
# ---------------------------------------------------------------------------------------


def import_module(name: str, what: str = "module"):
    """Import a user's module; a one-line ``UserError`` naming it when that fails."""
    import importlib

    try:
        return importlib.import_module(name)
    except SystemExit as err:  # sys.exit() at import: not paprof's exit status
        raise UserError(f"{what}: importing module {name!r} called sys.exit({err.code!r})") from None
    except Exception as err:  # any failure in a user's module is the user's to fix
        detail = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"{what}: importing module {name!r} failed ({detail})") from None


def load_object(ref: str, what: str = "object"):
    """``module:attr`` (``attr`` may be dotted) -> the object; one-line ``UserError``
    naming the module and what is missing when it cannot be had."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{what}: {ref!r} is not 'module:attribute'")
    obj = import_module(module_name, what)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UserError(f"{what}: module {module_name!r} has no attribute {attr!r}") from None
    return obj
