"""Reading: the ``.ncu-rep`` format (``ncu_fastread``, the ``ncu_report`` adapter
``ncu_reader``), the metric catalogue the reader fills (``metrics``), the run store and
its records (``store``, ``store_files``, ``record``), and which reports a command names
(``resolve``). Imports nothing of paprof above it."""
