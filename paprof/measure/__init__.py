"""Profiling under Nsight Compute: find ncu, build its argv, run it, store the runs.

Import the submodules directly (``paprof.read.store``, ``paprof.measure.profile``);
none of them needs a GPU or ncu at import time.
"""
