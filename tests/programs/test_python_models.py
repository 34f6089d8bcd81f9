"""Python models: a decorated function's rows are staged, audited and published like a SELECT's,
with backfill, rerun, taint and recover; what does not fit the contract publishes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import example_project, state_dump, warehouse_dump
from tests.programs.kit import (
    PYTHON_MODEL,
    add_python_model,
    daily_oracle,
    deploy,
    document,
    published,
    run,
)

READ_ORDERS = 'orders = ctx.read("orders")'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = example_project(tmp_path / "shop", rows_per_day=3)
    add_python_model(project, "daily_revenue_py")
    deploy(project, "daily_revenue_py")
    return project


def test_the_python_daily_revenue_equals_the_sql_one_for_a_whole_year(project: Path) -> None:
    # two batches in flight: the function runs on two worker threads at once
    year = (
        "--partitions",
        "2025-01-01..2025-12-31",
        "--batch-size",
        "31",
        "--max-concurrency",
        "2",
    )
    for model in ("daily_revenue", "daily_revenue_py"):
        done = document(project, "backfill", model, *year)
        assert done["status"] == "succeeded", done
    python = published(project, "daily_revenue_py")
    assert python == published(project, "daily_revenue")
    assert python == daily_oracle(project, "2025-01-01", "2025-12-31")
    assert len({row[0] for row in python}) == 365
    # the same rows give the same checksum, whichever kind of model wrote them
    for day in ("2025-01-01", "2025-07-15", "2025-12-31"):
        sql = document(project, "show", "partition", "daily_revenue", day)
        py = document(project, "show", "partition", "daily_revenue_py", day)
        assert py["published"]["checksum"] == sql["published"]["checksum"], day
        assert py["published"]["version"]["id"] != sql["published"]["version"]["id"]


def test_a_result_without_a_declared_column_fails_and_publishes_nothing(project: Path) -> None:
    run(project, "run", "daily_revenue_py", "--partition", "2025-03-01")
    before = published(project, "daily_revenue_py")
    add_python_model(
        project,
        "daily_revenue_py",
        PYTHON_MODEL.replace('"net_revenue": daily["net_amount_sum"],', ""),
    )
    deploy(project, "daily_revenue_py", force=True)
    failed = document(project, "run", "daily_revenue_py", "--partition", "2025-03-01", code=1)
    [outcome] = failed["partitions"]
    assert outcome["state"] == "failed"
    assert "missing column(s) net_revenue" in outcome["reason"]
    assert published(project, "daily_revenue_py") == before


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_a_data_frame_result_is_published_like_an_arrow_table(project: Path, library: str) -> None:
    run(project, "run", "daily_revenue_py", "--partition", "2025-02-01..2025-02-03")
    arrow = published(project, "daily_revenue_py")
    convert = {"pandas": "result.to_pandas()", "polars": "polars.from_arrow(result)"}
    source = (
        "import polars\n"
        + PYTHON_MODEL.replace("    return pa.table(\n", "    result = pa.table(\n")
        + f"    return {convert[library]}\n"
    )
    add_python_model(project, "daily_revenue_df", source)
    deploy(project, "daily_revenue_df")
    run(project, "run", "daily_revenue_df", "--partition", "2025-02-01..2025-02-03")
    assert published(project, "daily_revenue_df") == arrow


def test_an_error_in_the_function_fails_the_attempt_naming_its_line(project: Path) -> None:
    add_python_model(
        project,
        "daily_revenue_py",
        PYTHON_MODEL.replace(READ_ORDERS, f"{READ_ORDERS}\n    1 / 0"),
    )
    deploy(project, "daily_revenue_py", force=True)
    failed = document(project, "run", "daily_revenue_py", "--partition", "2025-03-01", code=1)
    line = PYTHON_MODEL[: PYTHON_MODEL.index(READ_ORDERS)].count("\n") + 2
    reason = failed["partitions"][0]["reason"]
    assert reason.startswith(f"models/daily_revenue_py.py:{line}: ZeroDivisionError"), reason
    assert "daily_revenue_py" not in {k.split(".")[1] for k in warehouse_dump(project)}


def test_rerun_of_a_python_model_proves_the_same_checksums(project: Path) -> None:
    first = document(project, "run", "daily_revenue_py", "--partition", "2025-04-01..2025-04-03")
    again = document(project, "rerun", first["run_id"], "--partitions", "2025-04-01..2025-04-03")
    assert again["status"] == "succeeded"
    assert [p["deterministic"] for p in again["proofs"]] == [True] * 3
    assert all(p["before"] == p["after"] for p in again["proofs"])


def test_recover_recomputes_a_tainted_python_partition(project: Path) -> None:
    run(project, "run", "daily_revenue_py", "--partition", "2025-05-01..2025-05-03")
    before = published(project, "daily_revenue_py")
    marked = document(
        project, "taint", "daily_revenue_py", "--partitions", "2025-05-02", "--reason", "bad load"
    )
    assert marked["tainted"][0]["partitions"] == ["2025-05-02"]
    recovered = document(project, "recover", "daily_revenue_py")
    assert recovered["status"] == "succeeded"
    shown = document(project, "show", "partition", "daily_revenue_py", "2025-05-02")
    assert shown["taints"] == [] and shown["published"]["run_id"] == recovered["run_id"]
    assert published(project, "daily_revenue_py") == before


def test_an_old_version_does_not_run_code_that_changed_since_its_build(project: Path) -> None:
    helper = project / "revenue_rules.py"
    helper.write_text("def scale(table):\n    return table\n")
    add_python_model(
        project,
        "daily_revenue_py",
        "import revenue_rules\n"
        + PYTHON_MODEL.replace(READ_ORDERS, "orders = revenue_rules.scale(ctx.read('orders'))"),
    )
    built = document(project, "build")
    [entry] = [m for m in built["models"] if m["model"] == "daily_revenue_py"]
    assert entry["change"] == "modified"
    run(project, "deploy", "daily_revenue_py", "--force", "--reason", "helper")
    run(project, "run", "daily_revenue_py", "--partition", "2025-06-01")
    helper.write_text("def scale(table):\n    return table.slice(0, 1)\n")
    rebuilt = document(project, "build")
    [entry] = [m for m in rebuilt["models"] if m["model"] == "daily_revenue_py"]
    assert entry["change"] == "modified"  # the helper is part of the fingerprint
    failed = document(project, "run", "daily_revenue_py", "--partition", "2025-06-02", code=1)
    assert (
        "revenue_rules.py changed since this version was built"
        in (failed["partitions"][0]["reason"])
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            PYTHON_MODEL.replace('grain="day",', 'grain="week",'),
            "models/bad.py:10: grain: Input should be",
        ),
        (
            PYTHON_MODEL.replace('sources=["orders"],', 'sources=["nope"],'),
            "models/bad.py:10: sources: 'nope' is not a source in tidegate.toml",
        ),
        (
            PYTHON_MODEL.replace("import tidegate\n", "import tidegate\n\nprint('side effect')\n"),
            "models/bad.py:9: a model module holds only imports, definitions and assignments",
        ),
        (
            PYTHON_MODEL.replace("import tidegate\n", "import tidegate\n\nRATE = 1 / 0\n"),
            "models/bad.py:9: importing failed: ZeroDivisionError: division by zero",
        ),
        (
            PYTHON_MODEL.replace('packages=["pyarrow"],', 'packages=["no-such-package"],'),
            "models/bad.py:10: packages: 'no-such-package' is not installed",
        ),
        ("def daily(ctx):\n    return None\n", "models/bad.py:1: no function is decorated"),
        ("def broken(:\n", "models/bad.py:1: Python does not parse"),
    ],
)
def test_a_bad_python_model_is_one_line_exit_2_and_writes_nothing(
    project: Path, source: str, message: str
) -> None:
    ledger, warehouse = state_dump(project), warehouse_dump(project)
    add_python_model(project, "bad", source)
    result = run(project, "build", code=2)
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (state_dump(project), warehouse_dump(project)) == (ledger, warehouse)


@pytest.mark.postgres
def test_a_python_model_runs_and_publishes_in_a_postgres_warehouse(tmp_path: Path) -> None:
    from tests.engines.postgres_kit import fresh_database, postgres_project, rows

    with fresh_database() as dsn:
        project = postgres_project(tmp_path / "shop", dsn, rows_per_day=3)
        add_python_model(project, "daily_revenue_py")
        deploy(project, "daily_revenue_py")
        days = ("--partition", "2025-02-27..2025-03-02")
        for model in ("daily_revenue", "daily_revenue_py"):
            assert document(project, "run", model, *days)["status"] == "succeeded"
        query = 'SELECT order_date, status, order_count, gross_revenue, net_revenue FROM "{}" '
        order = "ORDER BY order_date, status"
        python = rows(dsn, query.format("daily_revenue_py") + order)
        assert len({row[0] for row in python}) == 4
        assert python == rows(dsn, query.format("daily_revenue") + order)


def test_a_new_python_version_passes_its_gate_and_diff_agrees(project: Path) -> None:
    run(project, "run", "daily_revenue_py", "--partition", "2025-08-01..2025-08-04")
    add_python_model(
        project, "daily_revenue_py", PYTHON_MODEL.replace("net_not_above_gross", "net_le_gross")
    )
    built = document(project, "build")
    assert [m["change"] for m in built["models"] if m["model"] == "daily_revenue_py"] == [
        "modified"
    ]
    gate = document(project, "validate", "daily_revenue_py", "--sample", "2")
    assert gate["passed"] and [p["state"] for p in gate["partitions"]] == ["passed"] * 2
    compared = document(
        project,
        "diff",
        "daily_revenue_py",
        "--left",
        "v1",
        "--right",
        "v2",
        "--partitions",
        "2025-08-01..2025-08-04",
    )
    assert compared["agree"]
    deployed = document(project, "deploy", "daily_revenue_py")
    assert deployed["seq"] == 2 and "passed" in deployed["gate"]
