"""Engines decide *where* counting and bootstrap replicates run, never *what* they compute.

* :class:`LocalEngine` (default): in process.
* :class:`DaskEngine`: a Dask cluster, local or remote (``pip install 'tracetochain[dask]'``; dask is imported only
  when the engine is first used).

Both implement :class:`Engine` (``map_reduce`` over partitions, ``map_seeds`` over spawned seeds) and give
identical results for the same inputs and seeds.
"""

from tracetochain.engines._base import Engine, SeedLike, TreeReducer, get_engine, spawn_seeds, tree_reduce
from tracetochain.engines.dask import DaskEngine
from tracetochain.engines.local import LocalEngine

__all__ = ["DaskEngine", "Engine", "LocalEngine", "SeedLike", "TreeReducer", "get_engine", "spawn_seeds",
           "tree_reduce"]
