"""``paprof mcp``: a real MCP client session over stdio (the official SDK's client spawning
``python -m paprof mcp``) on the shipped H200 runs, and the server's parts without it.

One session serves the module (spawning the server costs a second or two): its calls run
once, in order, and the tests read their answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paprof.agent import summary, tools
from paprof.errors import UserError
from helpers import recorded

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[1]
H200 = recorded("h200")
SWEEP = recorded("sweeps/h200-bench")
SHAPE = "b64_ctx4096_h32x8_d128_p16_fp32"
HAS_NVCC = shutil.which("nvcc") is not None
HAS_GPU = tools.gpu_refusal() is None


HOSTILE = "\x1b]8;;http://evil.example/\x1b\\\u202e\x07\r"
"""Characters an answer's text may never hold raw."""


def _sweep_copy(tmp: Path) -> Path:
    """A copy of the recorded sweep store (beside ``tmp``: the tests read what ``tmp``
    holds), that a call may try to write into."""
    return tmp.parent / f"{tmp.name}-store" / "sweep"


def _calls(tmp: Path) -> list[tuple[str, str, dict]]:
    """(key, tool, arguments) of the session, in order."""
    good, slow = tmp / "good.json", tmp / "slow.json"
    calls = [
        ("runs", "runs", {}),
        ("slowest", "runs", {"order": "slowest", "max_rows": 2}),
        ("compare", "compare", {"variants": ["v2", "v3"]}),
        ("compare_all", "compare", {"variants": ["baseline", "v1", "v2", "v3", "v4", "v5", "v6"]}),
        ("explain", "explain", {"before": "v2", "after": "v3", "terms": 6, "counters": 5}),
        ("unknown", "compare", {"variants": ["v2", "v9"]}),
        ("table", "table", {"max_rows": 3}),
        ("families", "families", {}),
        ("baseline", "baseline", {"out": str(good), "variants": ["v3"]}),
        ("baseline_again", "baseline", {"out": str(good), "variants": ["v3"]}),
        ("check", "check", {"baseline": str(good)}),
        ("baseline_v5", "baseline", {"out": str(tmp / "v5.json"), "variants": ["v5"]}),
        ("check_slow", "check", {"baseline": str(slow)}),
        ("sweep", "sweep_report", {"runs": str(SWEEP), "out": str(tmp / "sweep.html")}),
        ("sweep_again", "sweep_report", {"runs": str(SWEEP), "out": str(tmp / "sweep.html")}),
        ("run", "run", {"variants": ["v3"]}),
        ("bench", "bench", {"variants": ["v3"]}),
        ("huge_name", "compare", {"variants": ["v2" + HOSTILE + "n" * 10_000_000, "v3"]}),
        ("wrong_type", "compare", {"variants": 5, "cross": {"a": [1, 2]}}),
        ("unknown_tool", "no_such_tool" + HOSTILE, {}),
        ("inside_store", "sweep_report", {"runs": str(_sweep_copy(tmp)),
                                          "out": str(_sweep_copy(tmp) / "sweeps" / "r.html")}),
        ("after_inside", "sweep_report", {"runs": str(_sweep_copy(tmp)),
                                          "out": str(_sweep_copy(tmp).parent / "r2.html")}),
        ("baseline_inside", "baseline", {"runs": str(_sweep_copy(tmp)),
                                         "out": str(_sweep_copy(tmp) / "sweeps" / "b.json")}),
    ]
    if HAS_NVCC:
        calls += [("static_baseline", "baseline_static",
                   {"out": str(tmp / "static.json"), "variants": ["v3"]}),
                  ("static_check", "check_static", {"baseline": str(tmp / "static.json")})]
    return calls


def _server(cwd: Path, runs: Path):
    from mcp import StdioServerParameters

    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", ""),
           "PAPROF_CUBIN_CACHE": os.environ.get("PAPROF_CUBIN_CACHE", "off")}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "paprof", "mcp", "--runs", str(runs)],
                                 env=env, cwd=str(cwd))


async def _session(tmp: Path) -> dict:
    from mcp import ClientSession, stdio_client

    out: dict = {}
    shutil.copytree(SWEEP, _sweep_copy(tmp))
    with open(tmp / "server.log", "w") as log:
        async with stdio_client(_server(tmp, H200), errlog=log) as streams:
            async with ClientSession(*streams) as session:
                await session.initialize()
                out["tools"] = [t.name for t in (await session.list_tools()).tools]
                for key, name, arguments in _calls(tmp):
                    if key == "check_slow":  # v3 was v5 when the baseline was made: a change
                        data = json.loads((tmp / "v5.json").read_text())  # that made it slower
                        data["entries"][0]["variant"] = "v3"
                        (tmp / "slow.json").write_text(json.dumps(data))
                    result = await session.call_tool(name, arguments)
                    out[key] = (result.is_error, result.content[0].text)
                uri = f"paprof://runs/nvidia-h200/paged_decode/v3/{SHAPE}/"
                for what in ("sidecar", "summary"):
                    read = await session.read_resource(uri + what)
                    out[what] = read.contents[0].text
    return out


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    return asyncio.run(_session(tmp)) | {"tmp": tmp}


def _ok(answers, key) -> dict:
    is_error, text = answers[key]
    assert not is_error, text
    return json.loads(text)


def _error(answers, key) -> str:
    is_error, text = answers[key]
    assert is_error, text
    assert "Traceback" not in text and "\n" not in text
    return text


def test_the_server_lists_its_tools(answers):
    assert set(answers["tools"]) == {"families", "runs", "table", "compare", "explain", "baseline",
                                     "baseline_static", "check", "check_static", "sweep_report",
                                     "run", "bench"}


def test_runs_lists_the_shipped_h200_runs(answers):
    data = _ok(answers, "runs")
    assert data["total"] == len(list(H200.rglob("*.ncu-rep"))) and data["left_out"] == 0
    by_variant = {r["variant"]: r for r in data["runs"]}
    assert {"baseline", "v1", "v2", "v3", "v6"} <= set(by_variant)
    assert by_variant["v3"]["gpu"] == "NVIDIA H200" and by_variant["v3"]["shape"] == SHAPE
    assert by_variant["v3"]["duration_us_event"] > 0


def test_runs_finds_the_slowest(answers):
    data = _ok(answers, "slowest")
    every = _ok(answers, "runs")["runs"]
    times = sorted((r["duration_us_event"] for r in every), reverse=True)
    assert [r["duration_us_event"] for r in data["runs"]] == times[:2]
    assert data["runs"][0]["variant"] == "baseline" and data["left_out"] == len(every) - 2


def test_compare_gives_the_cause_as_data_and_stays_bounded(answers):
    data = _ok(answers, "compare")
    full = tools.explanation(H200, ["v2", "v3"])
    step, whole = data["transitions"][0], full["transitions"][0]
    assert (step["before"], step["after"]) == ("v2", "v3")
    assert step["speedup"] == pytest.approx(whole["speedup"]) and step["speedup"] > 2
    # the top cause of the shipped v2 -> v3: fewer, wider loads, less waiting on memory
    assert step["causes"][0]["term"] == whole["causes"][0]["term"] == "stall:long_scoreboard"
    assert step["causes"][0]["counters"][0]["label"].startswith("global load requests")
    assert step["cause"] == whole["cause"]
    assert len(step["terms"]) <= summary.TERMS
    assert all(len(t["counters"]) <= summary.COUNTERS for t in step["terms"])
    assert step["kernels"]["counts"]["matched"] == 1
    text = answers["compare"][1]
    assert len(text) < len(json.dumps(full)) and len(text) <= summary.MAX_CHARS


def test_compare_of_seven_variants_is_bounded(answers):
    is_error, text = answers["compare_all"]
    assert not is_error and len(text) <= summary.MAX_CHARS
    data = json.loads(text)
    assert len(data["runs"]) == 7
    cut = int(data["cut"].split()[0]) if "cut" in data else 0
    assert 1 <= len(data["transitions"]) and len(data["transitions"]) + cut == 6
    assert data["transitions"][0]["before"] == "baseline"


def test_explain_goes_deeper_into_one_step(answers):
    brief, deep = _ok(answers, "compare")["transitions"][0], _ok(answers, "explain")["transitions"][0]
    assert deep["cause"] == brief["cause"] and len(deep["terms"]) > len(brief["terms"])
    top = deep["causes"][0]
    others = next(t["counters"] for t in deep["terms"] if t["term"] == top["term"])
    assert others and not {e["label"] for e in others} & {e["label"] for e in top["counters"]}
    assert len(top["counters"]) + len(others) > summary.COUNTERS


def test_a_user_error_is_a_one_line_tool_error(answers):
    assert "no run of v9 in" in _error(answers, "unknown")


@pytest.mark.lab
def test_table_and_families_are_bounded(answers):
    data = _ok(answers, "table")
    assert len(data["rows"]) == 3 and data["left_out"] == data["total"] - 3
    assert {"variant", "duration_us", "bottleneck"} <= set(data["rows"][0])
    fams = {f["family"]: f for f in _ok(answers, "families")["families"]}
    assert "v3" in {v["id"] for v in fams["paged_decode"]["variants"]}


def test_a_baseline_then_check_passes_and_a_slower_run_fails(answers):
    made = _ok(answers, "baseline")
    assert made["entries"][0]["variant"] == "paged_decode/v3"
    assert "pass force=true" in _error(answers, "baseline_again")
    passed = _ok(answers, "check")
    assert passed["passed"] and passed["exit_code"] == 0 and not passed["regressions"]
    failed = _ok(answers, "check_slow")
    assert not failed["passed"] and failed["exit_code"] == 1
    assert any("duration_us" in r for r in failed["regressions"])
    assert "duration_us" in [r["metric"] for r in failed["results"] if r["outcome"] == "regressed"]
    # the verdict carries its cause: v5's counters against v3's, the instruction count first
    (cause,) = failed["causes"]
    assert cause["variant"] == "paged_decode/v3" and cause["outcome"] == "regressed"
    assert cause["paragraph"].startswith("kernel time +")
    assert cause["terms"][0]["term"] == "instructions"
    assert cause["terms"][0]["counters"][0]["label"] == "shared-memory instructions"


def test_sweep_report_writes_only_where_told(answers):
    data = _ok(answers, "sweep")
    tmp = answers["tmp"]
    assert sorted(Path(p).name for p in data["wrote"]) == ["sweep.html", "sweep.md", "sweep.regime.json"]
    assert any("v6 is faster than v5" in c for c in data["crossovers"])
    assert "pass force=true" in _error(answers, "sweep_again")
    made = {p.name for p in tmp.iterdir()}
    assert made <= {"good.json", "v5.json", "slow.json", "sweep.html", "sweep.md", "sweep.regime.json",
                    "static.json", "server.log"}


def test_echoed_arguments_are_cut_and_escaped(answers):
    said = _error(answers, "huge_name")
    assert len(said) < 5_000 and "more characters)" in said
    assert "\\x1b" in said and not any(c in said for c in "\x1b\u202e\x07\r")
    tool = _error(answers, "unknown_tool")
    assert "no_such_tool" in tool and not any(c in tool for c in "\x1b\u202e\x07\r")


def test_a_wrong_argument_type_is_one_line_naming_the_argument(answers):
    said = _error(answers, "wrong_type")
    assert "variants" in said and "cross" in said and "valid list" in said
    assert "pydantic" not in said and "[1, 2]" not in said and len(said) < 300


def test_outputs_inside_a_store_s_folders_are_refused(answers):
    assert "inside the run store" in _error(answers, "inside_store")
    assert "inside the run store" in _error(answers, "baseline_inside")
    assert sorted(p.name for p in (_sweep_copy(answers["tmp"]) / "sweeps").iterdir()) == [
        p.name for p in (SWEEP / "sweeps").iterdir()]
    assert _ok(answers, "after_inside")["crossovers"]


def test_a_huge_sidecar_is_not_answered_whole(tmp_path):
    """A real session on a store whose sidecar is 3 MB: the resource answers a note."""
    store = tmp_path / "runs"
    shutil.copytree(H200 / "nvidia-h200" / "paged_decode" / "v3", store / "g" / "f" / "v3")
    side = store / "g" / "f" / "v3" / f"{SHAPE}.json"
    data = json.loads(side.read_text())
    data["pad"] = "x" * (3 << 20)
    side.write_text(json.dumps(data))

    async def read():
        from mcp import ClientSession, stdio_client

        with open(tmp_path / "server.log", "w") as log:
            async with stdio_client(_server(tmp_path, store), errlog=log) as streams:
                async with ClientSession(*streams) as session:
                    await session.initialize()
                    got = await session.read_resource(f"paprof://runs/g/f/v3/{SHAPE}/sidecar")
                    return got.contents[0].text

    text = asyncio.run(read())
    assert len(text) < 1000 and "over the 1,048,576" in json.loads(text)["cut"]


@pytest.mark.skipif(HAS_GPU, reason="a GPU is here: run and bench would measure")
def test_run_and_bench_are_refused_without_a_gpu_with_the_reason(answers):
    for key in ("run", "bench"):
        assert "no NVIDIA GPU here" in _error(answers, key)


@pytest.mark.lab
@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not on PATH")
def test_the_static_gate_over_mcp(answers):
    made = _ok(answers, "static_baseline")
    assert made["kernels"] >= 1 and made["compiler"].startswith("nvcc")
    checked = _ok(answers, "static_check")
    assert checked["passed"] and checked["unchanged"] > 0 and not checked["regressions"]


async def _edit_and_gate(project: Path) -> list:
    """The static gate's loop in a user's project: a baseline, a kernel edited to hold
    twice the row in registers, the gate again."""
    from mcp import ClientSession, stdio_client

    answers = []
    with open(project / "server.log", "w") as log:
        async with stdio_client(_server(project, project / "runs"), errlog=log) as streams:
            async with ClientSession(*streams) as session:
                await session.initialize()
                for step in ("baseline", "check", "edit", "check"):
                    if step == "edit":
                        source = project / "softmax_fused.cu"
                        source.write_text(source.read_text().replace(
                            "#define UNROLL 4", "#undef VPT\n#define VPT 16\n#define UNROLL 4"))
                        continue
                    call = (("baseline_static", {"out": "static.json", "family": "softmax",
                                                 "variants": ["fused", "naive"]})
                            if step == "baseline" else ("check_static", {"baseline": "static.json"}))
                    result = await session.call_tool(*call)
                    assert not result.is_error, result.content[0].text
                    answers.append(json.loads(result.content[0].text))
    return answers


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not on PATH")
def test_an_edited_kernel_fails_the_static_gate_over_mcp(tmp_path):
    project = tmp_path / "softmax"
    shutil.copytree(ROOT / "examples" / "custom_family", project,
                    ignore=shutil.ignore_patterns("runs", "__pycache__"))
    made, before, after = asyncio.run(_edit_and_gate(project))
    assert made["kernels"] == 2 and before["passed"]
    assert not after["passed"] and after["exit_code"] == 1
    assert after["regressions"][0].startswith("softmax/fused registers_per_thread")
    assert not any(r.startswith("softmax/naive") for r in after["regressions"])


def test_resources_are_the_sidecar_and_a_report_summary(answers):
    side = json.loads(answers["sidecar"])
    assert (side["variant"], side["shape_slug"]) == ("v3", SHAPE)
    brief = json.loads(answers["summary"])
    assert brief["step"]["variant"] == "v3" and brief["step"]["duration_us"] > 0
    assert brief["kernels"][0]["kernel"] == "paged_decode_v3"


def test_a_resource_reads_nothing_outside_the_store(tmp_path):
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    from paprof.agent.server import Store

    (tmp_path / "secret.json").write_text("{}")
    store = Store(tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    with pytest.raises(ResourceNotFoundError):
        store.run_file("..", "..", "runs", "../secret", ".json")


def test_tool_calls_take_turns():
    import threading
    import time

    from paprof.agent.server import _one_line

    inside, most = [0], [0]

    @_one_line
    def work():
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def test_bounded_cuts_a_list_and_says_how_much():
    answer = {"rows": [{"n": i, "pad": "x" * 100} for i in range(100)]}
    text = summary.bounded(answer, "rows", max_chars=2_000)
    data = json.loads(text)
    assert len(text) <= 2_000 and 0 < len(data["rows"]) < 100
    assert data["cut"].startswith(f"{100 - len(data['rows'])} of 100 rows left out")
    assert summary.bounded({"rows": [1]}, "rows") == json.dumps({"rows": [1]})


def test_a_written_file_is_refused_without_force(tmp_path):
    (tmp_path / "b.json").write_text("{}")
    with pytest.raises(UserError, match="force=true"):
        tools.refuse_existing(tmp_path / "b.json", False)
    tools.refuse_existing(tmp_path / "b.json", True)
    tools.refuse_existing(tmp_path / "new.json", False)


def test_without_the_sdk_paprof_mcp_says_how_to_install_it():
    code = ("import sys; sys.modules['mcp'] = None; sys.argv = ['paprof', 'mcp']\n"
            "from paprof.entry import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "paprof: error: paprof mcp needs the MCP Python SDK: pip install 'paprof[mcp]'"]


def test_a_sidecar_resource_holds_no_raw_control_or_bidi_character(tmp_path):
    """A sidecar in a store others wrote, with a bidi override and a C1 CSI raw in its
    strings (valid JSON) or an ESC (not JSON): the resource answers the same value with
    those characters escaped, never raw."""
    from paprof.agent.server import Store

    store = tmp_path / "runs"
    shutil.copytree(H200 / "nvidia-h200" / "paged_decode" / "v3", store / "g" / "f" / "v3")
    side = store / "g" / "f" / "v3" / f"{SHAPE}.json"
    data = json.loads(side.read_text())
    data["variant"] = "v3\u202eevil\x9b31m"
    side.write_text(json.dumps(data, ensure_ascii=False))
    text = Store(store).sidecar_text("g", "f", "v3", SHAPE)
    assert json.loads(text) == data
    assert not any(c in text for c in "\u202e\x9b\x1b\x07")
    side.write_text(side.read_text() + HOSTILE)  # not JSON any more
    text = Store(store).sidecar_text("g", "f", "v3", SHAPE)
    assert not any(c in text for c in "\x1b\u202e\x07\r")
