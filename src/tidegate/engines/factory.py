"""Opening the project's warehouse engine; engine modules are imported only here."""

from __future__ import annotations

import sys

from tidegate.engines.base import Engine
from tidegate.project.loader import Project


def open_engine(project: Project, wait: bool, read_only: bool = False) -> Engine:
    """Open the warehouse (for writing unless `read_only`); raises BusyError when another
    writer holds it."""
    from tidegate.engines.duckdb import DuckDBEngine

    return DuckDBEngine(project.warehouse_path, wait=wait, on_wait=_tell, read_only=read_only)


def _tell(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
