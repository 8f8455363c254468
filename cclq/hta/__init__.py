"""HTA 0.5.0's import paths over cclq: ``hta.X`` is ``cclq.hta.X``.

A script or notebook written for Holistic Trace Analysis runs on cclq after its ``hta``
imports are changed to ``cclq.hta`` and nothing else, for the names HTA's example
notebooks import (docs/api.md lists them, and what is not covered). Each module here only
re-exports what ``cclq.api`` implements over the warehouse's SQL views; nothing is
computed in this package. pandas and plotly come with the ``hta`` extra.
"""
