"""The benchmark board: a static leaderboard site built from the warehouse (``cclq board``).

``build.py`` decides what to compute and writes the site, ``pages.py`` renders the
HTML, ``figures.py`` the plots of a workload page, drawn with ``svg.py``.
"""
