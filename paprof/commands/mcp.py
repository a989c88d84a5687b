"""``paprof mcp``: serve paprof's tools to an agent over MCP (stdio)."""

from __future__ import annotations

from pathlib import Path

import click

from paprof.errors import UserError

INSTALL = "pip install 'paprof[mcp]'"


@click.command("mcp")
@click.option("--runs", type=click.Path(file_okay=False, path_type=Path), default=Path("runs"),
              show_default=True,
              help="The run store tools read when a call names none (the shipped H200 runs: "
              "examples/h200).")
def mcp(runs):
    """Serve paprof to an agent or IDE as an MCP server over stdio (the official MCP
    Python SDK; install it with: pip install 'paprof[mcp]').

    Tools: families, runs, table, compare, explain, baseline, baseline_static, check,
    check_static, sweep_report, run and bench (these two on a machine with a GPU; refused
    with the reason elsewhere). Resources: paprof://runs/GPU/FAMILY/VARIANT/SHAPE/sidecar
    and .../summary. Answers are bounded JSON. The server reads the run store a call
    names, else --runs, and writes only to the paths a tool is given (replacing a file
    only with force=true). docs/agents.md shows an agent's loop.

    \b
    A client's configuration (Claude Desktop, VS Code, Cursor...):
      {"mcpServers": {"paprof": {"command": "paprof",
                                 "args": ["mcp", "--runs", "examples/h200"]}}}

    \b
    Examples:
      paprof mcp --runs examples/h200   # the shipped H200 runs, for a client
      paprof mcp                        # ./runs, where paprof run stores
                                        # (GPU: run, bench)
    """
    try:
        import mcp as _sdk  # noqa: F401  (the SDK, not this command)
    except ImportError:
        raise UserError(f"paprof mcp needs the MCP Python SDK: {INSTALL}") from None
    from paprof.agent.server import serve

    serve(runs)


COMMANDS = [mcp]
