"""paprof's kernel lab: the ``paged_decode`` and ``flash_fwd`` families.

A plugin like any user's: ``pyproject.toml`` registers both families in the
``paprof.families`` entry-point group, and paprof finds them there. Nothing in paprof
imports this package.
"""

__version__ = "0.1.0"
