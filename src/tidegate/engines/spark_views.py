"""The temporary views a Spark warehouse's statements read tables through.

A published table's view reads exactly the files its table holds now (the directories its
catalog pointers name, or its Iceberg table's data files on main); a source's view reads its
Parquet directory. Before a statement runs, the views of the tables it
names are brought up to date under one lock of the process, so that a view only ever moves
forward to newer pointers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlglot import exp

from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column
from tidegate.engines.spark_layout import Layout
from tidegate.project.config import IDENTIFIER
from tidegate.sql import spark as spark_sql
from tidegate.sql.statements import ident

# A published table's columns and the paths Spark reads it from, by (name, schema); None: no
# table of that name is published
Published = Callable[[str, str | None], tuple[Sequence[Column], tuple[str, ...]] | None]


class Views:
    """The views of one warehouse in the process's session, shared by its engine handles."""

    def __init__(self, session: Any, layout: Layout) -> None:
        self.session = session
        self.layout = layout
        self._lock = threading.Lock()
        # view name → what it was registered over (columns and directories, or the source)
        self._registered: dict[str, object] = {}

    def forget_sources(self) -> None:
        """Read the sources' folders anew at their next use: a view over a folder keeps the
        files it listed, and files may have come or gone since (each command opens its engine
        in a process whose session may outlive it: a worker's)."""
        with self._lock:
            for name in [n for n, state in self._registered.items() if isinstance(state, str)]:
                del self._registered[name]

    def refresh(self, published: Published, names: Iterable[str]) -> None:
        """Register or update the views of these tables; raises EngineError for a name that
        is neither a published table nor a source directory."""
        with self._lock:
            for name in names:
                self._refresh(published, name)

    def _refresh(self, published: Published, view: str) -> None:
        schema, _, table = view.rpartition(".")
        found = published(table, schema or None)
        if found is None:
            if view not in self._registered:
                self._register_source(view)
            return
        columns, paths = found
        state = (tuple(columns), paths)
        if self._registered.get(view) == state:
            return
        self.frame(columns, paths).createOrReplaceTempView(_quoted(view))
        self._registered[view] = state

    def frame(self, columns: Sequence[Column], paths: Iterable[str]) -> Any:
        """The rows of these Parquet files or directories, typed as the table's columns (a
        column a file predates reads as NULL)."""
        ddl = spark_sql.schema_ddl(columns)
        paths = list(paths)
        if not paths:
            return self.session.createDataFrame([], ddl)
        return self.session.read.schema(ddl).parquet(*paths)

    def show(self, view: exp.Table, columns: Sequence[Column], paths: list[str]) -> None:
        """Register a view over these files or directories (partitions just written)."""
        self.frame(columns, paths).createOrReplaceTempView(
            view.sql(dialect=spark_sql.SPARK_DIALECT)
        )

    def _register_source(self, name: str) -> None:
        where = self.layout.source(name)
        if not IDENTIFIER.match(name) or self.layout.has_source(name) is False:
            raise EngineError(
                f"spark: no table {name}: not published, and no Parquet directory {where}"
            )
        try:
            self.session.read.parquet(where).createOrReplaceTempView(_quoted(name))
        except Exception as error:
            raise EngineError(
                f"spark: cannot read the source {name} at {where}: {_first_line(error)}"
            ) from None
        self._registered[name] = where

    def source_fields(self, name: str) -> list[tuple[str, str]] | None:
        """A source directory's columns and their Spark types, or None when there is none."""
        if not IDENTIFIER.match(name) or self.layout.has_source(name) is False:
            return None
        try:
            schema = self.session.read.parquet(self.layout.source(name)).schema
        except Exception:
            return None
        return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _quoted(view: str) -> str:
    return ident(view).sql(dialect=spark_sql.SPARK_DIALECT)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
