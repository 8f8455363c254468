"""Trace format readers: detection (``detect``), byte sources (``source``) and one
module per format family. Each reader turns a file into record batches of
``cclq.schema.EVENT_SCHEMA``."""
