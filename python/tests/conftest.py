"""Shared set-up of the Python package's tests: the package must be installed
(``pip install ./python``); without it the tests skip, and fail under ``CI=true``."""

import os

import pytest

try:
    import sluice  # noqa: F401

    MISSING = None
except ImportError as error:  # the package was not built or installed
    MISSING = error


def pytest_collection_modifyitems(config, items):
    if MISSING is None:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"the sluice package cannot be imported under CI=true: {MISSING}")
    skip = pytest.mark.skip(reason=f"the sluice package is not installed (pip install ./python): {MISSING}")
    for item in items:
        item.add_marker(skip)
