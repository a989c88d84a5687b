"""A layout transpose told from its counters (paprof/model/kernel_kinds.py), and the words
a comparison says when such kernels appear, vanish or are fused away."""

from paprof.explain.cause_words import mechanism
from paprof.model.decompose import Term, _work
from paprof.model.kernel_kinds import is_layout_transpose

# cuDNN's nhwcToNchwKernel as measured on an H100 (examples/zoo/runs-h100.tar.xz, lib4_slow)
CUDNN_TRANSPOSE = {"global_load_instructions": 1048576, "global_store_instructions": 1048576,
                   "shared_load_instructions": 1048576, "shared_store_instructions": 1048576,
                   "l1_global_load_sectors": 2097152, "l1_global_store_sectors": 2097462}


def _with(**changes):
    v = dict(CUDNN_TRANSPOSE)
    v.update(changes)
    return v


def test_a_tiled_transpose_is_one():
    assert is_layout_transpose(CUDNN_TRANSPOSE)
    # several launches' sums keep the shape
    assert is_layout_transpose({k: 3 * x for k, x in CUDNN_TRANSPOSE.items()})


def test_kernels_of_other_shapes_are_not():
    # an elementwise pass: no shared memory
    assert not is_layout_transpose(_with(shared_load_instructions=0, shared_store_instructions=0))
    # a stencil or a GEMM: shared memory read many times per global store
    assert not is_layout_transpose(_with(shared_load_instructions=9 * 1048576))
    # a reduction: writes far fewer bytes than it reads
    assert not is_layout_transpose(_with(global_store_instructions=1024, shared_load_instructions=1024,
                                         l1_global_store_sectors=2048))
    # a tile staged into shared memory once but read twice
    assert not is_layout_transpose(_with(shared_store_instructions=2 * 1048576))


def test_a_missing_counter_guesses_nothing():
    for column in CUDNN_TRANSPOSE:
        v = dict(CUDNN_TRANSPOSE)
        del v[column]
        assert not is_layout_transpose(v)
    assert not is_layout_transpose(_with(shared_store_instructions=float("nan")))
    assert not is_layout_transpose(_with(shared_store_instructions="n/a"))


class _Part:
    def __init__(self, kernel, values, duration_us=10.0):
        self.kernel, self.values, self.duration_us, self.launches = kernel, values, duration_us, 1


def test_work_counts_transposes_only_where_there_are_some():
    other = _with(shared_load_instructions=0, shared_store_instructions=0)
    assert "layout_transposes" not in _work([_Part("a", other)])
    assert _work([_Part("t", CUDNN_TRANSPOSE), _Part("a", other)])["layout_transposes"] == 1


def test_gone_transposes_are_named_as_such():
    t = Term("kernel-", "kernels gone", -126.0, kernels=["nhwcToNchwKernel", "nchwToNhwcKernel x2"],
             work={"dram_bytes": 242e6, "instructions": 57.1e6, "layout_transposes": 2})
    line = mechanism(t)
    assert line.startswith("2 layout transposes gone (nhwcToNchwKernel, nchwToNhwcKernel x2: ")
    assert "shared-memory tile" in line and "no longer done" in line
    t.work["layout_transposes"] = 1
    line = mechanism(t)
    assert line.startswith("2 kernels gone (nhwcToNchwKernel, nchwToNhwcKernel x2; "
                           "1 of them a layout transpose (")
    del t.work["layout_transposes"]
    assert mechanism(t).startswith("2 kernels gone (nhwcToNchwKernel, nchwToNhwcKernel x2): ")


def test_a_fusion_says_which_side_transposed():
    gone = Term("kernel-", "kernels gone", -50.0, kernels=["k_a1", "k_a2"],
                work={"dram_bytes": 3e8, "layout_transposes": 1})
    new = Term("kernel+", "kernels new", 20.0, kernels=["k_b"], work={"dram_bytes": 1e8})
    fused = Term("kernel-", "kernels new or gone", -30.0, members=[gone, new])
    line = mechanism(fused)
    assert line.startswith("2 kernels fused into 1 (k_a1, k_a2 -> k_b; 1 of those before a "
                           "layout transpose (")
    assert "round trip through DRAM is gone" in line


class _K:
    def __init__(self, kernel, values, us):
        self.kernel, self.values, self.launches = kernel, dict(values, duration_us=us), 1

    @property
    def duration_us(self):
        return self.values["duration_us"]


def test_a_transpose_does_not_take_the_place_of_a_kernel_that_computes():
    """case23: a transpose (the longest) and a reduction against one reduction: the
    reduction is paired with the reduction, the transpose is gone."""
    from paprof.model.decompose import match_kernels

    reduce = {"global_load_instructions": 2097152, "global_store_instructions": 8192,
              "shared_load_instructions": 0, "shared_store_instructions": 0,
              "l1_global_load_sectors": 8388608, "l1_global_store_sectors": 8186}
    slow = [_K("a1", CUDNN_TRANSPOSE, 187.0), _K("a2", reduce, 96.6)]
    fast = [_K("b", reduce, 94.9)]
    got = match_kernels(slow, fast)
    assert [(b.kernel, a.kernel) for b, a in got.pairs] == [("a2", "b")]
    assert [k.kernel for k in got.gone] == ["a1"] and not got.new
    # and the reverse: a transpose on the single side takes the other side's transpose
    got = match_kernels([_K("t", CUDNN_TRANSPOSE, 50.0)],
                        [_K("x", reduce, 90.0), _K("t2", CUDNN_TRANSPOSE, 40.0)])
    assert [(b.kernel, a.kernel) for b, a in got.pairs] == [("t", "t2")]
    # no kernel of the same kind: the longest, as before
    got = match_kernels([_K("t", CUDNN_TRANSPOSE, 50.0)], [_K("x", reduce, 90.0), _K("y", reduce, 9.0)])
    assert [(b.kernel, a.kernel) for b, a in got.pairs] == [("t", "x")]
