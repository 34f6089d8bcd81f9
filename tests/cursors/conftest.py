from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cursors.cursor_kit import cursor_database


@pytest.fixture
def dsn() -> Iterator[str]:
    """A PostgreSQL database of its own for the test."""
    with cursor_database() as found:
        yield found
