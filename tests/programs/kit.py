"""Projects with Python and command models: the orders example plus `daily_revenue` written as a
Python model or computed by an external job (src/tidegate/examples/programs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tidegate
from tests.kit import Result, warehouse_rows
from tests.kit import tidegate as cli

PROGRAMS = Path(tidegate.__file__).parent / "examples" / "programs"
PYTHON_MODEL = (PROGRAMS / "daily_revenue.py").read_text()
COMMAND_MODEL = (PROGRAMS / "daily_revenue.toml").read_text()
COLUMNS = "order_date, status, order_count, gross_revenue, net_revenue"

# What a test's job starts with: `compute()` runs the example job (jobs/revenue.py) with the
# arguments tidegate gave, writing a complete output; the test's lines then misbehave or not.
JOB_PRELUDE = """\
import runpy
import sys
from pathlib import Path

ARGS = dict(zip(sys.argv[1::2], sys.argv[2::2]))
OUTPUT = Path(ARGS["--output"])


def compute():
    runpy.run_path("jobs/revenue.py", run_name="__main__")


"""


def run(project: Path, *args: str, code: int = 0) -> Result:
    result = cli(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout, result.stderr)
    return result


def document(project: Path, *args: str, code: int = 0) -> Any:
    """The one JSON document a command prints (a backfill's: its result)."""
    return run(project, *args, "--json", code=code).json()


def add_python_model(project: Path, name: str, source: str = PYTHON_MODEL) -> Path:
    path = project / "models" / f"{name}.py"
    path.write_text(source)
    return path


def add_command_model(
    project: Path,
    name: str,
    job: str,
    timeout_seconds: float = 120,
    env: str = 'REVENUE_CURRENCY = "EUR"',
) -> Path:
    """The example command model as `name`, running `jobs/NAME.py`: JOB_PRELUDE then `job`."""
    jobs = project / "jobs"
    jobs.mkdir(exist_ok=True)
    (jobs / "revenue.py").write_text((PROGRAMS / "jobs" / "revenue.py").read_text())
    (jobs / f"{name}.py").write_text(JOB_PRELUDE + job)
    text = COMMAND_MODEL.replace("jobs/revenue.py", f"jobs/{name}.py")
    text = text.replace("timeout_seconds = 600", f"timeout_seconds = {timeout_seconds}")
    text = text.replace('REVENUE_CURRENCY = "EUR"      # recorded with each attempt as it is', env)
    path = project / "models" / f"{name}.toml"
    path.write_text(text)
    return path


def deploy(project: Path, *models: str, force: bool = False) -> None:
    run(project, "build")
    for model in models:
        extra = ("--force", "--reason", "the run-time audit is under test") if force else ()
        run(project, "deploy", model, *extra)


def published(project: Path, model: str) -> list[tuple[Any, ...]]:
    return warehouse_rows(project, f'SELECT {COLUMNS} FROM "{model}" ORDER BY order_date, status')


def daily_oracle(project: Path, first: str, last: str) -> list[tuple[Any, ...]]:
    """The reference daily_revenue of the days first..last, by an independent GROUP BY."""
    return warehouse_rows(
        project,
        "SELECT CAST(order_ts AS DATE) AS d, status, count(*), "
        "CAST(sum(gross_amount) AS DECIMAL(18, 2)), "
        "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) FROM orders "
        "WHERE CAST(order_ts AS DATE) BETWEEN CAST(? AS DATE) AND CAST(? AS DATE) "
        "GROUP BY ALL ORDER BY d, status",
        [first, last],
    )


DBT_MODEL = (PROGRAMS / "daily_revenue_dbt.toml").read_text()


def add_dbt_model(project: Path, name: str) -> Path:
    """The example dbt project in `dbt/` and the model `name` running its daily_revenue."""
    import shutil

    shutil.copytree(PROGRAMS / "dbt", project / "dbt", dirs_exist_ok=True)
    path = project / "models" / f"{name}.toml"
    path.write_text(DBT_MODEL)
    return path
