"""paprof: profile GPU kernel variants under Nsight Compute and explain the difference.

Importing paprof never needs a GPU, CuPy or ncu: those are looked up on first use.
"""

__version__ = "0.1.0"
