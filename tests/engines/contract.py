"""The Engine conformance suite (src/tidegate/engines/base.py). Every engine subclasses it.

A subclass provides one fixture, `engine`: an open engine on an empty warehouse, closed after the
test. Everything here goes through the seam itself: tables are made with stage + publish, and
read back by staging a copy and taking its checksum, so the suite runs unchanged on any engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, FencedError, TidegateError
from tidegate.domain.model import CheckSpec, Column, Severity, WriteMode
from tidegate.domain.partitions import WHOLE_TABLE, Grain, PartitionKey, parse_partition
from tidegate.engines.base import (
    CommitMarker,
    Engine,
    Fence,
    Target,
    bound_values,
    window_bounds,
)
from tidegate.sql.model_sql import parse_type

TEXT = parse_type("VARCHAR")
EVENT_COLUMNS = (
    Column("id", "BIGINT", False),
    Column("ts", "TIMESTAMP", False),
    Column("kind", TEXT, True),
    Column("amount", "DECIMAL(18, 2)", True),
)
Row = tuple[Any, ...]

DAY1 = parse_partition("2025-01-01", Grain.DAY)
DAY2 = parse_partition("2025-01-02", Grain.DAY)
DAY1_ROWS: list[Row] = [
    (1, "2025-01-01 00:00:00", "a", "1.50"),
    (2, "2025-01-01 12:30:00", "b", "2.25"),
    (3, "2025-01-01 23:59:59", None, None),
]
DAY2_ROWS: list[Row] = [
    (4, "2025-01-02 00:00:00", "a", "10.00"),
    (5, "2025-01-02 08:00:00", "c", "-3.10"),
]


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, Decimal)):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def select_rows(rows: Sequence[Row], columns: Sequence[Column] = EVENT_COLUMNS) -> str:
    """A SELECT of typed literal rows (portable SQL: VALUES with a column alias list)."""
    names = [c.name for c in columns]
    typed = ", ".join(f'CAST("{c.name}" AS {c.type}) AS "{c.name}"' for c in columns)
    body = rows or [tuple(None for _ in columns)]
    values = ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in body)
    where = "" if rows else " WHERE 1 = 0"
    return f"SELECT {typed} FROM (VALUES {values}) AS t({', '.join(names)}){where}"


def marker_for(
    attempt_id: str, partition: PartitionKey, model: str = "events", checksum: str = "0:0"
) -> CommitMarker:
    return CommitMarker(
        attempt_id=attempt_id,
        model=model,
        grain=partition.grain.value,
        partition_start=partition.start,
        partition_end=partition.end,
        run_id="run-20250101T000000000000Z-abcdef",
        version_id="0123456789ab",
        checksum=checksum,
        published_at="2025-01-02T00:00:00.000000+00:00",
    )


def _typed(column: Column, value: Any) -> Any:
    """A literal row value as the Python value of the column's type."""
    if value is None:
        return None
    if column.type == "TIMESTAMP":
        return datetime.fromisoformat(value)
    if column.type.startswith("DECIMAL"):
        return Decimal(value)
    return value


class EngineContract:
    """Conformance tests of the Engine seam. Not collected itself: subclass it in test_*.py."""

    @pytest.fixture
    def engine(self) -> Iterator[Engine]:
        raise NotImplementedError("an engine suite provides `engine`: open, on an empty warehouse")

    @pytest.fixture
    def ready(self, engine: Engine) -> Engine:
        engine.prepare()
        return engine

    # helpers, all through the seam ----------------------------------------------------------

    _counter = 0

    def fresh(self, prefix: str = "s") -> str:
        EngineContract._counter += 1
        return f"{prefix}_{EngineContract._counter}"

    def publish_rows(
        self,
        engine: Engine,
        rows: Sequence[Row],
        partition: PartitionKey = DAY1,
        attempt_id: str | None = None,
        table: str = "events",
        columns: Sequence[Column] = EVENT_COLUMNS,
        partition_column: str = "ts",
        key: str | None = None,
        published_at: str | None = None,
    ) -> CommitMarker:
        staging = self.fresh("pub")
        engine.stage(staging, select_rows(rows, columns), {})
        marker = marker_for(attempt_id or self.fresh("att"), partition, model=table)
        if published_at is not None:
            marker = replace(marker, published_at=published_at)
        engine.publish(
            Target(table, tuple(columns), partition_column, keyed=key is not None),
            staging,
            bound_values(partition, key),
            [marker],
        )
        return marker

    def content(self, engine: Engine, query: str, columns: Sequence[str]) -> Checksum:
        """Checksum of what `query` returns, read back through a staging copy."""
        probe = self.fresh("probe")
        engine.stage(probe, query, {})
        try:
            return engine.checksum(probe, columns)
        finally:
            engine.drop_staging(probe)

    def table_content(self, engine: Engine, table: str = "events") -> Checksum:
        names = [c.name for c in EVENT_COLUMNS]
        return self.content(engine, f'SELECT * FROM "{table}"', names)

    def rows_content(self, engine: Engine, rows: Sequence[Row]) -> Checksum:
        return self.content(engine, select_rows(rows), [c.name for c in EVENT_COLUMNS])

    def measure(self, engine: Engine, staging: str, kind: str, **params: Any) -> int:
        return engine.measure(CheckSpec(kind, kind, Severity.BLOCKING, params), staging, {})

    # prepare, version, capabilities ------------------------------------------------------------

    def test_describes_itself(self, engine: Engine) -> None:
        assert isinstance(engine.name, str) and engine.name
        assert isinstance(engine.version(), str) and engine.version()
        assert isinstance(engine.capabilities.transactional_publish, bool)
        assert isinstance(engine.capabilities.single_writer_process, bool)

    def test_prepare_is_idempotent(self, engine: Engine) -> None:
        engine.prepare()
        engine.prepare()
        assert engine.staging_tables() == []
        assert engine.markers(["att-1"]) == {}
        marker = self.publish_rows(engine, DAY1_ROWS)
        engine.prepare()
        assert engine.markers([marker.attempt_id]) == {marker.attempt_id: marker}
        assert self.table_content(engine) == self.rows_content(engine, DAY1_ROWS)

    def test_a_missing_table_has_no_columns(self, ready: Engine) -> None:
        assert ready.table_columns("no_such_table") is None

    # stage -------------------------------------------------------------------------------------

    def test_stage_and_staging_columns(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage(
            staging,
            "SELECT CAST(1 AS BIGINT) AS id, CAST(2.5 AS DECIMAL(18, 2)) AS amount, "
            "CAST(NULL AS VARCHAR) AS note, CAST('2025-01-01' AS DATE) AS d, "
            "CAST(0.5 AS DOUBLE) AS ratio "
            # typed in both branches: PostgreSQL drops a DECIMAL's precision from a UNION whose
            # branches do not all carry it (DuckDB widens to the larger one)
            "UNION ALL SELECT 2, CAST(3.75 AS DECIMAL(18, 2)), 'x', "
            "CAST('2025-01-02' AS DATE), 1.5",
            {},
        )
        assert ready.staging_tables() == [staging]
        assert ready.staging_columns(staging) == [
            Column("id", "BIGINT", False),
            Column("amount", "DECIMAL(18, 2)", False),
            Column("note", TEXT, True),
            Column("d", "DATE", False),
            Column("ratio", "DOUBLE", False),
        ]
        assert self.measure(ready, staging, "row_count") == 2

    def test_staging_columns_of_an_empty_table(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage(staging, select_rows([]), {})
        assert [(c.name, c.type) for c in ready.staging_columns(staging)] == [
            (c.name, c.type) for c in EVENT_COLUMNS
        ]
        assert self.measure(ready, staging, "row_count") == 0

    def test_an_untyped_null_column_is_an_engine_matter(self, ready: Engine) -> None:
        """A column that is only a bare NULL: reported, or an EngineError; never a crash."""
        staging = self.fresh()
        ready.stage(staging, "SELECT CAST(1 AS BIGINT) AS id, NULL AS note", {})
        try:
            columns = ready.staging_columns(staging)
        except TidegateError:
            return
        assert [c.name for c in columns] == ["id", "note"]
        assert columns[1].nullable

    def test_stage_binds_the_partition_bounds(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        staging = self.fresh()
        ready.stage(
            staging,
            'SELECT * FROM "events" WHERE ts >= $start AND ts < $end',
            bound_values(DAY2),
        )
        assert self.measure(ready, staging, "row_count") == len(DAY2_ROWS)
        names = [c.name for c in EVENT_COLUMNS]
        assert ready.checksum(staging, names) == self.rows_content(ready, DAY2_ROWS)

    def test_stage_binds_a_key(self, ready: Engine) -> None:
        staging = self.fresh()
        hostile = "x'); DROP TABLE events; --"
        self.publish_rows(ready, DAY1_ROWS)
        ready.stage(staging, "SELECT CAST($key AS VARCHAR) AS region", {"key": hostile})
        assert (
            self.measure(ready, staging, "accepted_values", column="region", values=[hostile]) == 0
        )
        assert self.measure(ready, staging, "row_count") == 1
        assert self.table_content(ready) == self.rows_content(ready, DAY1_ROWS)

    def test_a_failed_stage_leaves_no_staging_table(self, ready: Engine) -> None:
        with pytest.raises(EngineError):
            ready.stage(self.fresh(), "SELECT * FROM no_such_table", {})
        with pytest.raises(EngineError):
            ready.stage(self.fresh(), "SELECT CAST('abc' AS BIGINT) AS n", {})
        assert ready.staging_tables() == []

    # Arrow rows in and out (Python and command models) ----------------------------------------

    @staticmethod
    def arrow_rows(rows: Sequence[Row]) -> Any:
        import pyarrow as pa

        from tidegate.engines.arrow_types import arrow_type

        columns = list(zip(*rows, strict=True)) if rows else [() for _ in EVENT_COLUMNS]
        return pa.table(
            {
                c.name: pa.array(
                    [_typed(c, v) for v in values],
                    type=arrow_type(c.type),
                )
                for c, values in zip(EVENT_COLUMNS, columns, strict=True)
            }
        )

    def test_stage_arrow_holds_the_rows_and_their_types(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage_arrow(staging, self.arrow_rows(DAY1_ROWS))
        names = [c.name for c in EVENT_COLUMNS]
        assert ready.checksum(staging, names) == self.rows_content(ready, DAY1_ROWS)
        assert [(c.name, c.type) for c in ready.staging_columns(staging)] == [
            (c.name, c.type) for c in EVENT_COLUMNS
        ]
        assert ready.staging_tables() == [staging]

    def test_stage_arrow_reads_a_reader_batch_by_batch(self, ready: Engine) -> None:
        import pyarrow as pa

        table = self.arrow_rows([*DAY1_ROWS, *DAY2_ROWS])
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2))
        staging = self.fresh()
        ready.stage_arrow(staging, reader)
        names = [c.name for c in EVENT_COLUMNS]
        assert ready.checksum(staging, names) == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])

    def test_stage_arrow_of_no_rows(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage_arrow(staging, self.arrow_rows([]))
        assert self.measure(ready, staging, "row_count") == 0
        assert [c.name for c in ready.staging_columns(staging)] == [c.name for c in EVENT_COLUMNS]

    def test_a_failed_stage_arrow_leaves_no_staging_table(self, ready: Engine) -> None:
        import pyarrow as pa

        table = self.arrow_rows(DAY1_ROWS)

        def batches() -> Iterator[Any]:
            yield from table.to_batches(max_chunksize=1)
            raise pa.ArrowInvalid("the job's file ends midway")

        reader = pa.RecordBatchReader.from_batches(table.schema, batches())
        with pytest.raises((EngineError, pa.ArrowInvalid)):
            ready.stage_arrow(self.fresh(), reader)
        assert ready.staging_tables() == []

    def test_read_arrow_reads_the_window_with_bound_values(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        window = ready.read_arrow("events", "ts", bound_values(DAY2))
        assert sorted(window.column("id").to_pylist()) == [4, 5]
        assert window.schema.names == [c.name for c in EVENT_COLUMNS]
        whole = ready.read_arrow("events", None, bound_values(DAY2))
        assert sorted(whole.column("id").to_pylist()) == [1, 2, 3, 4, 5]
        staging = self.fresh()
        ready.stage_arrow(staging, window)
        names = [c.name for c in EVENT_COLUMNS]
        assert ready.checksum(staging, names) == self.rows_content(ready, DAY2_ROWS)

    # measure -----------------------------------------------------------------------------------

    MEASURED_ROWS = (
        # id, ts, status, region, a, b
        (1, "2025-01-01 00:00:00", "ok", "eu", 1, 2),
        (1, "2025-01-01 01:00:00", "ok", "eu", 3, 3),
        (2, "2025-01-01 23:59:59", "late", "eu", 5, 4),
        (3, "2025-01-02 00:00:00", None, "us", None, 1),
        (None, "2024-12-31 23:59:59", "bogus", None, 1, 1),
        (None, None, "ok", "eu", 0, 0),
        (4, "2025-01-01 10:00:00", "late", "eu", 2, 9),
        (4, "2025-01-01 11:00:00", "late", "eu", 2, 9),
    )
    MEASURED_COLUMNS = (
        Column("id", "BIGINT"),
        Column("ts", "TIMESTAMP"),
        Column("status", TEXT),
        Column("region", TEXT),
        Column("a", "BIGINT"),
        Column("b", "BIGINT"),
    )

    @pytest.mark.parametrize(
        ("kind", "params", "bounds", "expected"),
        [
            ("row_count", {}, {}, 8),
            ("not_null", {"columns": ["status"]}, {}, 1),
            ("not_null", {"columns": ["id", "status"]}, {}, 3),
            # keys repeated: id 1 and id 4; NULL ids are not keys
            ("unique", {"columns": ["id"]}, {}, 2),
            ("unique", {"columns": ["id", "status"]}, {}, 2),
            ("unique", {"columns": ["ts"]}, {}, 0),
            # NULL is not judged by accepted_values (not_null is for that)
            ("accepted_values", {"column": "status", "values": ["ok", "late"]}, {}, 1),
            ("accepted_values", {"column": "status", "values": ["ok"]}, {}, 4),
            ("accepted_values", {"column": "id", "values": [1, 2, 3, 4]}, {}, 0),
            # a NULL outcome counts as a violation
            ("expression", {"expression": "a <= b"}, {}, 2),
            ("expression", {"expression": "a IS NOT NULL OR b = 1"}, {}, 0),
            # outside [start, end) or NULL
            ("partition_bounds", {"column": "ts", "keyed": False}, "DAY1", 3),
            ("partition_bounds", {"column": "region", "keyed": True}, {"key": "eu"}, 2),
            ("partition_bounds", {"column": "region", "keyed": True}, {"key": "us"}, 7),
            # NULLs (null_ratio is judged from this and the row count)
            ("null_ratio", {"column": "status"}, {}, 1),
            ("null_ratio", {"column": "ts"}, {}, 1),
            ("null_ratio", {"column": "b"}, {}, 0),
            # distinct non-NULL values; a tuple with a NULL part is not counted
            ("distinct_count", {"columns": ["status"]}, {}, 3),
            ("distinct_count", {"columns": ["region", "status"]}, {}, 2),
            ("distinct_count", {"columns": ["id", "region"]}, {}, 4),
            # the newest value, in whole epoch seconds (2025-01-02 00:00:00 UTC)
            ("freshness", {"column": "ts", "max_age": "1h"}, {}, 1735776000),
        ],
    )
    def test_measure(
        self,
        ready: Engine,
        kind: str,
        params: dict[str, Any],
        bounds: Mapping[str, Any] | str,
        expected: int,
    ) -> None:
        staging = self.fresh()
        ready.stage(staging, select_rows(self.MEASURED_ROWS, self.MEASURED_COLUMNS), {})
        bound = bound_values(DAY1) if bounds == "DAY1" else bounds
        assert isinstance(bound, Mapping)
        check = CheckSpec(f"{kind}_check", kind, Severity.BLOCKING, params)
        assert ready.measure(check, staging, bound) == expected

    def test_a_key_held_by_three_rows_is_one_repeated_key(self, ready: Engine) -> None:
        rows = [(7, f"2025-01-01 0{h}:00:00", "ok", "eu", h, h) for h in range(3)]
        rows.append((8, "2025-01-01 05:00:00", "ok", "eu", 1, 1))
        staging = self.fresh()
        ready.stage(staging, select_rows(rows, self.MEASURED_COLUMNS), {})
        check = CheckSpec("id_once", "unique", Severity.BLOCKING, {"columns": ["id"]})
        assert ready.measure(check, staging, {}) == 1
        names = [c.name for c in self.MEASURED_COLUMNS]
        [profile] = ready.profile(staging, True, "ts", "day", None, names, [check]).values()
        assert profile.measured == (1,)

    PROFILED_CHECKS = (
        CheckSpec("rows", "row_count", Severity.BLOCKING, {}),
        CheckSpec("status_set", "not_null", Severity.BLOCKING, {"columns": ["status"]}),
        CheckSpec("id_once", "unique", Severity.BLOCKING, {"columns": ["id"]}),
        CheckSpec("id_status_once", "unique", Severity.WARN, {"columns": ["id", "status"]}),
        CheckSpec(
            "known", "accepted_values", Severity.BLOCKING, {"column": "status", "values": ["ok"]}
        ),
        CheckSpec("ordered", "expression", Severity.BLOCKING, {"expression": "a <= b"}),
        CheckSpec("status_nulls", "null_ratio", Severity.WARN, {"column": "status", "max": 0.1}),
        CheckSpec(
            "pairs",
            "distinct_count",
            Severity.BLOCKING,
            {"columns": ["region", "status"], "min": 1},
        ),
        CheckSpec("fresh", "freshness", Severity.BLOCKING, {"column": "ts", "max_age": "1h"}),
    )

    def test_one_profile_pass_measures_each_partition_like_its_rows_alone(
        self, ready: Engine
    ) -> None:
        """Per day of `ts`: the checksum, every check and the aggregates equal those of that
        day's rows staged alone. A key repeats only within a day: ids 1 and 4 twice on
        2025-01-01 count, id 3 on two different days does not."""
        rows = [*self.MEASURED_ROWS, (3, "2025-01-01 05:00:00", "ok", "eu", 1, 1)]
        names = [c.name for c in self.MEASURED_COLUMNS]
        staging = self.fresh()
        ready.stage(staging, select_rows(rows, self.MEASURED_COLUMNS), {})
        profiles = ready.profile(
            staging, True, "ts", "day", None, names, self.PROFILED_CHECKS, ["sum(a)", "count(b)"]
        )
        days: dict[int | None, list[Row]] = {}
        for row in rows:
            day = None if row[1] is None else parse_partition(row[1][:10], Grain.DAY).start
            days.setdefault(day, []).append(row)
        assert set(profiles) == set(days)
        for day, alone in days.items():
            part = self.fresh()
            ready.stage(part, select_rows(alone, self.MEASURED_COLUMNS), {})
            found = profiles[day]
            assert found.checksum == ready.checksum(part, names), day
            expected = tuple(ready.measure(c, part, {}) for c in self.PROFILED_CHECKS)
            assert found.measured == expected, day
            total = (
                sum(r[4] for r in alone if r[4] is not None)
                if any(r[4] is not None for r in alone)
                else None
            )
            assert found.values == (
                None if total is None else str(total),
                str(sum(1 for r in alone if r[5] is not None)),
            ), day
        # the day with two repeated ids really has them (the test can fail), and the values of
        # the other kinds differ from day to day
        first_day = parse_partition("2025-01-01", Grain.DAY).start
        second_day = parse_partition("2025-01-02", Grain.DAY).start
        assert profiles[first_day].measured[2] == 2
        assert profiles[first_day].measured[-3:] == (0, 2, 1735775999)
        assert profiles[second_day].measured[-3:] == (1, 0, 1735776000)
        assert profiles[None].measured[-1] is None

    def test_a_check_measured_on_no_rows(self, ready: Engine) -> None:
        """An empty table: no NULLs, no distinct values, and no newest value at all."""
        staging = self.fresh()
        ready.stage(staging, select_rows([]), {})
        assert self.measure(ready, staging, "null_ratio", column="kind") == 0
        assert self.measure(ready, staging, "distinct_count", columns=["kind"]) == 0
        assert self.measure(ready, staging, "freshness", column="ts", max_age="1h") is None

    # query checks ------------------------------------------------------------------------------

    QUERY_ROWS = (
        # id, ts, status, region, a, b
        (1, "2025-01-01 00:00:00", "ok", "eu", 1, 2),
        (2, "2025-01-01 05:00:00", "late", "eu", 5, 4),
        (3, "2025-01-01 23:59:59", "late", "us", 9, 1),
        (4, "2025-01-02 00:00:00", "ok", "us", 7, 1),
        (5, "2025-01-02 10:00:00", "ok", "eu", 1, 1),
        (6, None, "late", "eu", 3, 2),
    )

    def query_check(self, sql: str) -> CheckSpec:
        return CheckSpec("q", "query", Severity.BLOCKING, {"sql": sql})

    @pytest.mark.parametrize(
        ("sql", "tables"),
        [
            ("SELECT * FROM this WHERE a > b", {}),
            ("SELECT t.ts, t.id FROM this AS t WHERE t.status = 'late'", {}),
            # `ref` names a published table: only ids 1 and 4 are in it
            (
                "SELECT this.ts FROM this JOIN ref AS r ON r.id = this.id "
                "UNION ALL SELECT ts FROM this WHERE a = b",
                {"ref": "events"},
            ),
        ],
    )
    def test_a_query_check_counts_each_partition_like_its_rows_alone(
        self, ready: Engine, sql: str, tables: dict[str, str]
    ) -> None:
        self.publish_rows(ready, [DAY1_ROWS[0], (4, "2025-01-01 01:00:00", "x", "1.00")], DAY1)
        staging = self.fresh()
        ready.stage(staging, select_rows(self.QUERY_ROWS, self.MEASURED_COLUMNS), {})
        check = self.query_check(sql)
        per_day = ready.measure_query(check, staging, tables, "ts", "day")
        days: dict[int | None, list[Row]] = {}
        for row in self.QUERY_ROWS:
            day = None if row[1] is None else parse_partition(row[1][:10], Grain.DAY).start
            days.setdefault(day, []).append(row)
        alone: dict[int | None, int] = {}
        for day, rows in days.items():
            part = self.fresh()
            ready.stage(part, select_rows(rows, self.MEASURED_COLUMNS), {})
            alone[day] = ready.measure_query(check, part, tables, "ts", None)[None]
        assert per_day == {day: n for day, n in alone.items() if n}
        # the query really found rows, on more than one day (the test can fail)
        assert len(per_day) >= 2
        assert (
            sum(per_day.values()) == ready.measure_query(check, staging, tables, "ts", None)[None]
        )

    def test_a_query_check_names_are_identifiers_not_text(self, ready: Engine) -> None:
        """A mapped table name is quoted as one identifier: a hostile one names a table that
        does not exist, and nothing else runs."""
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        staging = self.fresh()
        ready.stage(staging, select_rows(self.QUERY_ROWS, self.MEASURED_COLUMNS), {})
        check = self.query_check("SELECT ts FROM this WHERE id IN (SELECT id FROM other)")
        hostile = {"other": 'events"; DROP TABLE events; --'}
        with pytest.raises(EngineError):
            ready.measure_query(check, staging, hostile, "ts", None)
        assert self.table_content(ready) == self.rows_content(ready, DAY1_ROWS)

    def test_measure_of_a_broken_expression_is_an_engine_error(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage(staging, select_rows(DAY1_ROWS), {})
        with pytest.raises(EngineError):
            self.measure(ready, staging, "expression", expression="no_such_column > 0")

    # checksum ----------------------------------------------------------------------------------

    def staged_checksum(self, engine: Engine, rows: Sequence[Row], order: str = "") -> Checksum:
        staging = self.fresh()
        engine.stage(staging, f"SELECT * FROM ({select_rows(rows)}) AS r {order}", {})
        return engine.checksum(staging, [c.name for c in EVENT_COLUMNS])

    def test_checksum_ignores_row_order(self, ready: Engine) -> None:
        rows = [*DAY1_ROWS, *DAY2_ROWS]
        forward = self.staged_checksum(ready, rows, "ORDER BY id")
        backward = self.staged_checksum(ready, list(reversed(rows)), "ORDER BY id DESC")
        shuffled = self.staged_checksum(ready, [rows[i] for i in (3, 0, 4, 2, 1)])
        assert forward == backward == shuffled
        assert forward.rows == len(rows)

    def test_checksum_is_equal_for_equal_content(self, ready: Engine) -> None:
        assert self.staged_checksum(ready, DAY1_ROWS) == self.staged_checksum(ready, DAY1_ROWS)
        assert self.staged_checksum(ready, []) == Checksum(0, 0)

    def test_checksum_sees_any_changed_value(self, ready: Engine) -> None:
        base = self.staged_checksum(ready, DAY1_ROWS)
        variants = [
            [(1, "2025-01-01 00:00:00", "a", "1.51"), *DAY1_ROWS[1:]],
            [(1, "2025-01-01 00:00:01", "a", "1.50"), *DAY1_ROWS[1:]],
            [(1, "2025-01-01 00:00:00", "A", "1.50"), *DAY1_ROWS[1:]],
            [(1, "2025-01-01 00:00:00", "", "1.50"), *DAY1_ROWS[1:]],
            [(1, "2025-01-01 00:00:00", None, "1.50"), *DAY1_ROWS[1:]],
            DAY1_ROWS[:2],
        ]
        found = {self.staged_checksum(ready, rows) for rows in variants}
        assert base not in found
        assert len(found) == len(variants)

    def test_checksum_sees_duplicated_rows(self, ready: Engine) -> None:
        r1, r2, r3 = DAY1_ROWS
        t1 = self.staged_checksum(ready, [r1])
        t2 = self.staged_checksum(ready, [r1, r2, r2])
        t3 = self.staged_checksum(ready, [r1, r3, r3])
        # an XOR of row hashes gives T1 == T2 == T3: the duplicated pairs cancel
        assert t1 != t2
        assert t2.rows == t3.rows == 3
        assert t2 != t3
        assert self.staged_checksum(ready, [r1, r2]) != t2

    def test_checksum_covers_only_the_named_columns(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage(staging, select_rows(DAY1_ROWS), {})
        other = self.fresh()
        changed = [(i, ts, kind, "99.99") for i, ts, kind, _ in DAY1_ROWS]
        ready.stage(other, select_rows(changed), {})
        assert ready.checksum(staging, ["id", "ts", "kind"]) == ready.checksum(
            other, ["id", "ts", "kind"]
        )
        assert ready.checksum(staging, ["id", "amount"]) != ready.checksum(other, ["id", "amount"])

    # publish -----------------------------------------------------------------------------------

    def test_publish_creates_the_table_writes_a_marker_and_drops_staging(
        self, ready: Engine
    ) -> None:
        marker = self.publish_rows(ready, DAY1_ROWS, DAY1, attempt_id="att-first")
        assert ready.table_columns("events") == list(EVENT_COLUMNS)
        assert self.table_content(ready) == self.rows_content(ready, DAY1_ROWS)
        assert ready.markers(["att-first"]) == {"att-first": marker}
        assert ready.staging_tables() == []

    def test_publish_into_another_schema_leaves_the_default_one_alone(self, ready: Engine) -> None:
        """A version under validation writes a shadow table: readers of the published table
        (default schema, same name) see nothing of it."""
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        staging = self.fresh("shadow")
        ready.stage(staging, select_rows(DAY2_ROWS), {})
        ready.publish(
            Target("events", EVENT_COLUMNS, "ts", False, schema="_shadow"),
            staging,
            bound_values(DAY2),
            [],
        )
        assert ready.table_columns("events", "_shadow") == list(EVENT_COLUMNS)
        assert self.table_content(ready) == self.rows_content(ready, DAY1_ROWS)
        shadow = self.content(
            ready, 'SELECT * FROM "_shadow"."events"', [c.name for c in EVENT_COLUMNS]
        )
        assert shadow == self.rows_content(ready, DAY2_ROWS)

    def test_publish_replaces_only_its_partition(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        assert self.table_content(ready) == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])
        replacement = [(9, "2025-01-01 06:00:00", "z", "0.01")]
        self.publish_rows(ready, replacement, DAY1)
        assert self.table_content(ready) == self.rows_content(ready, [*replacement, *DAY2_ROWS])
        # publishing the same rows again is idempotent
        self.publish_rows(ready, replacement, DAY1)
        assert self.table_content(ready) == self.rows_content(ready, [*replacement, *DAY2_ROWS])
        # an empty partition is a valid publish: it removes the partition's rows
        self.publish_rows(ready, [], DAY2)
        assert self.table_content(ready) == self.rows_content(ready, replacement)

    def test_publish_replaces_only_its_key(self, ready: Engine) -> None:
        columns = (Column("region", TEXT, False), Column("n", "BIGINT", False))
        eu = PartitionKey(Grain.KEY, 0, 1)
        us = PartitionKey(Grain.KEY, 1, 2)
        hostile = PartitionKey(Grain.KEY, 2, 3)
        evil = "x'); DROP TABLE regions; --"

        def publish(rows: list[Row], key: PartitionKey, label: str) -> None:
            self.publish_rows(ready, rows, key, None, "regions", columns, "region", label)

        publish([("eu", 1), ("eu", 2)], eu, "eu")
        publish([("us", 3)], us, "us")
        publish([(evil, 4)], hostile, evil)
        publish([("eu", 5)], eu, "eu")
        read = self.content(ready, 'SELECT * FROM "regions"', ["region", "n"])
        expected = self.content(
            ready, select_rows([("eu", 5), ("us", 3), (evil, 4)], columns), ["region", "n"]
        )
        assert read == expected

    def test_a_whole_table_publish_replaces_every_row(self, ready: Engine) -> None:
        """Grain "table": no partition column, one partition, and its publish (overwrite or
        merge) reads and writes the table whole, its marker in the same transaction."""
        names = [c.name for c in EVENT_COLUMNS]

        def publish(
            rows: Sequence[Row], mode: WriteMode = WriteMode.OVERWRITE, attempt: str | None = None
        ) -> tuple[CommitMarker, dict[int, Checksum]]:
            staging = self.fresh("whole")
            ready.stage(staging, select_rows(rows), {})
            target = Target(
                "summary",
                EVENT_COLUMNS,
                "",
                True,
                write_mode=mode,
                unique_key=("id",) if mode is WriteMode.MERGE else (),
            )
            marker = marker_for(attempt or self.fresh("att"), WHOLE_TABLE, model="summary")
            return marker, ready.publish(target, staging, bound_values(WHOLE_TABLE), [marker])

        def whole() -> Checksum:
            return self.table_content(ready, "summary")

        first, _ = publish([*DAY1_ROWS, *DAY2_ROWS], attempt="att-whole")
        assert whole() == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])
        assert ready.markers(["att-whole"]) == {"att-whole": first}
        assert (first.partition_start, first.partition_end, first.grain) == (0, 1, "table")
        # verify measures the table as its one partition, over the columns it names
        profiles = ready.profile("summary", False, "", "table", window_bounds(0, 1), names)
        assert {k: p.checksum for k, p in profiles.items()} == {0: whole()}
        sums = ["count(*)", "sum(amount)"]
        found, values = ready.key_fingerprint("summary", "", bound_values(WHOLE_TABLE), sums)
        assert found == whole()
        assert [Decimal(str(v)) for v in values] == [5, Decimal("10.65")]

        publish(DAY2_ROWS)
        assert whole() == self.rows_content(ready, DAY2_ROWS)
        changed = [(5, "2025-01-02 08:00:00", "c", "-3.11"), DAY1_ROWS[0]]
        _, content = publish(changed, WriteMode.MERGE)
        merged = [DAY2_ROWS[0], *changed]
        assert whole() == self.rows_content(ready, merged)
        assert content == {WHOLE_TABLE.start: whole()}

        # a publish that fails leaves every row
        staging = self.fresh("whole")
        ready.stage(staging, select_rows(DAY1_ROWS), {})
        broken = replace(marker_for("att-broken", WHOLE_TABLE, model="summary"), run_id=None)
        with pytest.raises(EngineError):
            ready.publish(
                Target("summary", EVENT_COLUMNS, "", True),
                staging,
                bound_values(WHOLE_TABLE),
                [broken],
            )
        assert whole() == self.rows_content(ready, merged)
        assert ready.markers(["att-broken"]) == {}
        # an empty publish empties it
        publish([])
        assert whole() == Checksum(0, 0)
        assert len(ready.markers_of("summary")) == 4

    def test_publish_adds_new_nullable_columns(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        wider = (*EVENT_COLUMNS, Column("note", TEXT, True))
        self.publish_rows(ready, [(*DAY2_ROWS[0], "new")], DAY2, columns=wider)
        assert ready.table_columns("events") == list(wider)
        old_rows = self.content(
            ready, 'SELECT * FROM "events" WHERE note IS NULL', [c.name for c in EVENT_COLUMNS]
        )
        assert old_rows == self.rows_content(ready, DAY1_ROWS)

    def assert_nothing_changed(self, engine: Engine, before: Checksum, attempt_id: str) -> None:
        assert self.table_content(engine) == before
        assert engine.markers([attempt_id]) == {}

    def test_a_publish_whose_marker_fails_changes_nothing(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        before = self.table_content(ready)
        staging = self.fresh()
        ready.stage(staging, select_rows([(9, "2025-01-01 06:00:00", "z", "0.01")]), {})
        broken = marker_for("att-broken", DAY1)
        broken = CommitMarker(**{**broken.__dict__, "run_id": None})
        with pytest.raises(EngineError):
            ready.publish(
                Target("events", EVENT_COLUMNS, "ts", False), staging, bound_values(DAY1), [broken]
            )
        self.assert_nothing_changed(ready, before, "att-broken")
        # the engine is still usable afterwards
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        assert self.table_content(ready) == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])

    def test_a_publish_with_an_incompatible_type_changes_nothing(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        before = self.table_content(ready)
        staging = self.fresh()
        ready.stage(
            staging,
            "SELECT 'not a number' AS id, CAST('2025-01-01 01:00:00' AS TIMESTAMP) AS ts, "
            "'x' AS kind, CAST(1 AS DECIMAL(18, 2)) AS amount",
            {},
        )
        with pytest.raises(EngineError):
            ready.publish(
                Target("events", EVENT_COLUMNS, "ts", False),
                staging,
                bound_values(DAY1),
                [marker_for("att-bad-type", DAY1)],
            )
        self.assert_nothing_changed(ready, before, "att-bad-type")

    def test_one_attempt_can_never_publish_twice(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1, attempt_id="att-once")
        before = self.table_content(ready)
        staging = self.fresh()
        ready.stage(staging, select_rows([(9, "2025-01-01 06:00:00", "z", "0.01")]), {})
        with pytest.raises(EngineError):
            ready.publish(
                Target("events", EVENT_COLUMNS, "ts", False),
                staging,
                bound_values(DAY1),
                [marker_for("att-once", DAY1)],
            )
        assert self.table_content(ready) == before
        assert list(ready.markers(["att-once"])) == ["att-once"]

    def fenced_publish(self, engine: Engine, attempt_id: str, fence: Fence) -> None:
        staging = self.fresh()
        engine.stage(staging, select_rows(DAY2_ROWS), {})
        engine.publish(
            Target("events", EVENT_COLUMNS, "ts", False),
            staging,
            bound_values(DAY2),
            [marker_for(attempt_id, DAY2)],
            fence,
        )

    def test_a_publish_with_a_stale_fencing_token_changes_nothing(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        before = self.table_content(ready)
        for token in (1, 3, 2):  # a fence is raised, never lowered
            ready.raise_fence(Fence(("events/1", "events/2"), token))
        ready.raise_fence(Fence(("events/2",), 4))
        stale = (
            Fence(("events/1",), 2),  # older
            Fence(("events/3",), 3),  # never raised
            Fence(("events/1", "events/2"), 3),  # one of its partitions was taken since
        )
        for fence in stale:
            with pytest.raises(FencedError):
                self.fenced_publish(ready, "att-stale", fence)
            self.assert_nothing_changed(ready, before, "att-stale")
        self.fenced_publish(ready, "att-current", Fence(("events/1",), 3))
        assert list(ready.markers(["att-current"])) == ["att-current"]
        assert self.table_content(ready) == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])

    def test_a_failed_first_publish_creates_no_table(self, ready: Engine) -> None:
        staging = self.fresh()
        ready.stage(staging, select_rows(DAY1_ROWS), {})
        broken = CommitMarker(**{**marker_for("att-none", DAY1).__dict__, "checksum": None})
        with pytest.raises(EngineError):
            ready.publish(
                Target("events", EVENT_COLUMNS, "ts", False), staging, bound_values(DAY1), [broken]
            )
        assert ready.table_columns("events") is None
        assert ready.markers(["att-none"]) == {}

    # write modes: merge and append ---------------------------------------------------------------

    def write(
        self,
        engine: Engine,
        rows: Sequence[Row],
        mode: WriteMode,
        key: tuple[str, ...] = ("id",),
        partitions: Sequence[PartitionKey] = (DAY1,),
        columns: Sequence[Column] = EVENT_COLUMNS,
    ) -> tuple[dict[int, Checksum], list[CommitMarker]]:
        """Publish `rows` into the window of `partitions` (consecutive days) by `mode`, one
        marker per partition; returns what publish measured and the markers as stored."""
        staging = self.fresh("wm")
        engine.stage(staging, select_rows(rows, columns), {})
        markers = [marker_for(self.fresh("att"), p) for p in partitions]
        bounds = {
            "start": bound_values(partitions[0])["start"],
            "end": bound_values(partitions[-1])["end"],
        }
        target = Target(
            "events", tuple(columns), "ts", False, write_mode=mode, unique_key=key, grain="day"
        )
        content = engine.publish(target, staging, bounds, markers)
        stored = engine.markers([m.attempt_id for m in markers])
        return content, [stored[m.attempt_id] for m in markers]

    def day_content(self, engine: Engine, day: PartitionKey) -> Checksum:
        """Checksum of the published rows of one day, read back through a staging copy."""
        probe = self.fresh("day")
        engine.stage(
            probe, 'SELECT * FROM "events" WHERE ts >= $start AND ts < $end', bound_values(day)
        )
        try:
            return engine.checksum(probe, [c.name for c in EVENT_COLUMNS])
        finally:
            engine.drop_staging(probe)

    def test_overwrite_returns_nothing_measured(self, ready: Engine) -> None:
        content, [marker] = self.write(ready, DAY1_ROWS, WriteMode.OVERWRITE)
        assert content == {}
        assert marker.checksum == "0:0"  # the checksum given (the staged one) is kept

    def test_merge_upserts_by_key_within_its_partition(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, [(1, "2025-01-02 03:00:00", "day2", "7.00")], DAY2)
        # id 2 changes, id 9 is new; id 1 and 3 are not staged: they stay. Day 2 holds an id 1
        # too: another partition, untouched.
        staged = [(2, "2025-01-01 12:30:00", "B", "20.25"), (9, "2025-01-01 09:00:00", "n", None)]
        content, [marker] = self.write(ready, staged, WriteMode.MERGE)
        expected_day1 = [DAY1_ROWS[0], DAY1_ROWS[2], *staged]
        assert self.day_content(ready, DAY1) == self.rows_content(ready, expected_day1)
        assert self.day_content(ready, DAY2) == self.rows_content(
            ready, [(1, "2025-01-02 03:00:00", "day2", "7.00")]
        )
        # what publish measured is the partition's content, and the marker carries it
        assert content == {DAY1.start: self.rows_content(ready, expected_day1)}
        assert marker.checksum == str(content[DAY1.start])
        # the same staged rows again: nothing changes, the same checksum
        before = self.table_content(ready)
        again, _ = self.write(ready, staged, WriteMode.MERGE)
        assert again == content
        assert self.table_content(ready) == before

    def test_merge_into_an_empty_partition_checksums_like_its_staged_rows(
        self, ready: Engine
    ) -> None:
        content, _ = self.write(ready, DAY1_ROWS, WriteMode.MERGE)
        assert content == {DAY1.start: self.staged_checksum(ready, DAY1_ROWS)}

    def test_merge_of_a_batch_matches_keys_per_partition(self, ready: Engine) -> None:
        """Two days in one publish: a staged key replaces the row of its own day only."""
        day1_old = (1, "2025-01-01 01:00:00", "old", "1.00")
        day2_old = (1, "2025-01-02 01:00:00", "old", "2.00")
        self.publish_rows(ready, [day1_old], DAY1)
        self.publish_rows(ready, [day2_old], DAY2)
        day2_new = (1, "2025-01-02 05:00:00", "new", "3.00")
        content, markers = self.write(ready, [day2_new], WriteMode.MERGE, partitions=(DAY1, DAY2))
        assert self.table_content(ready) == self.rows_content(ready, [day1_old, day2_new])
        assert content == {
            DAY1.start: self.rows_content(ready, [day1_old]),
            DAY2.start: self.rows_content(ready, [day2_new]),
        }
        assert [m.checksum for m in markers] == [str(content[DAY1.start]), str(content[DAY2.start])]

    def test_merge_by_a_key_list_partition(self, ready: Engine) -> None:
        columns = (
            Column("region", TEXT, False),
            Column("id", "BIGINT", False),
            Column("n", "BIGINT"),
        )
        eu, us = PartitionKey(Grain.KEY, 0, 1), PartitionKey(Grain.KEY, 1, 2)
        names = [c.name for c in columns]

        def merge(rows: list[Row], partition: PartitionKey, label: str) -> dict[int, Checksum]:
            staging = self.fresh("keyed")
            ready.stage(staging, select_rows(rows, columns), {})
            target = Target(
                "regions", columns, "region", True, write_mode=WriteMode.MERGE, unique_key=("id",)
            )
            marker = marker_for(self.fresh("att"), partition, model="regions")
            return ready.publish(target, staging, bound_values(partition, label), [marker])

        merge([("eu", 1, 10), ("eu", 2, 20)], eu, "eu")
        merge([("us", 1, 99)], us, "us")
        content = merge([("eu", 2, 21), ("eu", 3, 30)], eu, "eu")
        expected_eu = [("eu", 1, 10), ("eu", 2, 21), ("eu", 3, 30)]
        read = self.content(ready, 'SELECT * FROM "regions"', names)
        assert read == self.content(
            ready, select_rows([*expected_eu, ("us", 1, 99)], columns), names
        )
        assert content == {eu.start: self.content(ready, select_rows(expected_eu, columns), names)}

    def test_merge_adds_new_columns_and_keeps_old_rows(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        wider = (*EVENT_COLUMNS, Column("note", TEXT, True))
        staged = [(2, "2025-01-01 12:30:00", "b", "2.25", "new")]
        content, _ = self.write(ready, staged, WriteMode.MERGE, columns=wider)
        assert ready.table_columns("events") == list(wider)
        expected = [(*DAY1_ROWS[0], None), *staged, (*DAY1_ROWS[2], None)]
        names = [c.name for c in wider]
        assert content == {DAY1.start: self.content(ready, select_rows(expected, wider), names)}
        assert self.content(ready, 'SELECT * FROM "events"', names) == content[DAY1.start]

    def test_append_with_a_key_skips_the_keys_already_there(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        # id 1 is there (its published row stays as it is), id 7 is new
        staged = [
            (1, "2025-01-01 00:00:00", "changed", "9.99"),
            (7, "2025-01-01 07:00:00", "g", "7.00"),
        ]
        content, [marker] = self.write(ready, staged, WriteMode.APPEND)
        expected = [*DAY1_ROWS, staged[1]]
        assert self.table_content(ready) == self.rows_content(ready, expected)
        assert content == {DAY1.start: self.rows_content(ready, expected)}
        assert marker.checksum == str(content[DAY1.start])
        again, _ = self.write(ready, staged, WriteMode.APPEND)
        assert again == content
        assert self.table_content(ready) == self.rows_content(ready, expected)

    def test_append_without_a_key_publishes_a_partition_once(self, ready: Engine) -> None:
        content, _ = self.write(ready, DAY1_ROWS, WriteMode.APPEND, key=())
        assert content == {DAY1.start: self.rows_content(ready, DAY1_ROWS)}
        # another partition is fine
        self.write(ready, DAY2_ROWS, WriteMode.APPEND, key=(), partitions=(DAY2,))
        before = self.table_content(ready)
        assert before == self.rows_content(ready, [*DAY1_ROWS, *DAY2_ROWS])
        staging = self.fresh()
        ready.stage(staging, select_rows(DAY1_ROWS[:1]), {})
        target = Target(
            "events", EVENT_COLUMNS, "ts", False, write_mode=WriteMode.APPEND, grain="day"
        )
        with pytest.raises(EngineError, match="duplicate"):
            ready.publish(target, staging, bound_values(DAY1), [marker_for("att-again", DAY1)])
        self.assert_nothing_changed(ready, before, "att-again")

    # markers -----------------------------------------------------------------------------------

    def test_markers_returns_only_existing_ones(self, ready: Engine) -> None:
        assert ready.markers([]) == {}
        wanted = [f"att-{i:05d}" for i in range(1203)]
        present = {wanted[i] for i in (0, 499, 500, 501, 999, 1000, 1202)}
        published = {}
        for attempt_id in sorted(present):
            published[attempt_id] = self.publish_rows(ready, DAY1_ROWS, DAY1, attempt_id)
        found = ready.markers(wanted)
        assert found == published
        assert ready.markers(["att-unknown", "att-00499"]) == {"att-00499": published["att-00499"]}

    def test_markers_of_lists_a_models_markers_partition_by_partition_oldest_first(
        self, engine: Engine
    ) -> None:
        assert engine.markers_of("events") == []  # nothing prepared, nothing published
        engine.prepare()
        assert engine.markers_of("events") == []
        second = self.publish_rows(engine, DAY2_ROWS, DAY2, "att-2")
        first = self.publish_rows(engine, DAY1_ROWS, DAY1, "att-1")
        # republished by a later attempt backdated with --as-of: its publish time sorts first,
        # but attempt ids (from the wall clock when each began) order a partition's markers
        later = self.publish_rows(
            engine, DAY1_ROWS[:1], DAY1, "att-9", published_at="2024-12-01T00:00:00.000000+00:00"
        )
        other = self.publish_rows(engine, DAY1_ROWS, DAY1, "att-o", table="others")
        assert engine.markers_of("events") == [first, later, second]
        assert engine.markers_of("events", DAY1.start, DAY2.start) == [first, later]
        assert engine.markers_of("events", DAY2.start, DAY2.end) == [second]
        assert engine.markers_of("others") == [other]
        assert engine.markers_of("nothing") == []

    # drop_staging ------------------------------------------------------------------------------

    def test_drop_staging(self, ready: Engine) -> None:
        first, second, third = self.fresh(), self.fresh(), self.fresh()
        for name in (first, second, third):
            ready.stage(name, select_rows(DAY1_ROWS), {})
        assert ready.staging_tables() == sorted([first, second, third])
        assert ready.drop_staging(first) == 1
        assert ready.staging_tables() == sorted([second, third])
        ready.drop_staging(first)  # idempotent
        assert ready.drop_staging() == 2
        assert ready.staging_tables() == []
        assert ready.drop_staging() == 0

    def test_drop_staging_never_touches_published_tables(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        ready.drop_staging("events")
        ready.drop_staging()
        assert self.table_content(ready) == self.rows_content(ready, DAY1_ROWS)

    # source_fingerprint ------------------------------------------------------------------------

    def test_source_fingerprint_follows_only_its_window(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        day1 = ready.source_fingerprint("events", "ts", bound_values(DAY1))
        day2 = ready.source_fingerprint("events", "ts", bound_values(DAY2))
        assert day1.rows == len(DAY1_ROWS)
        assert day2.rows == len(DAY2_ROWS)
        assert ready.source_fingerprint("events", "ts", bound_values(DAY1)) == day1

        # a row outside the window changes: the window's fingerprint does not
        self.publish_rows(ready, [(4, "2025-01-02 00:00:00", "a", "10.01"), DAY2_ROWS[1]], DAY2)
        assert ready.source_fingerprint("events", "ts", bound_values(DAY1)) == day1
        assert ready.source_fingerprint("events", "ts", bound_values(DAY2)) != day2

        # a row inside the window changes: it does
        self.publish_rows(ready, [*DAY1_ROWS[:2], (3, "2025-01-01 23:59:59", "c", None)], DAY1)
        assert ready.source_fingerprint("events", "ts", bound_values(DAY1)) != day1

    def test_key_fingerprint_follows_only_the_rows_holding_the_key(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS, DAY2)
        sums = ["count(*)", "sum(amount)"]
        key_a, values = ready.key_fingerprint("events", "kind", {"key": "a"}, sums)
        # rows 1 (1.50) and 4 (10.00) hold "a"
        assert key_a.rows == 2
        assert [None if v is None else Decimal(v) for v in values] == [2, Decimal("11.50")]
        key_b, _ = ready.key_fingerprint("events", "kind", {"key": "b"})
        assert key_b.rows == 1
        assert ready.key_fingerprint("events", "kind", {"key": "z"}, sums) == (
            Checksum(0, 0),
            ["0", None],
        )
        # a row holding another key changes: the key's fingerprint does not
        self.publish_rows(ready, [DAY2_ROWS[0], (5, "2025-01-02 08:00:00", "c", "-3.11")], DAY2)
        assert ready.key_fingerprint("events", "kind", {"key": "a"})[0] == key_a
        # one of its own rows changes: it does
        self.publish_rows(ready, [(4, "2025-01-02 00:00:00", "a", "10.01"), DAY2_ROWS[1]], DAY2)
        assert ready.key_fingerprint("events", "kind", {"key": "a"})[0] != key_a

    def test_no_table_the_warehouse_lacks_is_frozen(self, ready: Engine) -> None:
        assert not ready.frozen_while_open("no_such_table")

    def test_source_fingerprint_of_an_empty_window(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        empty = ready.source_fingerprint("events", "ts", bound_values(DAY2))
        assert empty == Checksum(0, 0)

    def test_count_in_window_counts_only_the_window(self, ready: Engine) -> None:
        self.publish_rows(ready, DAY1_ROWS, DAY1)
        self.publish_rows(ready, DAY2_ROWS[:1], DAY2)
        assert ready.count_in_window("events", "ts", bound_values(DAY1)) == len(DAY1_ROWS)
        assert ready.count_in_window("events", "ts", bound_values(DAY2)) == 1
        both = {"start": bound_values(DAY1)["start"], "end": bound_values(DAY2)["end"]}
        assert ready.count_in_window("events", "ts", both) == len(DAY1_ROWS) + 1

    # close -------------------------------------------------------------------------------------

    def test_close_is_idempotent(self, engine: Engine) -> None:
        engine.close()
        engine.close()
