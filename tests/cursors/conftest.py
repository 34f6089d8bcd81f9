from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines.postgres_kit import fresh_database


@pytest.fixture
def dsn() -> Iterator[str]:
    """A PostgreSQL database of its own for the test."""
    with fresh_database("cursor") as found:
        yield found
