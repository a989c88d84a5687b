"""What tests/test_v7_planner.py (v7's planner, pure Python) and tests/test_paged_emulated.py
(v7's kernels on the CPU) share: the ragged batches, the emulated GPU's CTA slots, the packed
cases and the checks of a packed plan."""

from __future__ import annotations

import numpy as np

from paprof_kernels.paged_decode import variants
from paprof_kernels.paged_decode.problem import Shape

V7_CAPACITY = 24
"""Resident CTA slots the emulated v7 plans for (a small GPU: the tests' shapes then get
one-part and many-part sequences side by side)."""
# -- v7: the work list (token-balanced chunks, longest first, one-part sequences direct) -------

ISSUE_RAGGED = (17, 300, 1024, 2048, 4000, 4096, 6000, 8192, 9000, 12000, 15000, 16384, 500, 3000, 7000, 10000)
SCALED_RAGGED = tuple(max(1, c // 32) for c in ISSUE_RAGGED)  # the issue's 16 lengths / 32: 0..512 tokens
EDGE_RAGGED = (1, 15, 16, 17, 300, 700)  # one-page and one-token sequences beside many-part ones


def _packed_covering(shape: Shape, plan: dict, capacity: int, snap: int, cost: int) -> None:
    """The packed plan's items cover each sequence's pages once, in parts numbered along
    the sequence; each CTA's range is contiguous in the concatenated stream (its last
    segment first, then the others in order), holds at most PACKED_MERGES (2) items of
    several parts, and is within +-1 of equal cost (its pages, plus ``cost`` a sequence
    but the first that starts in it), plus ``snap`` pages each side where a cut moved onto
    a sequence boundary and ``cost`` where it fell within a sequence's cost. The kernel's
    array (packed_array) gives CTA y item y first and chains the rest in order."""
    pages = [-(-c // shape.page_size) for c in shape.context_lens]
    starts = np.concatenate([[0], np.cumsum(pages)]).tolist()
    total = starts[-1]
    assert plan["ctas"] == max(1, min(capacity // shape.kv_heads, total // variants.MIN_PAGES_PER_SPLIT))
    ranges, items = plan["ranges"], plan["items"]
    assert ranges[0] == 0 and ranges[-1] == len(items) and len(ranges) == plan["ctas"] + 1
    seen = np.zeros(total, dtype=int)
    by_seq: dict = {}
    sizes, costs = [], []
    arr = variants.packed_array(plan).reshape(-1, variants.WORK_ITEM_INTS)
    for k in range(plan["ctas"]):
        mine = items[ranges[k]:ranges[k + 1]]
        assert mine, f"CTA {k} has no item"
        chain, at = [], k
        while at >= 0:
            chain.append(tuple(arr[at, :6]))
            at = arr[at, 6]
        assert chain == mine, f"CTA {k}'s chain in the kernel's array is not its items"
        assert sum(1 for it in mine if it[4] > 1) <= 2, f"CTA {k} could owe more than PACKED_MERGES merges"
        stream = mine[1:] + mine[:1]  # the kernel's order: the last segment first
        flat = [(starts[s] + p0, starts[s] + p1) for s, p0, p1, *_ in stream]
        assert all(a[1] == b[0] for a, b in zip(flat, flat[1:])), f"CTA {k}'s range is not contiguous"
        sizes.append(flat[-1][1] - flat[0][0])
        costs.append(sizes[-1] + cost * sum(1 for s, p0, *_ in stream if p0 == 0 and s > 0 and starts[s] > flat[0][0]))
        for (s, p0, p1, part, parts, base), (a, b) in zip(stream, flat):
            assert 0 <= p0 < p1 <= pages[s]
            seen[a:b] += 1
            by_seq.setdefault(s, []).append((part, p0, p1, parts, base))
    assert (seen == 1).all(), "every page exactly once"
    bases = []
    for s, got in by_seq.items():
        got.sort()
        assert [g[0] for g in got] == list(range(len(got))) and {g[3] for g in got} == {len(got)}
        assert got[0][1] == 0 and got[-1][2] == pages[s] and all(a[2] == b[1] for a, b in zip(got, got[1:]))
        if len(got) > 1:
            bases.append((got[0][4], len(got)))
        else:
            assert got[0][4] == 0
    assert sorted(by_seq) == list(range(shape.batch))
    bases.sort()
    assert [b for b, _ in bases] == [sum(n for _, n in bases[:i]) for i in range(len(bases))]
    assert plan["part_slots"] == sum(n for _, n in bases) and plan["multi_part"] == len(bases)
    mean = sum(costs) / plan["ctas"]
    slack = 1 + 2 * snap + 2 * cost
    assert max(costs) <= mean + slack and min(costs) >= mean - slack, (costs, mean)
    assert plan["pages_per_cta"] == max(sizes)


PACKED_CASES = [
    # (shape, what the plan must show): CTA ranges spanning 1, 2 and many sequences, a
    # sequence split across 3 or more CTAs; groups 1 / 4 / 8, d64 / d128, every cache dtype
    (dict(batch=16, q_heads=8, kv_heads=2, context=SCALED_RAGGED, dtype="fp16"), "many"),
    (dict(batch=16, q_heads=4, kv_heads=4, head_dim=64, context=SCALED_RAGGED, dtype="bf16"),
     "many"),  # group 1: 6 CTAs, up to 7 sequences each
    (dict(batch=16, q_heads=16, kv_heads=2, head_dim=64, context=SCALED_RAGGED, dtype="fp8"), "many"),  # group 8
    (dict(batch=6, q_heads=16, kv_heads=2, context=EDGE_RAGGED, dtype="fp8"), "split3"),  # groups of 8
    (dict(batch=6, q_heads=4, kv_heads=4, head_dim=64, context=EDGE_RAGGED, dtype="fp16"), "split3"),  # group 1
    (dict(batch=3, q_heads=8, kv_heads=2, context=(900, 40, 1500), dtype="bf16"), "split3"),
    (dict(batch=6, q_heads=16, kv_heads=2, head_dim=64, page_size=8, context=EDGE_RAGGED, dtype="fp16"),
     "split3"),  # pages smaller than a tile
    (dict(batch=4, q_heads=8, kv_heads=2, page_size=32, context=(31, 33, 1000, 97), dtype="fp8"), "two"),
    (dict(batch=1, q_heads=8, kv_heads=2, context=(2000,), dtype="fp16"), "split3"),  # one sequence
]


def _spans(plan: dict) -> tuple[int, int]:
    """(the most sequences a CTA's range touches, the most CTAs a sequence's parts take)."""
    r = plan["ranges"]
    per_cta = max(len({it[0] for it in plan["items"][r[k]:r[k + 1]]}) for k in range(plan["ctas"]))
    return per_cta, max(it[4] for it in plan["items"])
