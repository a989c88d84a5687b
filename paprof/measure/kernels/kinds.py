"""Building a variant of any kind into a ``Launcher`` (GPU side: imports CuPy on use).

- CUDA source: the variant's own ``build`` hook, or its declared kernel compiled with
  ``gpu.compile_module`` and launched with its grid, block, shared memory and arguments;
- Python callable: the function, handed CuPy arrays or (``arrays="torch"``) PyTorch tensors
  over the same memory;
- command: not built here; the profiler runs the program itself.
"""

from __future__ import annotations

from paprof.errors import UserError
from paprof.family import CallableVariant, CommandVariant, CudaVariant, Launcher, Variant
from paprof.measure.kernels import gpu


def _value(x, params):
    return x(params) if callable(x) else x


def _build_cuda(variant: CudaVariant, params, device) -> Launcher:
    if variant.build is not None:
        return variant.build(variant, params, device)
    defines = _value(variant.defines, params) or {}
    module = gpu.compile_module(variant.source_paths(), defines, arch=variant.arch,
                                flags=variant.compiler_options(params))
    name = variant.kernel_name(params)
    try:
        kernel = module.get_function(name)
    except Exception as err:  # CuPy raises its own error types for a missing symbol
        raise UserError(f"variant {variant.name}: no kernel {name!r} in "
                        f"{', '.join(variant.sources)} ({type(err).__name__}); is it extern \"C\"?") from None
    grid = tuple(_value(variant.grid, params))
    block = tuple(_value(variant.block, params))
    smem = int(_value(variant.shared_mem, params) or 0)
    info = gpu.kernel_launch(kernel, name, grid, block, smem)

    def run(inputs, out):
        kernel(grid, block, tuple(variant.args(params, inputs, out)), shared_mem=smem)

    def setup(inputs, out):
        # the arguments once for each input set before any step: an args function that
        # prepares device state on first use (wgmma2's tensor maps, cached by address) does
        # it here, outside timing, not in a timed step of a set the warm-up never touched
        variant.args(params, inputs, out)

    return Launcher(variant.id, [info], run, setup=setup)


def _torch_convert():
    try:
        import torch  # noqa: PLC0415 (optional, lazy by design)
    except ImportError:
        raise UserError("this variant takes PyTorch tensors (arrays='torch'), but PyTorch "
                        "is not installed") from None
    return torch.from_dlpack


def _build_callable(variant: CallableVariant, params, device) -> Launcher:
    convert = _torch_convert() if variant.arrays == "torch" else None
    prepare = variant.resolve_prepare()
    if prepare is None:
        fn = variant.resolve_fn()

        def run(inputs, out):
            return fn(inputs, out, params)  # an array when the callable makes its own output

        return Launcher(variant.id, [], run, convert=convert)

    # prepare(inputs, out, params) -> launch(): once per input set, kept by the identity of
    # the arrays (held here, so the ids stay theirs); a set never set up is set up on its
    # first step (a caller that skips the harness), the harness sets up every set in advance
    launches: dict[tuple[int, int], tuple] = {}

    def setup(inputs, out):
        launch = prepare(inputs, out, params)
        if not callable(launch):
            raise UserError(f"variant {variant.name}: prepare returned {type(launch).__name__}, "
                            "not a function that launches one step")
        launches[(id(inputs), id(out))] = (inputs, out, launch)

    def run(inputs, out):
        key = (id(inputs), id(out))
        if key not in launches:
            setup(inputs, out)
        return launches[key][2]()  # an array when the callable makes its own output

    return Launcher(variant.id, [], run, convert=convert, setup=setup)


def build(variant: Variant, params, device) -> Launcher:
    """Compile or import what ``variant`` needs for ``params``; its launcher."""
    variant.check(params)
    if isinstance(variant, CudaVariant):
        return _build_cuda(variant, params, device)
    if isinstance(variant, CallableVariant):
        return _build_callable(variant, params, device)
    if isinstance(variant, CommandVariant):
        raise UserError(f"{variant.name} is an external command: paprof runs it, it builds nothing")
    raise UserError(f"{variant.name}: unknown variant kind {type(variant).__name__}")
