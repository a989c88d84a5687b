"""A program profiled by a few launches of each launch configuration (``paprof run
--cmd``'s default): the plan the timing pass makes (paprof/measure/top_kernels.py
``represent``) and the loader counting each profiled launch for those it stands for
(paprof/model/represented.py). Held to the same program profiled launch by launch: the
shipped MLP program's eager run (3 steps of 14 launches, H200), with ncu's
``--filter-mode per-launch-config --launch-count K`` emulated by keeping the first K
launches of each (kernel, grid, block) of the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import unpacked
from paprof.measure.top_kernels import choose, read_launches, represent
from paprof.model import load as load_module
from paprof.model.load import load_reports, variant_rows
from paprof.model.represented import MOST_PER_STEP, counts, key_of, weights
from paprof.read import ncu_reader

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "runs.tar.xz"
needs_mlp = pytest.mark.skipif(not MLP.is_file(), reason="examples/mlp/runs.tar.xz is not there")

# two steps; gemm on grid 132 twice a step (two layers), on grid 66 once; "ew" runs two
# different operations on one grid (10 and 20 us)
STEP = [("gemm", 100.0, (132, 256)), ("ew", 10.0, (64, 128)), ("gemm", 101.0, (132, 256)),
        ("ew", 20.0, (64, 128)), ("gemm", 50.0, (66, 256)), ("ew", 10.5, (64, 128))]
LAUNCHES = [(*l, 0) for l in STEP] + [(*l, 1) for l in STEP]


def test_the_plan_profiles_enough_launches_to_see_every_duration():
    k, configs = represent(LAUNCHES, None)
    assert k == 2  # ew's second launch is the first of its 20 us kind
    by = {(n, c["grid"]): c for n, cs in configs.items() for c in cs}
    assert by[("gemm", 132)] == {"grid": 132, "block": 256, "launches": 2, "weights": [1, 1],
                                 "profiled": 2}  # both profiled (K = 2): each for itself
    assert by[("ew", 64)]["weights"] == [2, 1]  # 10 and 10.5 us to the first, 20 us to the second
    # gemm on grid 66 runs once a step: ncu's first 2 reach into the second step
    assert by[("gemm", 66)]["weights"] == [1] and by[("gemm", 66)]["profiled"] == 2
    assert sum(sum(c["weights"]) for cs in configs.values() for c in cs) == len(STEP)


def test_no_plan_where_nothing_is_saved_or_a_configuration_is_unknown():
    assert represent([l for l in LAUNCHES if l[0] == "gemm" and l[2][0] == 66], None) is None
    assert represent([(n, us, None, s) for n, us, _c, s in LAUNCHES], None) is None
    assert represent([("a", 1.0, (1, 32), 1)], None) is None  # nothing in the first step
    _k, only = represent(LAUNCHES, {"gemm"})
    assert set(only) == {"gemm"}


def test_each_row_counts_for_its_launches():
    plan = {("gemm", 132, 256): (2, (2, 0)), ("ew", 64, 128): (2, (2, 1))}
    rows = [{"kernel": "gemm", "grid_size": 132.0, "block_size": 256.0},
            {"kernel": "ew", "grid_size": 64.0, "block_size": 128.0},
            {"kernel": "gemm", "grid_size": 132.0, "block_size": 256.0},
            {"kernel": "ew", "grid_size": 64.0, "block_size": 128.0},
            {"kernel": "norm", "grid_size": 8.0, "block_size": 128.0}]
    assert counts(rows, plan) == ([2, 2, 0, 1, 1], [])
    # the report holds one gemm launch where two were planned: counted once, and said
    assert counts(rows[1:], plan) == ([2, 1, 1, 1], ["gemm (132 x 256)"])


def _record(launches, steps):
    chosen = choose(launches, steps, cover=1.0)
    k, configs = represent(launches, None)
    chosen["represented"], chosen["per_config"] = True, k
    for entry in chosen["kernels"]:
        entry["configs"] = configs[entry["kernel"]]
    return chosen


def test_weights_read_from_the_record():
    got = weights({"selection": _record(LAUNCHES, 2)})
    assert got[("gemm", 132, 256)] == (2, (1, 1)) and got[("ew", 64, 128)] == (2, (2, 1))
    chosen = _record(LAUNCHES, 2)
    chosen["represented"] = False
    assert weights({"selection": chosen}) is None


@pytest.mark.parametrize("spoil", [
    lambda c: c.update(kernels={}), lambda c: c["kernels"].append(7),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[2 ** 70]),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[-1]),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[1.5]),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[MOST_PER_STEP, MOST_PER_STEP]),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[0, 0]),
    lambda c: c["kernels"][0]["configs"][0].update(weights=[1, 1, 1]),  # more than profiled
    lambda c: c["kernels"][0]["configs"][0].update(grid=-1),
    lambda c: c["kernels"][0]["configs"][0].update(profiled=True),
    lambda c: c["kernels"][0].update(configs="x"), lambda c: c["kernels"][0].update(configs=[]),
])
def test_a_record_that_does_not_hold_together_counts_each_launch_once(spoil):
    chosen = _record(LAUNCHES, 2)
    spoil(chosen)
    assert weights({"selection": chosen}) is None


def test_a_row_without_its_launch_shape_has_no_key():
    assert key_of({"kernel": "k", "grid_size": 4.0, "block_size": 128.0}) == ("k", 4, 128)
    assert key_of({"kernel": "k", "grid_size": float("nan"), "block_size": 128.0}) is None
    assert key_of({"kernel": "k", "block_size": 128.0}) is None


@needs_mlp
def test_a_few_launches_a_configuration_give_the_first_step_of_every_launch(tmp_path, monkeypatch):
    source = unpacked(MLP) / "runs" / "nvidia-h200" / "command" / "eager"
    whole = variant_rows(load_reports([source / "command.ncu-rep"]))
    launches, steps = read_launches(source / "command.ncu-rep", "step")
    assert steps == 3 and len(launches) == 42
    chosen = _record(launches, steps)
    k = chosen["per_config"]
    assert k == 2  # PyTorch's elementwise kernels run two operations on one grid
    planned = sum(c["profiled"] for e in chosen["kernels"] for c in e["configs"])
    assert planned < 42  # fewer launches than the range's

    # the store as `run --cmd` leaves it: the record says what each launch stands for
    run = tmp_path / "runs" / "nvidia-h200" / "command" / "eager"
    run.mkdir(parents=True)
    shutil.copyfile(source / "command.ncu-rep", run / "command.ncu-rep")
    side = json.loads((source / "command.json").read_text())
    side["selection"] = chosen
    (run / "command.json").write_text(json.dumps(side))

    opened = ncu_reader.open_report

    def first_k_of_each_configuration(path, *args, **kwargs):  # what ncu's filter profiles
        context, actions = opened(path, *args, **kwargs)
        seen, kept = {}, []
        for action in actions:
            key = (str(action.name()), ncu_reader.read_metric(action, "launch__grid_size"),
                   ncu_reader.read_metric(action, "launch__block_size"))
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= k:
                kept.append(action)
        return context, iter(kept)

    monkeypatch.setattr(load_module, "open_report", first_k_of_each_configuration)
    monkeypatch.setenv("PAPROF_JOBS", "1")
    sampled = load_reports([tmp_path / "runs"])
    assert len(sampled) == 14 and "notes" not in sampled.attrs  # one step's launches, counted
    one = variant_rows(sampled)
    assert len(one) == 1 and one["step"].iloc[0] == 0
    first = whole[whole["step"] == 0].iloc[0]
    # the time and bytes within the steps' spread; the instructions within 1 % of the first
    # step's: two of its elementwise operations on one grid take the same 45.5 us (both
    # move 182 MB) with 3.0 M and 7.7 M warp instructions, so one stands for the other
    assert one["instructions_executed"].iloc[0] == pytest.approx(first["instructions_executed"], rel=0.01)
    assert one["instructions_executed"].iloc[0] != first["instructions_executed"]
    for column in ("duration_us", "dram_bytes"):
        lo, hi = whole[column].min(), whole[column].max()
        assert lo * 0.98 <= one[column].iloc[0] <= hi * 1.02, column

    # a report that does not hold what was planned: those launches counted once, and said
    monkeypatch.setattr(load_module, "open_report", opened)
    every = load_reports([tmp_path / "runs"])
    assert len(every) == 42 and "each launch counted once" in " ".join(every.attrs["notes"])
