"""paprof's version, in one place: ``paprof.__version__``, ``paprof --version``, the
wheel's metadata (``pyproject.toml`` reads this file: ``[tool.setuptools.dynamic]``) and
every run's, sweep's, baseline's and report's ``paprof_version`` come from here.

Keep it a plain string literal: setuptools reads it without importing paprof.
"""

__version__ = "0.1.0"
