"""What a Python model's module uses: `@tidegate.model(...)` and the context its function gets.

Kept free of heavy imports: loading a project imports every Python model module.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import pyarrow

# the attribute the decorator leaves on a model's function, read by the project loader
DECLARATION = "__tidegate_model__"

Function = TypeVar("Function", bound=Callable[..., Any])


def model(**declaration: Any) -> Callable[[Function], Function]:
    """Declare the decorated function a model, with the keys an SQL model's header takes
    (grain, time_column, columns, checks, …) plus `upstream`, `sources` and `packages`.

    The function takes a `Context` and returns a pyarrow.Table, a pandas or a polars DataFrame
    holding the rows of the partition (or batch of partitions) between `ctx.start` and
    `ctx.end`. Declaring does nothing else: the loader validates the keys.
    """

    def mark(function: Function) -> Function:
        setattr(function, DECLARATION, dict(declaration))
        return function

    return mark


class Context(Protocol):
    """What a Python model's function is given."""

    model: str
    # the window being computed, UTC, end exclusive (None for a key-list partition)
    start: datetime | None
    end: datetime | None
    # the partition's key (key-list partitions only)
    key: str | None

    def read(self, name: str, whole: bool = False) -> pyarrow.Table:
        """The rows of a declared source or upstream model in the window, by their time (or
        partition) column; `whole`, or a key-list partition: every row."""
        ...
