"""paprof for agents: ``paprof mcp``, an MCP server (the official Python SDK, ``mcp``)
over stdio.

``tools`` holds what each tool does, as plain functions over the library the CLI uses
(no MCP in them); ``summary`` makes the explanation and other answers short enough for a
model's context; ``server`` registers them with the SDK and turns paprof's one-line
errors into tool errors. docs/agents.md shows an agent's loop with it.
"""
