"""Shared by every test module: the repository's vector files, and the check
that the package under test is the installed one (a wheel in site-packages),
not the source tree.

The tests run from a checkout (they read ``tests/vectors`` of the repository,
found relative to this file) against the installed ``intentkey``. A run on
the source tree (an editable install) must say so: ``INTENTKEY_TEST_SOURCE=1``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import intentkey

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VECTORS = REPO / "tests" / "vectors"
HTTP_VECTORS = VECTORS / "http" / "http_test.json"


def _installed(path: str) -> bool:
    parts = Path(path).resolve().parts
    return "site-packages" in parts or "dist-packages" in parts


def pytest_report_header(config: pytest.Config) -> str:
    return f"intentkey {intentkey.__version__} from {os.path.dirname(intentkey.__file__)} (python {sys.version.split()[0]})"


def pytest_sessionstart(session: pytest.Session) -> None:
    where = intentkey.__file__ or ""
    if os.environ.get("INTENTKEY_TEST_SOURCE") == "1":
        return
    assert _installed(where), (
        f"intentkey was imported from {where}, not from an installed wheel (site-packages): "
        "run scripts/test-py.sh, or set INTENTKEY_TEST_SOURCE=1 to test the source tree on purpose"
    )
    assert not Path(where).resolve().is_relative_to(REPO / "py" / "src"), f"intentkey imported from the source tree: {where}"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    assert VECTORS.is_dir(), f"no vector directory at {VECTORS}"
    return VECTORS
