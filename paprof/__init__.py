"""paprof: profile GPU kernel variants under Nsight Compute and explain the difference.

Importing paprof never needs a GPU, CuPy or ncu: those are looked up on first use.
"""

from paprof._version import __version__


def __getattr__(name):
    # ``paprof.compare`` and ``paprof.load`` for notebooks (docs/api.md), imported on first
    # use so ``import paprof`` stays light
    if name in ("compare", "load"):
        from paprof import notebook

        return getattr(notebook, name)
    if name == "profile":  # profile a notebook's callables under ncu (paprof/profile_api.py)
        from paprof.profile_api import profile

        return profile
    raise AttributeError(f"module 'paprof' has no attribute {name!r}")
