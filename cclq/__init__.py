"""cclq: a columnar analytics engine for distributed-training profiler traces.

Library entry points (the CLI is a thin wrapper over these):
``cclq.ingest.ingest`` builds the warehouse, ``cclq.query.engine.connect`` opens it in
DuckDB with every view defined.
"""

__version__ = "0.1.0"
