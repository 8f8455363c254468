"""cclq from Python: ``cclq.open()`` (workspace.py) and HTA's method names (hta.py)."""
