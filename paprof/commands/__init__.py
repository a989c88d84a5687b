"""The CLI's commands, one module each; options several of them share."""


def step_range_option(fn):
    """``--step-range NAME``: the NVTX range pushed once per step, for reports whose run
    record names none (``paprof.analysis.steps``); one definition for every command."""
    import click

    return click.option("--step-range", default=None, metavar="NAME",
                        help="The NVTX range pushed once per step, for reports whose run record "
                        "names none (a foreign report is otherwise one step).")(fn)
