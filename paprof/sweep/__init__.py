"""Sweeps: a family's parameters over a grid of shapes, run, sharded, merged, reported.

``grid`` parses ``--grid KEY=VALUES`` into points (the family's ``Params``) and splits
them into shards; ``run`` measures each point into the run store, resumably, and keeps a
manifest; ``gpus`` runs one shard per GPU; ``merge`` joins stores; ``report`` turns a
sweep's store into scaling charts, the regime map and its crossovers. Only ``run``'s
point runners touch the GPU, and they import its code when they are called.
"""
