"""An agent's loop over ``paprof mcp`` on a GPU machine: a real MCP client session over
stdio that runs two variants under ncu, finds the slowest, asks for its cause as data,
makes a baseline, gates the runs against it and times them with CUDA events.

    python3 scripts/mcp_gpu_session.py RUNS_DIR [SHAPE]

Needs the ``mcp`` extra, a GPU and ncu. Prints each call's answer (cut to 700 characters).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def session(runs: Path, shape: str) -> int:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "paprof", "mcp", "--runs", str(runs)],
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "NCU", "HOME",
                                                          "CUDA_HOME", "PAPROF_GIT_COMMIT")},
        cwd=str(runs.parent))
    base = runs.parent / "mcp-baseline.json"
    calls = [
        ("run", {"variants": ["v2", "v3"], "shape": shape}),
        ("runs", {"order": "slowest", "max_rows": 2}),
        ("explain", {"before": "v2", "after": "v3", "terms": 3, "counters": 3}),
        ("baseline", {"out": str(base), "force": True}),
        ("check", {"baseline": str(base)}),
        ("bench", {"variants": ["v2", "v3"], "shape": shape}),
    ]
    errors = 0
    async with stdio_client(server) as streams:
        async with ClientSession(*streams) as s:
            await s.initialize()
            for name, arguments in calls:
                result = await s.call_tool(name, arguments)
                text = result.content[0].text if result.content else ""
                errors += bool(result.is_error)
                print(f"== {name} {json.dumps(arguments)} -> {'ERROR' if result.is_error else 'ok'}")
                print(text[:700])
    return errors


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-3].strip())
    runs = Path(sys.argv[1]).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    shape = sys.argv[2] if len(sys.argv) == 3 else "batch=8,context=4096"
    sys.exit(1 if asyncio.run(session(runs, shape)) else 0)
