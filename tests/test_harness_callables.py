"""The harness without a GPU: a callable's ``prepare`` hook, the stream hold ahead of timed
launches, and ``bench`` skipping a variant whose build refuses the shape. CuPy is replaced
by a NumPy stand-in that records the order of what would be enqueued."""

from __future__ import annotations

import time
import types
from dataclasses import dataclass

import numpy as np
import pytest

from paprof.errors import ShapeError, UserError
from paprof.family import CallableVariant, Family, Params, Work, param
from paprof.measure.kernels import bench, gpu, harness, kinds


class FakeCupy:
    """NumPy standing in for CuPy: arrays on the host, events that record their order."""

    def __init__(self, log):
        self.log = log
        fake = self

        class Event:
            def record(self):
                fake.log.append("event")

            def synchronize(self):
                pass

        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_elapsed_time=lambda a, b: 0.25,
            runtime=types.SimpleNamespace(deviceSynchronize=lambda: fake.log.append("sync")),
        )

    def __getattr__(self, name):
        return getattr(np, name)

    def get_default_memory_pool(self):
        return types.SimpleNamespace(free_all_blocks=lambda: None)


@pytest.fixture
def fake_gpu(monkeypatch):
    log: list = []
    monkeypatch.setattr(gpu, "cupy", lambda: FakeCupy(log))
    monkeypatch.setattr(gpu, "current_device", lambda: types.SimpleNamespace(name="fake", l2_bytes=1 << 20))
    monkeypatch.setattr(harness, "hold_stream", lambda seconds: log.append(("hold", seconds)))
    monkeypatch.setattr(harness, "measure_read_ceiling", lambda: {"tbs": 1.0})
    return log


@dataclass(frozen=True)
class Size(Params):
    n: int = param(8, min=1)


PREPARED: list = []


def prepare_double(inputs, out, params):
    """A prepare hook: the work it does once (here: a converted copy) stays out of the steps."""
    PREPARED.append(id(inputs))
    doubled = inputs["x"] * 2.0

    def launch():
        out[:] = doubled

    return launch


def refuse_odd(inputs, out, params):
    if params.n % 2:
        raise ShapeError("n must be even for this library")
    return lambda: out.fill(0)


def _family(*variants):
    return Family(
        name="toy_prepared", params=Size,
        inputs=lambda p, seed, xp: {"x": np.random.default_rng(seed).standard_normal(p.n)},
        output=lambda p, xp: np.empty(p.n),
        reference=lambda p, inputs, xp: inputs["x"] * 2.0,
        work=lambda p: Work(bytes=16 * p.n),
        variants=list(variants),
    )


def test_prepare_replaces_fn_and_is_recorded():
    v = CallableVariant("lib", "a library's plan, then its run", prepare=f"{__name__}:prepare_double")
    assert v.fn_ref == f"{__name__}:prepare_double"
    assert v.to_dict()["prepare"] == f"{__name__}:prepare_double"
    assert v.resolve_prepare() is prepare_double
    assert "prepare" not in CallableVariant("f", "a function", fn="math:sqrt").to_dict()
    with pytest.raises(ValueError, match="give fn=function"):
        CallableVariant("none", "neither fn nor prepare")


def test_the_harness_prepares_every_input_set_before_a_step(fake_gpu):
    PREPARED.clear()
    fam = _family(CallableVariant("lib", "plan then run", prepare=prepare_double))
    prep = harness.prepare(fam, fam.variant("lib"), Size(n=16), seed=1, input_sets=3)
    assert PREPARED == [id(a) for a in prep.args]  # each set once, in advance
    assert fake_gpu == ["sync"]  # and the GPU is idle again before anything is timed
    check = harness.verify(prep)
    assert check.passed and check.rel_error == 0.0
    prep.step(2)
    np.testing.assert_array_equal(prep.out, prep.inputs[2]["x"] * 2.0)
    assert len(PREPARED) == 3  # steps reuse the prepared launches
    # a caller that skips the harness gets its inputs prepared on their first step
    fresh = {"x": np.ones(16)}
    prep.launcher(fresh, prep.out_arg)
    assert PREPARED[-1] == id(fresh) and (prep.out == 2.0).all()


def test_prepare_must_return_a_launch(fake_gpu):
    fam = _family(CallableVariant("bad", "returns no function", prepare=lambda i, o, p: 42))
    with pytest.raises(UserError, match="prepare returned int, not a function"):
        harness.prepare(fam, fam.variant("bad"), Size())


def test_timed_steps_queue_behind_a_hold_sized_from_the_host_time(fake_gpu):
    fam = _family(CallableVariant("slow", "slow on the host", fn=lambda i, o, p: time.sleep(0.002)))
    prep = harness.prepare(fam, fam.variant("slow"), Size())
    fake_gpu.clear()
    times = harness.time_steps(prep, launches=10, warmup=3)
    assert times == [250.0] * 10
    hold = [e for e in fake_gpu if isinstance(e, tuple)]
    assert len(hold) == 1 and fake_gpu.index(hold[0]) == fake_gpu.index("sync") + 1
    assert fake_gpu.index(hold[0]) < fake_gpu.index("event")  # before the first timed step
    assert 2 * 10 * 0.002 <= hold[0][1] <= harness.HOLD_MAX_S
    fake_gpu.clear()
    harness.time_steps(prep, launches=5, hold=False)
    assert not any(isinstance(e, tuple) for e in fake_gpu)


def test_hold_seconds():
    assert harness.hold_seconds(50e-6, 100) == pytest.approx(2 * 100 * 50e-6 + 1e-3)
    assert harness.hold_seconds(10.0, 100) == harness.HOLD_MAX_S
    assert harness.hold_seconds(-1.0, 10) == pytest.approx(1e-3)


def test_bench_skips_a_variant_whose_build_refuses_the_shape(fake_gpu):
    fam = _family(CallableVariant("even", "a library that takes even n", prepare=refuse_odd),
                  CallableVariant("lib", "plan then run", prepare=prepare_double))
    result = bench.run_bench(fam, fam.variants, Size(n=7), launches=5, rounds=2, seed=3)
    rows = {r.variant: r for r in result.rows}
    assert rows["even"].skipped == "n must be even for this library" and not rows["even"].medians_us
    assert rows["lib"].passed and len(rows["lib"].medians_us) == 2


def test_callables_without_prepare_build_as_before(fake_gpu):
    launcher = kinds.build(CallableVariant("f", "a function", fn=lambda i, o, p: None), Size(), None)
    assert launcher.setup is None and launcher.convert is None
