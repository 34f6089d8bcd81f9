"""`tidegate diff`: two versions' outputs compared partition by partition (docs/design.md §3
Correctness check, §6 exit codes).

Every test starts from the orders example at 20 rows/day, built and deployed (v1 of every model
active). v1's output is published with `run`; v2 is built from an edited model file and its
output written into its shadow table the way `validate` writes it (stage + publish into
`_tidegate_shadow.MODEL__vN`, no marker). Expected values come from the warehouse itself (an
independent GROUP BY over `orders`), not from tidegate.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import tidegate
from tests.kit import FORCED, Result, example_project, state_dump, warehouse_rows
from tests.kit import tidegate as run_cli
from tidegate.domain.partitions import parse_range
from tidegate.engines.base import Target, window_bounds
from tidegate.engines.duckdb import DuckDBEngine
from tidegate.ops.context import Context
from tidegate.sql.statements import SHADOW_SCHEMA

DAILY = Path("models/daily_revenue.sql")
SCHEMA = json.loads((Path(tidegate.__file__).parent / "schemas" / "diff.v1.json").read_text())
NET = "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue"
ONE_MORE_ON_JAN_3 = (
    "CAST(sum(gross_amount - discount - refund) + CASE WHEN CAST(order_ts AS DATE) = "
    "DATE '2025-01-03' AND status = 'completed' THEN 1 ELSE 0 END AS DECIMAL(18, 2)) "
    "AS net_revenue"
)


# -- helpers ---------------------------------------------------------------------------------


def edit(project: Path, old: str, new: str, path: Path = DAILY) -> None:
    file = project / path
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new, 1))


def add_column(project: Path) -> None:
    """An additive change: a new nullable column, every other value computed as before."""
    edit(
        project,
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\nbig_orders = "BIGINT"\n',
    )
    edit(
        project,
        "FROM orders\n",
        ",\n    CAST(count(*) FILTER (WHERE gross_amount > 100) AS BIGINT) AS big_orders\n"
        "FROM orders\n",
    )


def build(project: Path) -> None:
    result = run_cli("build", "--project", project)
    assert result.exit_code == 0, result.stderr


def run_days(project: Path, days: str, model: str = "daily_revenue") -> None:
    result = run_cli("run", model, "--partition", days, "--project", project)
    assert result.exit_code == 0, result.stderr


def write_shadow(project: Path, ref: str, days: str, sql: str | None = None) -> None:
    """Write version `ref` of daily_revenue over `days` into its shadow table, as `validate`
    does; `sql` replaces the version's query (to plant rows it would not compute)."""
    ctx = Context(project)
    try:
        version = ctx.state.resolve_version("daily_revenue", ref)
    finally:
        ctx.close()
    assert version is not None
    spec = version.spec
    window = parse_range(days, spec.grain)
    bounds = window_bounds(window.start, window.end)
    engine = DuckDBEngine(project / "warehouse.duckdb")
    try:
        engine.prepare()
        engine.stage("diff_test_shadow", sql or version.sql, bounds)
        target = Target(
            f"daily_revenue__v{version.seq}",
            spec.columns,
            spec.partition_column,
            bool(spec.keys),
            schema=SHADOW_SCHEMA,
        )
        engine.publish(target, "diff_test_shadow", bounds, [])
    finally:
        engine.close()


def diff(project: Path, *args: str) -> Result:
    return run_cli("diff", "daily_revenue", *args, "--project", project)


def diff_doc(project: Path, *args: str, code: int) -> dict[str, Any]:
    result = diff(project, *args, "--json")
    assert result.exit_code == code, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)  # exactly one document
    errors = list(Draft202012Validator(SCHEMA).iter_errors(document))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    return document


def by_partition(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["partition"]: p for p in document["partitions"]}


def column(entry: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in entry["columns"] if c["column"] == name)


def oracle(project: Path, day: str) -> dict[str, Any]:
    """What daily_revenue must hold for a day, from an independent query over orders."""
    [(rows, net, gross, statuses)] = warehouse_rows(
        project,
        "SELECT count(DISTINCT status), sum(gross_amount - discount - refund), "
        "sum(gross_amount), list(DISTINCT status ORDER BY status) "
        "FROM orders WHERE CAST(order_ts AS DATE) = CAST(? AS DATE)",
        [day],
    )
    return {"rows": rows, "net": Decimal(net), "gross": Decimal(gross), "statuses": statuses}


@pytest.fixture
def v1_published(project: Path) -> Path:
    """v1 of daily_revenue published for 2025-01-01..2025-01-07."""
    run_days(project, "2025-01-01..2025-01-07")
    return project


# -- agreeing versions -----------------------------------------------------------------------


def test_an_additive_version_agrees_and_its_new_column_is_only_right(v1_published: Path) -> None:
    project = v1_published
    add_column(project)
    build(project)
    write_shadow(project, "v2", "2025-01-01..2025-01-07")

    document = diff_doc(project, "--left", "v1", "--right", "v2", code=0)
    assert document["agree"] is True
    assert document["columns"] == {
        "common": ["order_date", "status", "order_count", "gross_revenue", "net_revenue"],
        "only_left": [],
        "only_right": ["big_orders"],
        "retyped": [],
    }
    assert (document["left"]["seq"], document["right"]["seq"]) == (1, 2)
    assert document["unique_key"] == ["order_date", "status"]
    summary = document["summary"]
    assert (summary["partitions"], summary["compared"], summary["differing"]) == (7, 7, 0)
    assert (summary["keys_only_left"], summary["keys_only_right"], summary["keys_changed"]) == (
        0,
        0,
        0,
    )
    jan3 = by_partition(document)["2025-01-03"]
    assert jan3["state"] == "same"
    assert jan3["left"]["source"] == "published" and jan3["left"]["table"] == "daily_revenue"
    assert jan3["right"]["source"] == "shadow"
    assert jan3["right"]["table"] == "_tidegate_shadow.daily_revenue__v2"
    expected = oracle(project, "2025-01-03")
    assert jan3["left"]["rows"] == jan3["right"]["rows"] == expected["rows"]
    net = column(jan3, "net_revenue")
    assert Decimal(net["sum_left"]) == Decimal(net["sum_right"]) == expected["net"]
    assert column(jan3, "status")["sum_left"] is None  # text: only NULL counts
    assert all(c["column"] != "big_orders" for c in jan3["columns"])

    human = diff(project, "--left", "v1", "--right", "v2")
    assert human.exit_code == 0, human.stderr
    assert "big_orders" in human.stdout and "v1 and v2 agree" in human.stdout


# -- differing versions ----------------------------------------------------------------------


@pytest.fixture
def one_value_changed(v1_published: Path) -> Path:
    """v2 adds one cent-exact unit to the net revenue of completed orders on 2025-01-03."""
    project = v1_published
    assert "completed" in oracle(project, "2025-01-03")["statuses"]
    edit(project, NET, ONE_MORE_ON_JAN_3)
    build(project)
    write_shadow(project, "v2", "2025-01-01..2025-01-07")
    return project


def test_a_value_changed_on_one_day_is_that_day_and_that_key(one_value_changed: Path) -> None:
    project = one_value_changed
    document = diff_doc(project, "--left", "v1", "--right", "v2", code=1)
    assert document["agree"] is False
    partitions = by_partition(document)
    assert [label for label, p in partitions.items() if p["state"] != "same"] == ["2025-01-03"]
    jan3 = partitions["2025-01-03"]
    assert jan3["state"] == "different"
    assert jan3["left"]["rows"] == jan3["right"]["rows"]
    changed = jan3["keys"]["changed"]
    assert changed["count"] == 1
    assert changed["sample"] == [{"order_date": "2025-01-03", "status": "completed"}]
    assert changed["columns"] == {"net_revenue": 1}
    assert jan3["keys"]["only_left"]["count"] == jan3["keys"]["only_right"]["count"] == 0
    net = column(jan3, "net_revenue")
    assert net["differs"] is True
    assert Decimal(net["sum_right"]) - Decimal(net["sum_left"]) == 1
    assert Decimal(net["sum_left"]) == oracle(project, "2025-01-03")["net"]
    assert column(jan3, "gross_revenue")["differs"] is False
    assert document["summary"]["keys_changed"] == 1
    assert document["summary"]["differing"] == 1

    human = diff(project, "--left", "v1", "--right", "v2")
    assert human.exit_code == 1
    assert "2025-01-03" in human.stdout and "completed" in human.stdout
    assert "net_revenue" in human.stdout
    assert human.stderr.count("\n") == 1 and human.stderr.startswith("error: ")
    assert "Traceback" not in human.stderr


def test_a_tolerance_large_enough_accepts_the_change_and_a_small_one_does_not(
    one_value_changed: Path,
) -> None:
    project = one_value_changed
    # one unit on a net revenue of thousands: a relative change of well under 0.1%
    accepted = diff_doc(project, "--left", "v1", "--right", "v2", "--tolerance", "0.001", code=0)
    assert accepted["agree"] is True and accepted["tolerance"] == "0.001"
    jan3 = by_partition(accepted)["2025-01-03"]
    assert jan3["state"] == "same"
    net = column(jan3, "net_revenue")
    assert Decimal(net["sum_right"]) - Decimal(net["sum_left"]) == 1  # still reported
    assert jan3["keys"]["changed"]["count"] == 0

    refused = diff_doc(project, "--left", "v1", "--right", "v2", "--tolerance", "1e-7", code=1)
    assert by_partition(refused)["2025-01-03"]["state"] == "different"


def test_a_dropped_row_is_a_key_only_left(v1_published: Path) -> None:
    project = v1_published
    day = oracle(project, "2025-01-03")
    assert day["rows"] >= 2  # the day keeps rows: a day with none would be "only_left"
    dropped = day["statuses"][0]
    edit(
        project,
        "WHERE order_ts >= $start AND order_ts < $end\n",
        "WHERE order_ts >= $start AND order_ts < $end\n"
        f"    AND NOT (CAST(order_ts AS DATE) = DATE '2025-01-03' AND status = '{dropped}')\n",
    )
    build(project)
    write_shadow(project, "v2", "2025-01-01..2025-01-07")

    document = diff_doc(project, "--left", "v1", "--right", "v2", code=1)
    partitions = by_partition(document)
    assert [label for label, p in partitions.items() if p["state"] != "same"] == ["2025-01-03"]
    jan3 = partitions["2025-01-03"]
    assert jan3["right"]["rows"] == jan3["left"]["rows"] - 1
    assert jan3["keys"]["only_left"] == {
        "count": 1,
        "sample": [{"order_date": "2025-01-03", "status": dropped}],
        "columns": {},
    }
    assert jan3["keys"]["only_right"]["count"] == 0
    assert jan3["keys"]["changed"]["count"] == 0
    assert document["summary"]["keys_only_left"] == 1
    # a large tolerance does not hide a missing row: row counts and keys are exact
    tolerant = diff_doc(project, "--left", "v1", "--right", "v2", "--tolerance", "10", code=1)
    assert by_partition(tolerant)["2025-01-03"]["state"] == "different"


def test_without_a_unique_key_only_aggregates_are_compared(project: Path) -> None:
    edit(project, 'unique_key = ["order_date", "status"]\n', "")
    build(project)  # v2: no unique key
    edit(project, NET, ONE_MORE_ON_JAN_3)
    build(project)  # v3: no unique key, one value changed
    write_shadow(project, "v2", "2025-01-02..2025-01-04")
    write_shadow(project, "v3", "2025-01-02..2025-01-04")

    document = diff_doc(project, "--left", "v2", "--right", "v3", code=1)
    assert document["unique_key"] is None and document["key_note"]
    assert document["summary"]["keys_changed"] is None
    partitions = by_partition(document)
    assert list(partitions) == ["2025-01-02", "2025-01-03", "2025-01-04"]
    assert all(p["keys"] is None for p in partitions.values())
    assert {p["left"]["source"] for p in partitions.values()} == {"shadow"}
    assert [label for label, p in partitions.items() if p["state"] != "same"] == ["2025-01-03"]
    assert column(partitions["2025-01-03"], "net_revenue")["differs"] is True


# -- which rows are a version's output -------------------------------------------------------


def test_partitions_one_side_lacks_are_reported_not_compared(v1_published: Path) -> None:
    project = v1_published  # v1: 2025-01-01..2025-01-07
    add_column(project)
    build(project)
    write_shadow(project, "v2", "2025-01-06..2025-01-09")

    document = diff_doc(project, "--left", "v1", "--right", "v2", code=0)
    states = {label: p["state"] for label, p in by_partition(document).items()}
    assert states == {
        **{f"2025-01-0{d}": "only_left" for d in range(1, 6)},
        "2025-01-06": "same",
        "2025-01-07": "same",
        "2025-01-08": "only_right",
        "2025-01-09": "only_right",
    }
    assert by_partition(document)["2025-01-08"]["left"] is None
    summary = document["summary"]
    assert (summary["compared"], summary["only_left"], summary["only_right"]) == (2, 5, 2)

    ranged = diff_doc(
        project, "--left", "v1", "--right", "v2", "--partitions", "2025-01-07..2025-01-08", code=0
    )
    assert ranged["range"] == "2025-01-07..2025-01-08"
    assert {p["partition"]: p["state"] for p in ranged["partitions"]} == {
        "2025-01-07": "same",
        "2025-01-08": "only_right",
    }
    # nothing to compare is bad usage, not agreement
    nothing = diff(
        project, "--left", "v1", "--right", "v2", "--partitions", "2025-01-01..2025-01-05"
    )
    assert nothing.exit_code == 2
    assert nothing.stderr.count("\n") == 1 and "no partition with output on both" in nothing.stderr


def test_the_ledger_decides_published_rows_and_shadows_fill_the_rest(v1_published: Path) -> None:
    """After v2 is deployed and publishes two days, v1's output for those days is its shadow
    table, and v2's output is the published table even where v2's shadow holds other rows."""
    project = v1_published
    write_shadow(project, "v1", "2025-01-01..2025-01-02")
    add_column(project)  # v2 reconciles with the source, so it publishes
    build(project)
    deployed = run_cli("deploy", "daily_revenue", "--version", "v2", *FORCED, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr
    run_days(project, "2025-01-01..2025-01-03")  # published by v2 now
    # v2's shadow: 01-01..01-03 planted with wrong values (must be ignored), 01-04..01-05 true
    wrong = (
        (project / DAILY)
        .read_text()
        .split("*/", 1)[1]
        .replace(
            NET,
            "CAST(sum(gross_amount - discount - refund) + 1000 AS DECIMAL(18, 2)) AS net_revenue",
        )
    )
    write_shadow(project, "v2", "2025-01-01..2025-01-03", sql=wrong)
    write_shadow(project, "v2", "2025-01-04..2025-01-05")

    document = diff_doc(project, "--left", "v1", "--right", "v2", code=0)
    partitions = by_partition(document)
    sources = {
        label: (
            p["left"]["source"] if p["left"] else None,
            p["right"]["source"] if p["right"] else None,
        )
        for label, p in partitions.items()
    }
    assert sources == {
        "2025-01-01": ("shadow", "published"),
        "2025-01-02": ("shadow", "published"),
        # v1's published rows of 01-03 were replaced by v2 and v1 has no shadow for it
        "2025-01-03": (None, "published"),
        "2025-01-04": ("published", "shadow"),
        "2025-01-05": ("published", "shadow"),
        "2025-01-06": ("published", None),
        "2025-01-07": ("published", None),
    }
    # the planted +1000 rows are not v2's output: 01-01 and 01-02 agree
    assert partitions["2025-01-01"]["state"] == partitions["2025-01-02"]["state"] == "same"
    assert partitions["2025-01-04"]["state"] == partitions["2025-01-05"]["state"] == "same"
    assert partitions["2025-01-03"]["state"] == "only_right"
    assert document["agree"] is True
    assert document["summary"]["compared"] == 4


# -- bad usage -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("daily_revenue", "--left", "v1", "--right", "v9"), "no version 'v9'"),
        (("daily_revenue", "--left", "ffffffffffff", "--right", "v1"), "no version"),
        (("no_such_model", "--left", "v1", "--right", "v1"), "unknown model"),
        (("daily_revenue", "--left", "v1"), "--right"),
        (
            ("daily_revenue", "--left", "v1", "--right", "v1", "--partitions", "2025-13-01"),
            "2025-13-01",
        ),
        (
            ("daily_revenue", "--left", "v1", "--right", "v1", "--partitions", "2025-02..2025-03"),
            "not a day partition",
        ),
        (("daily_revenue", "--left", "v1", "--right", "v1", "--tolerance", "-1"), "tolerance"),
        (("daily_revenue", "--left", "v1", "--right", "v1", "--tolerance", "lots"), "tolerance"),
    ],
)
def test_bad_usage_exits_2_in_one_line(
    v1_published: Path, args: tuple[str, ...], message: str
) -> None:
    before = state_dump(v1_published)
    result = run_cli("diff", *args, "--project", v1_published)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert state_dump(v1_published) == before
    as_json = run_cli("diff", *args, "--json", "--project", v1_published)
    assert json.loads(as_json.stdout)["exit_code"] == 2


# -- read-only -------------------------------------------------------------------------------


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_diff_writes_nothing(one_value_changed: Path) -> None:
    project = one_value_changed
    warehouse = project / "warehouse.duckdb"
    before = (file_digest(warehouse), state_dump(project))
    assert diff(project, "--left", "v1", "--right", "v2").exit_code == 1
    assert diff(project, "--left", "v1", "--right", "v2", "--json").exit_code == 1
    assert diff(project, "--left", "v1", "--right", "v2", "--tolerance", "0.5").exit_code == 0
    assert (file_digest(warehouse), state_dump(project)) == before
    assert not warehouse.with_name("warehouse.duckdb.wal").exists()


# -- nothing but aggregates and samples reaches Python ---------------------------------------

LINES_MODEL = """/* tidegate
grain = "day"
time_column = "order_date"
start = "2025-01-01"
unique_key = ["order_id"]

[columns]
order_id = "BIGINT NOT NULL"
order_date = "DATE NOT NULL"
status = "VARCHAR NOT NULL"
gross_amount = "DECIMAL(18, 2) NOT NULL"
*/
SELECT order_id, CAST(order_ts AS DATE) AS order_date, status, gross_amount
FROM orders
WHERE order_ts >= $start AND order_ts < $end
"""


class Fetches:
    """Every result DuckDB hands to tidegate during a diff: rows per statement, list sizes."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.longest_list = 0

    def seen(self, rows: list[Any]) -> list[Any]:
        self.rows.append(len(rows))
        for row in rows:
            for value in row:
                if isinstance(value, list):
                    self.longest_list = max(self.longest_list, len(value))
        return rows


def test_only_aggregates_and_at_most_five_sample_keys_are_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example_project(tmp_path / "lines", rows_per_day=200)
    lines = project / "models" / "order_lines.sql"
    lines.write_text(LINES_MODEL)
    build(project)
    # v2 doubles every amount: all 2,000 rows of the ten days change
    lines.write_text(
        LINES_MODEL.replace(
            "status, gross_amount\n",
            "status, CAST(gross_amount * 2 AS DECIMAL(18, 2)) AS gross_amount\n",
        )
    )
    build(project)
    days = "2025-01-01..2025-01-10"
    for seq in (1, 2):
        ctx = Context(project)
        version = ctx.state.resolve_version("order_lines", f"v{seq}")
        ctx.close()
        assert version is not None
        window = parse_range(days, version.spec.grain)
        bounds = window_bounds(window.start, window.end)
        engine = DuckDBEngine(project / "warehouse.duckdb")
        try:
            engine.prepare()
            engine.stage("lines", version.sql, bounds)
            target = Target(
                f"order_lines__v{seq}", version.spec.columns, "order_date", False, SHADOW_SCHEMA
            )
            engine.publish(target, "lines", bounds, [])
        finally:
            engine.close()

    seen = Fetches()
    original = DuckDBEngine._run

    class Counted:
        def __init__(self, cursor: Any) -> None:
            self.cursor = cursor

        def fetchall(self) -> list[Any]:
            return seen.seen(list(self.cursor.fetchall()))

        def fetchone(self) -> Any:
            row = self.cursor.fetchone()
            seen.seen([] if row is None else [row])
            return row

    def counted(self: DuckDBEngine, statement: str, params: Any = None) -> Any:
        return Counted(original(self, statement, params))

    monkeypatch.setattr(DuckDBEngine, "_run", counted)
    result = run_cli(
        "diff", "order_lines", "--left", "v1", "--right", "v2", "--json", "--project", project
    )
    monkeypatch.undo()
    assert result.exit_code == 1, result.stderr
    document = result.json()
    assert Draft202012Validator(SCHEMA).is_valid(document)

    # every one of the 2,000 rows changed, each day's 200 keys are counted in the engine
    per_day = warehouse_rows(
        project,
        "SELECT CAST(order_ts AS DATE), count(*), list(order_id ORDER BY order_id)[1:5] "
        "FROM orders WHERE order_ts < TIMESTAMP '2025-01-11' GROUP BY 1 ORDER BY 1",
    )
    assert document["summary"]["keys_changed"] == sum(n for _, n, _ in per_day) == 2000
    for day, count, first_ids in per_day:
        changed = by_partition(document)[day.isoformat()]["keys"]["changed"]
        assert changed["count"] == count
        assert changed["columns"] == {"gross_amount": count}
        assert [s["order_id"] for s in changed["sample"]] == [str(i) for i in first_ids]

    # ...and what reached Python: one row per partition (and kind), lists of at most 5 keys
    assert seen.rows, "the probe saw no query"
    assert max(seen.rows) <= 10, seen.rows
    assert seen.longest_list == 5
    assert sum(seen.rows) < 100, seen.rows
