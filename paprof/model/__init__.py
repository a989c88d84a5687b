"""The numbers: the tidy table (``load``), steps, bottleneck labels, the decomposition,
the ledger, roofline, statistics and the comparison's data (``comparison``,
``assembly``, ``movers``). Reads ``paprof.read``; no words beyond labels."""
