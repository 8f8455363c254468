"""The version of cclq: recorded in the catalog, the result cache keys and the board."""

__version__ = "0.2.0"
