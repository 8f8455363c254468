"""``cclq serve``: the board with CCL-Bench's upload API (app.py), safe archive
unpacking (archive.py) and the upload job queue (jobs.py). Needs the ``serve`` extra."""
