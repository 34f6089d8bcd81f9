from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.distributed.kit import Process


@pytest.fixture(autouse=True)
def no_process_outlives_its_test() -> Iterator[None]:
    yield
    Process.kill_all()
