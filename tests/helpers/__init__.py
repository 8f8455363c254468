"""Code the tests share: one module per subject, imported as ``helpers.<module>``.

Test modules import from here, never from each other or from ``conftest`` (fixtures
reach tests by name; ``tests/test_test_layout.py`` checks both). ``tests`` is the one
folder in pytest's ``pythonpath`` (pyproject.toml), for this package.
"""
