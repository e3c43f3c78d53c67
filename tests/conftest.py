"""Project-wide test configuration.

The ``gpu`` marker lives in `tirxh.testing` (loaded with ``-p tirxh.testing`` from pyproject), so
the core, KCoral and every plugin distribution skip GPU tests the same way.
"""
