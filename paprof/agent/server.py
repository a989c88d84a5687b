"""``paprof mcp``: the tools of ``paprof.agent.tools`` and two resources, served over
stdio with the official MCP Python SDK (``mcp``, 2.x: ``MCPServer``).

The server reads the run store the client names in a call (``runs``), else the one it
was started with (``paprof mcp --runs DIR``), and writes only to the paths a tool is
given. paprof's one-line errors (``PaprofError``, an OSError of the machine's state)
reach the client as tool errors with that line; anything else is a bug, which the SDK
reports as a bare tool failure (its traceback stays in the server's log on stderr).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from paprof.agent import summary, tools
from paprof.errors import PaprofError, UserError, environment_error

INSTRUCTIONS = """\
paprof explains why one GPU kernel variant is faster than another, from Nsight Compute
counters. Start with `runs` (what the run store holds), then `compare` two variants in
the order before -> after: each transition's speedup, its cause (the largest term of the
time difference with the counters that moved it) and the kernel view. `baseline` and
`check` gate a change against stored runs; `check_static` gates the compiled code
without a GPU; `run` and `bench` measure, on a machine with a GPU (and ncu for run).
Answers are JSON, bounded: a `left_out` or `cut` field says what was left out."""

SIDECAR_URI = "paprof://runs/{gpu}/{family}/{variant}/{shape}/sidecar"
SUMMARY_URI = "paprof://runs/{gpu}/{family}/{variant}/{shape}/summary"


_ONE_AT_A_TIME = threading.Lock()
"""The SDK runs each synchronous tool on a worker thread, so a client's parallel calls
would overlap; paprof's library is written for one command a process (the collector
paused while a store is read, the registry's imports), so calls take turns."""


def _one_line(fn):
    """``fn`` with paprof's user-facing errors raised as the SDK's tool errors, one call
    at a time."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            with _ONE_AT_A_TIME:
                return fn(*args, **kwargs)
        except PaprofError as err:
            raise ToolError(_said(err)) from None
        except OSError as err:
            said = environment_error(err)
            if said is None:
                raise
            raise ToolError(_said(said)) from None
    return wrapped


def _said(err) -> str:
    """An error as a tool answers it: one line, control and bidi characters escaped, at
    most ``safetext.LIMIT`` characters (an argument of megabytes is not echoed whole)."""
    from paprof.safetext import shown

    return shown(" ".join(str(err).split()))


def _arguments_said(err) -> str:
    """A pydantic ``ValidationError`` of a tool's arguments as one line: each argument
    and what it should be, never the value given (the caller's data, of any size)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                     for e in err.errors(include_url=False, include_input=False))


RESOURCE_BYTES = 1 << 20
"""The most bytes a resource answers: a sidecar past it (a store others wrote) is not
sent whole; the answer says so."""


def _answer(data: dict, key: str) -> str:
    return summary.bounded(data, key)


class Store:
    """The run store a call reads: the one named, else the server's default."""

    def __init__(self, default: Path):
        self.default = default

    def __call__(self, runs: str | None) -> Path:
        return Path(runs) if runs else self.default

    def run_file(self, gpu: str, family: str, variant: str, shape: str, suffix: str) -> Path:
        """A file of one run in the default store; nothing outside it."""
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        root = self.default.resolve()
        path = (root / gpu / family / variant / f"{shape}{suffix}").resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ResourceNotFoundError(_said(f"no run {gpu}/{family}/{variant}/{shape} in {self.default}"))
        return path

    def sidecar_text(self, gpu: str, family: str, variant: str, shape: str) -> str:
        """A run's sidecar (``_json_shown``), or, past ``RESOURCE_BYTES``, a note saying so."""
        import json

        path = self.run_file(gpu, family, variant, shape, ".json")
        size = path.stat().st_size
        if size <= RESOURCE_BYTES:
            with open(path, "rb") as handle:
                raw = handle.read(RESOURCE_BYTES)
            return _json_shown(raw)
        return json.dumps({"cut": f"the sidecar is {size:,} bytes, over the {RESOURCE_BYTES:,} "
                                  f"a resource answers; read it from the store"})


def _json_shown(raw: bytes) -> str:
    """A record's JSON as an answer: the same value, every character past ASCII and every
    control character written as a JSON escape (``\\u202e``, ``\\u001b``), so no bidi
    override or terminal escape is answered raw; text that is not JSON, escaped as any
    other text (``safetext``)."""
    import json

    from paprof import jsonsafe
    from paprof.safetext import shown

    try:
        return json.dumps(jsonsafe.parse(raw), indent=2, ensure_ascii=True)
    except ValueError:
        return shown(raw.decode("utf-8", errors="replace"), newlines=True, limit=None)


def _server_class():
    """The SDK's server, its tool errors held to one bounded line: an argument of the
    wrong type is said as the argument and what it should be (the SDK's text is
    pydantic's dump of several lines, with the value given), an unknown tool's name cut."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import ValidationError

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise
            except ToolError as err:
                cause = err.__cause__
                if isinstance(cause, ValidationError):
                    said = f"Error executing tool {name}: {_arguments_said(cause)}"
                else:
                    said = str(err)
                raise ToolError(_said(said)) from cause

    return Server


def build(runs: Path):
    """The server, its default run store ``runs``."""
    from paprof import __version__

    server = _server_class()("paprof", version=__version__, instructions=INSTRUCTIONS,
                             log_level="WARNING")
    store = Store(runs)
    tool = server.tool

    @tool(structured_output=False)
    @_one_line
    def families() -> str:
        """The kernel families visible here and their variants (paprof list)."""
        return _answer(tools.families(), "families")

    @tool(name="runs", structured_output=False)
    @_one_line
    def list_runs(runs: str | None = None, variant: str | None = None,
                  max_rows: int | None = None, order: str = "path") -> str:
        """The runs in a run store (default: the server's): variant, shape, GPU, when,
        CUDA-event time. `variant` narrows to one (v3 or paged_decode/v3); order
        "slowest" lists the slowest first."""
        return _answer(tools.runs(store(runs), variant, max_rows, order), "runs")

    @tool(structured_output=False)
    @_one_line
    def table(runs: str | None = None, per_variant: bool = True,
              columns: list[str] | None = None, max_rows: int | None = None,
              step_range: str | None = None) -> str:
        """paprof table of a run store or a report: one row per variant's step
        (per_variant, default) or per kernel launch, the key columns or `columns`."""
        return _answer(tools.table(store(runs), per_variant, columns, max_rows, step_range), "rows")

    @tool(structured_output=False)
    @_one_line
    def compare(variants: list[str], runs: str | None = None, shape: str | None = None,
                cross: bool = False, step_range: str | None = None) -> str:
        """Why each variant is faster or slower than the one before it (2 or more, in
        order, e.g. ["v2", "v3"]): per transition the speedup, the cause with its
        counters, the largest terms of the time difference, the kernel view's totals.
        A summary of `paprof compare --json` (schema paprof.explanation/1)."""
        return _answer(tools.compare(store(runs), variants, shape, cross, step_range), "transitions")

    @tool(structured_output=False)
    @_one_line
    def explain(before: str, after: str, runs: str | None = None, shape: str | None = None,
                cross: bool = False, terms: int = 8, counters: int = 6) -> str:
        """One step before -> after in more depth than compare: up to `terms` terms of
        the decomposition, each with up to `counters` counters (both values, ratio)."""
        if not (1 <= terms <= 20 and 1 <= counters <= 12):
            raise UserError("terms must be 1 to 20 and counters 1 to 12")
        data = tools.compare(store(runs), [before, after], shape, cross,
                             terms=terms, counters=counters)
        return _answer(data, "transitions")

    @tool(structured_output=False)
    @_one_line
    def baseline(out: str, runs: str | None = None, variants: list[str] | None = None,
                 metrics: list[str] | None = None, force: bool = False) -> str:
        """Write the baseline of the stored runs to `out` (paprof baseline update); an
        existing file is replaced only with force=true."""
        return _answer(tools.baseline(store(runs), Path(out), variants, metrics, force), "entries")

    @tool(structured_output=False)
    @_one_line
    def baseline_static(out: str, family: str | None = None, shape: str | None = None,
                        variants: list[str] | None = None, force: bool = False,
                        arch: str | None = None) -> str:
        """Write a static baseline to `out` (no GPU: nvcc compiles the family's CUDA
        variants at `shape` for `arch`, e.g. sm_90, default the family's own; paprof
        baseline update --static)."""
        return _answer(tools.baseline_static(Path(out), family, shape, variants, force, arch),
                       "notes")

    @tool(structured_output=False)
    @_one_line
    def check(baseline: str, runs: str | None = None, metrics: list[str] | None = None,
              tolerances: list[str] | None = None, allow_mismatch: bool = False,
              max_rows: int | None = None) -> str:
        """The regression gate (paprof check): the latest stored runs against `baseline`.
        `passed`, the regressions in words, the rows that changed, and the cause of
        each change (the time decomposition against the baseline's counters)."""
        return _answer(tools.check(store(runs), Path(baseline), metrics, tolerances,
                                   allow_mismatch, max_rows), "results")

    @tool(structured_output=False)
    @_one_line
    def check_static(baseline: str, ratchet: bool = False, max_rows: int | None = None) -> str:
        """The static gate (paprof check --static): no GPU; nvcc compiles the baseline's
        variants and their registers, spills, memory and SASS mix are gated."""
        return _answer(tools.check_static(Path(baseline), ratchet, max_rows), "results")

    @tool(name="sweep_report", structured_output=False)
    @_one_line
    def sweep_report(out: str, runs: str | None = None, name: str | None = None,
                     force: bool = False) -> str:
        """Write the sweep report of a store to `out` (HTML; .md and .regime.json beside
        it); the crossovers in words. Existing files only with force=true."""
        return _answer(tools.sweep_report(store(runs), Path(out), name, force), "crossovers")

    @tool(structured_output=False)
    @_one_line
    def run(variants: list[str], runs: str | None = None, family: str | None = None,
            shape: str | None = None, preset: str = "default", force: bool = False) -> str:
        """Verify, then profile variants under ncu into the run store (paprof run); a run
        already stored is profiled again only with force=true. Needs an NVIDIA GPU and
        ncu: refused with the reason where there is none."""
        return _answer(tools.run(store(runs), variants, family, shape, preset, force), "runs")

    @tool(structured_output=False)
    @_one_line
    def bench(variants: list[str], family: str | None = None, shape: str | None = None,
              launches: int = 100, rounds: int = 2) -> str:
        """Verify, then time variants with CUDA events (paprof bench). Needs an NVIDIA
        GPU: refused with the reason where there is none."""
        return _answer(tools.bench(variants, family, shape, launches, rounds), "rows")

    @server.resource(SIDECAR_URI, mime_type="application/json")
    def sidecar(gpu: str, family: str, variant: str, shape: str) -> str:
        """A run's provenance sidecar (in the server's run store): its JSON as stored, with
        characters past ASCII and control characters written as JSON escapes."""
        with _ONE_AT_A_TIME:
            return store.sidecar_text(gpu, family, variant, shape)

    @server.resource(SUMMARY_URI, mime_type="application/json")
    def report_summary(gpu: str, family: str, variant: str, shape: str) -> str:
        """A run's report in brief: its step's time and bottleneck with evidence."""
        with _ONE_AT_A_TIME:
            report = store.run_file(gpu, family, variant, shape, ".ncu-rep")
            return _answer(tools.report_summary(report, store.default), "kernels")

    return server


def serve(runs: Path) -> None:
    """Serve over stdio until the client closes the connection."""
    build(runs).run("stdio")
