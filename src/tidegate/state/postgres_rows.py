"""Result rows of the PostgreSQL ledger, read by position or by column name."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from psycopg.rows import RowMaker


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, as sqlite3.Row is: the row codecs
    (tidegate.state.codec) read both stores' rows alike."""

    names: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)


def named_rows(cursor: Any) -> RowMaker[Row]:
    """psycopg row factory: Rows that know the columns of this result (the first of two
    columns with one name wins, as in sqlite3.Row)."""
    columns = [column.name for column in cursor.description or ()]
    names = {name: index for index, name in reversed(list(enumerate(columns)))}
    return cast(RowMaker[Row], type("Row", (Row,), {"names": names}))
