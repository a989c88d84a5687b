"""Profiling under Nsight Compute: find ncu, build its argv, run it, store the runs.

Import the submodules directly (``paprof.profiler.store``, ``paprof.profiler.profile``);
none of them needs a GPU or ncu at import time.
"""
