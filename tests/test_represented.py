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
    k, configs, error, sequence = represent(LAUNCHES, None)
    assert k == 2 and error < 0.002  # ew's second launch is the first of its 20 us kind
    by = {(n, c["grid"]): c for n, cs in configs.items() for c in cs}
    assert by[("gemm", 132)] == {"grid": 132, "block": 256, "function": "gemm", "launches": 2,
                                 "weights": [1, 1], "profiled": 2}  # both profiled (K = 2): each for itself
    assert by[("ew", 64)]["weights"] == [2, 1]  # 10 and 10.5 us to the first, 20 us to the second
    # gemm on grid 66 runs once a step: ncu's first 2 reach into the second step
    assert by[("gemm", 66)]["weights"] == [1] and by[("gemm", 66)]["profiled"] == 2
    assert sum(sum(c["weights"]) for cs in configs.values() for c in cs) == len(STEP)
    # what ncu profiles, in launch order: the first 2 of each configuration, grid 66's
    # second in the second step (counting for nothing)
    assert sequence == [["gemm", 132, 256, 1], ["ew", 64, 128, 2], ["gemm", 132, 256, 1],
                        ["ew", 64, 128, 1], ["gemm", 66, 256, 1], ["gemm", 66, 256, 0]]


def test_template_instances_of_one_function_are_configurations_of_their_own():
    """PyTorch's elementwise kernels share the function name of their template; the
    mangled name tells a multiply from a SiLU on one grid. Eight layers forward then
    backward: keyed by function name, the backward's first launch of a shared grid comes
    after all eight forward ones (K = 9); keyed by function, K = 1."""
    fwd = [("ew", 50.0, (64, 128), 0, "_Z2ewI4SiLUE"), ("gemm", 100.0, (132, 256), 0, "_Z4gemm")]
    bwd = [("ew", 80.0, (64, 128), 0, "_Z2ewI8SiLUBackE"), ("gemm", 100.0, (132, 256), 0, "_Z4gemm")]
    step = fwd * 8 + bwd * 8
    k, configs, _error, sequence = represent(step, None)
    assert k == 1 and len(sequence) == 3
    assert sorted(c["function"] for c in configs["ew"]) == ["_Z2ewI4SiLUE", "_Z2ewI8SiLUBackE"]
    assert [s[3] for s in sequence] == [8, 16, 8]  # each stands for its eight (gemm: sixteen)
    by_name = [l[:4] for l in step]  # the same launches without their mangled names
    assert represent(by_name, None)[0] == 9


def test_grids_of_one_size_and_two_shapes_are_two_configurations():
    """A GPT block's backward sums biases with one reduction function on 32 x 66 and on
    24 x 88 blocks (2,112 both), alternately, each layer. ncu's per-launch-config profiles
    the first K of each shape; keyed by size, the plan would count half of them (the H100's
    8-layer step: 56 launches profiled where 52 were planned). Keyed by the dimensions the
    timing pass reads, each shape is its own configuration."""
    a, b = (32, 66, 1, 32, 4, 1), (24, 88, 1, 32, 4, 1)
    step = [("red", 40.0, (2112, 128), 0, "_Z3red", a), ("red", 25.0, (2112, 128), 0, "_Z3red", b)] * 8
    k, configs, _error, sequence = represent(step, None)
    assert k == 1 and [c.get("dims") for c in configs["red"]] == [[[24, 88, 1], [32, 4, 1]],
                                                                   [[32, 66, 1], [32, 4, 1]]]
    assert sequence == [["red", 2112, 128, 8], ["red", 2112, 128, 8]]
    sized = [l[:5] for l in step]  # a timing pass without the dimensions: one configuration
    k, configs, _error, sequence = represent(sized, None)
    assert k == 2 and len(configs["red"]) == 1 and len(sequence) == 2


def test_a_few_jittering_small_launches_do_not_make_every_launch_profiled():
    """Eight layers: a GEMM of 100 us and three elementwise operations of 2, 4 and 8 us on
    one grid each layer; in the seventh layer one 2 us launch took 2.6 us. Every distinct
    duration would need K = 19 (the jittered launch is the 19th of its configuration);
    counting it as a 2 us launch moves the step by 0.6 us of 912, so K = 3 (2, 4 and 8 us
    each seen), the step's time kept within 0.1 %."""
    step = []
    for layer in range(8):
        step += [("gemm", 100.0, (132, 256)), ("ew", 2.0, (64, 128)), ("ew", 4.0, (64, 128)),
                 ("ew", 8.0, (64, 128))]
    step[6 * 4 + 1] = ("ew", 2.6, (64, 128))
    k, configs, error, _sequence = represent([(*l, 0) for l in step], None)
    assert k == 3 and error < 0.001
    ew = configs["ew"][0]
    assert ew["profiled"] == 3 and ew["weights"] == [8, 8, 8]
    # where the unseen launches move the step by more than STAND_IN_ERROR, K sees them
    heavy = [(n, 40.0 if (n == "ew" and us == 2.6) else us, c) for n, us, c in step]
    k, _configs, error, _sequence = represent([(*l, 0) for l in heavy], None)
    assert k == 19 and error == 0.0  # the 40 us launch is the 19th of its configuration


def test_no_plan_where_nothing_is_saved_or_a_configuration_is_unknown():
    assert represent([l for l in LAUNCHES if l[0] == "gemm" and l[2][0] == 66], None) is None
    assert represent([(n, us, None, s) for n, us, _c, s in LAUNCHES], None) is None
    assert represent([("a", 1.0, (1, 32), 1)], None) is None  # nothing in the first step
    _k, only, _error, _sequence = represent(LAUNCHES, {"gemm"})
    assert set(only) == {"gemm"}


def test_each_row_counts_for_its_launches():
    plan = (("gemm", 132, 256, 2), ("ew", 64, 128, 2), ("gemm", 132, 256, 0), ("ew", 64, 128, 1))
    rows = [{"kernel": "gemm", "grid_size": 132.0, "block_size": 256.0},
            {"kernel": "ew", "grid_size": 64.0, "block_size": 128.0},
            {"kernel": "gemm", "grid_size": 132.0, "block_size": 256.0},
            {"kernel": "ew", "grid_size": 64.0, "block_size": 128.0}]
    assert counts(rows, plan) == ([2, 2, 0, 1], "")
    # a report that does not hold the planned launches in order: each counted once, and said
    times, note = counts(rows[1:] + rows[:1], plan)
    assert times == [1, 1, 1, 1] and note.endswith(
        "each launch counted once: launch 1 is ew (64 x 128), the plan's gemm (132 x 256)")
    times, note = counts(rows[:3], plan)
    assert times == [1] * 3 and note.endswith("3 launches where the plan had 4")


def test_launches_ncu_profiled_past_the_plan_count_for_none():
    """ncu's per-launch-config tells grids of one size and different shapes apart (a
    reduction on 32 x 66 and on 24 x 88 blocks); where a timing pass keyed them by size
    (a paprof before it read the dimensions), the report holds the planned launches in
    order with more between them: those count for none, the step stays the plan's."""
    plan = (("gemm", 132, 256, 2), ("red", 2112, 128, 3), ("red", 2112, 128, 1))
    rows = [{"kernel": k, "grid_size": float(g), "block_size": float(b)}
            for k, g, b in (("gemm", 132, 256), ("red", 2112, 128), ("red", 2112, 128),
                            ("red", 2112, 128), ("red", 2112, 128))]
    times, note = counts(rows, plan)
    assert times == [2, 3, 1, 0, 0] and sum(times) == 6
    assert note.startswith("ncu profiled 2 launches the timing pass did not plan (the first: red (2112 x 128))")
    # the plan not found in order: each launch once
    times, note = counts(rows[:1] + rows[2:3], plan)
    assert times == [1, 1] and "each launch counted once" in note


def _record(launches, steps):
    chosen = choose(launches, steps, cover=1.0)
    k, configs, _error, sequence = represent(launches, None)
    chosen["represented"], chosen["per_config"], chosen["sequence"] = True, k, sequence
    for entry in chosen["kernels"]:
        entry["configs"] = configs[entry["kernel"]]
    return chosen


def test_weights_read_from_the_record():
    got = weights({"selection": _record(LAUNCHES, 2)})
    assert got[:2] == (("gemm", 132, 256, 1), ("ew", 64, 128, 2)) and len(got) == 6
    chosen = _record(LAUNCHES, 2)
    chosen["represented"] = False
    assert weights({"selection": chosen}) is None


@pytest.mark.parametrize("spoil", [
    lambda c: c.update(sequence=[]), lambda c: c.update(sequence="x"), lambda c: c.pop("sequence"),
    lambda c: c["sequence"].append(7), lambda c: c["sequence"].append(["k", 1, 1]),
    lambda c: c["sequence"][0].__setitem__(3, 2 ** 70), lambda c: c["sequence"][0].__setitem__(3, -1),
    lambda c: c["sequence"][0].__setitem__(3, 1.5), lambda c: c["sequence"][0].__setitem__(1, -1),
    lambda c: c["sequence"][0].__setitem__(2, True), lambda c: c["sequence"][0].__setitem__(0, 3),
    lambda c: [s.__setitem__(3, 0) for s in c["sequence"]],
    lambda c: c.update(sequence=[["k", 1, 1, 1]] * 100_001),
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
    assert k == 1  # every configuration (function, grid, block) once a step
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
        context, actions = opened(path, *args, **kwargs)  # (--kernel-name-base mangled)
        seen, kept = {}, []
        for action in actions:
            key = (ncu_reader.mangled_name(action), ncu_reader.read_metric(action, "launch__grid_size"),
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
    # the first step's counters within 0.01 % (its two GEMM launches of one function and
    # grid, 1186.9 and 1186.2 us, count as the first twice; keyed by function name, two
    # elementwise operations on one grid of 45.5 us, 3.0 M and 7.7 M warp instructions,
    # stood for each other: 0.6 % off)
    for column in ("instructions_executed", "dram_bytes"):
        assert one[column].iloc[0] == pytest.approx(first[column], rel=1e-4), column
    for column in ("duration_us", "dram_bytes"):
        lo, hi = whole[column].min(), whole[column].max()
        assert lo * 0.98 <= one[column].iloc[0] <= hi * 1.02, column

    # a report holding every launch of the three steps: the 13 planned ones are in it in
    # order (the first step's, its second GEMM launch stood for by the first); the other
    # 29 count for none, and that is said
    monkeypatch.setattr(load_module, "open_report", opened)
    every = load_reports([tmp_path / "runs"])
    assert len(every) == 14 and "ncu profiled 29 launches the timing pass did not plan" in " ".join(every.attrs["notes"])
    assert variant_rows(every)["duration_us"].iloc[0] == pytest.approx(one["duration_us"].iloc[0])

    # a report without a planned kernel: each launch counted once, and said
    def without_the_first_kernel(path, *args, **kwargs):
        context, actions = opened(path, *args, **kwargs)
        actions = list(actions)
        return context, iter([a for a in actions if a.name() != actions[0].name()])

    monkeypatch.setattr(load_module, "open_report", without_the_first_kernel)
    short = load_reports([tmp_path / "runs"])
    assert 14 < len(short) < 42 and "each launch counted once" in " ".join(short.attrs["notes"])
