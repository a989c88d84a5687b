"""``paprof run --timings``: where each variant's run spent its time (``paprof.phases``)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from paprof import phases as ph
from paprof.safetext import shown as _shown


def shown(text) -> str:
    return escape(_shown(text))


def _note(p: ph.Phase) -> str:
    bits = []
    if p.passes is not None:
        bits.append(f"{p.passes} passes" + (f", {p.kernels} kernels" if p.kernels else ""))
    if p.shared > 1:
        bits.append(f"shared by {p.shared} variants")
    if p.overlapped:
        bits.append("beside the GPU's work")
    return "; ".join(bits)


def variant_table(name: str, phases) -> Table:
    """One variant's phases in running order, its seconds, what else is known."""
    table = Table(title=f"{shown(name)}: phases", title_justify="left")
    table.add_column("phase", no_wrap=True)
    table.add_column("s", justify="right")
    table.add_column("", overflow="fold")
    for p in phases:
        table.add_row(shown(p.name), f"{p.seconds:.2f}", _note(p))
    own = sum(p.own_seconds for p in phases)
    table.add_row("[bold]its part[/bold]", f"[bold]{own:.2f}[/bold]",
                  "shared phases split, overlapped ones left out")
    return table


def totals_table(runs, wall_s: float | None = None) -> Table:
    """Seconds per phase over every variant (a shared phase once, an overlapped one left
    out) and its share of their sum; then the command's wall-clock time."""
    sums = ph.totals(runs)
    whole = sum(sums.values())
    table = Table(title="all variants: phases", title_justify="left")
    table.add_column("phase", no_wrap=True)
    table.add_column("s", justify="right")
    table.add_column("share", justify="right")
    for name, seconds in sums.items():
        table.add_row(shown(name), f"{seconds:.2f}", f"{100 * seconds / whole:.0f} %" if whole else "-")
    table.add_row("[bold]sum[/bold]", f"[bold]{whole:.2f}[/bold]", "")
    beside = ph.overlapped(runs)
    if beside:
        table.add_row("(beside it: SASS hashes)", f"{beside:.2f}", "")
    if wall_s is not None:
        table.add_row("wall clock", f"{wall_s:.2f}", "")
    return table


#: Presets whose replay passes count instructions by SASS patching for the memory tables
#: and the roofline (``smsp__sass_*``, whole sections or only the metrics paprof reads):
#: the slow passes, which ``basic`` leaves out (it keeps ncu's per-opcode counts, which its
#: sections collect under ncu 2025.3.1).
COUNTING = ("default", "tables", "source")

#: The replay passes' share of a run past which ``--timings`` says what ``basic`` saves.
MOSTLY_REPLAY = 0.5


def faster_hint(outcomes, preset: str) -> str | None:
    """One line where replay passes were most of the run and the preset counts
    instructions: what ``--preset basic`` gives up for fewer passes; else None."""
    runs = [o.run.sidecar.phases for o in outcomes if o.run is not None and o.run.sidecar.phases]
    if preset not in COUNTING or not runs:
        return None
    sums = ph.totals(runs)
    whole = sum(sums.values())
    replay = sums.get(ph.REPLAY, 0.0)
    if not whole or replay / whole < MOSTLY_REPLAY:
        return None
    return (f"replay passes took {100 * replay / whole:.0f} % of this run: --preset basic replays "
            "fewer (no traffic tables or roofline, so causes on the memory side, such as "
            "uncoalesced loads or bank conflicts, lose their words; on an H100, paged_decode's "
            "baseline kernel replays 20 passes in 16.0 s with it against the default's 27 in "
            "23.0 s)")


def timing_tables(outcomes, wall_s: float | None = None) -> list[Table]:
    """A table per stored run, then the totals (nothing when no run holds phases)."""
    runs = [(o.variant.name, o.run.sidecar.phases) for o in outcomes if o.run is not None]
    runs = [(name, phases) for name, phases in runs if phases]
    if not runs:
        return []
    return [variant_table(name, phases) for name, phases in runs] + [
        totals_table([phases for _, phases in runs], wall_s)]
