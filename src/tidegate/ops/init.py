"""Init: scaffold a project; with the example, load the generated orders into its warehouse."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.domain.errors import UsageError
from tidegate.project.layout import MODELS_DIR, PROJECT_FILE

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

EXAMPLES = ("orders", "flink")
# the files of the Flink example (a stream job, nothing to load)
FLINK_FILES = ("tidegate.toml", "write_orders.py", "models", "jobs", "story")
WAREHOUSE = "warehouse.duckdb"
FLINK_GITIGNORE = (
    "# the example's orders, its output, checkpoints and savepoints\nin/\nout/\nstate/\n"
)
PROJECT_GITIGNORE = "# written by tidegate; never commit them\nwarehouse.duckdb*\n.tidegate/\n"
EMPTY_PROJECT = """[project]
name = "{name}"

[warehouse]
engine = "duckdb"
path = "warehouse.duckdb"

[state]
path = ".tidegate/state.db"
"""


@dataclass(frozen=True)
class Initialized:
    root: Path
    example: str | None
    orders_rows: int | None


def _copy_example(name: str, root: Path) -> None:
    source = resources.files("tidegate") / "examples" / name
    if name == "flink":
        _copy_tree(source, root, FLINK_FILES)
        return
    (root / PROJECT_FILE).write_text((source / PROJECT_FILE).read_text())
    (root / MODELS_DIR).mkdir()
    for entry in (source / MODELS_DIR).iterdir():
        if entry.name.endswith(".sql"):
            (root / MODELS_DIR / entry.name).write_text(entry.read_text())


def _copy_tree(source: Traversable, root: Path, names: tuple[str, ...]) -> None:
    for entry in source.iterdir():
        if entry.name not in names:
            continue
        if entry.is_dir():
            (root / entry.name).mkdir(exist_ok=True)
            _copy_tree(entry, root / entry.name, tuple(e.name for e in entry.iterdir()))
        elif entry.name.endswith((".py", ".toml")):
            (root / entry.name).write_text(entry.read_text())


def fault_orders(warehouse: Path, day: datetime | None) -> None:
    """The demo's failed load on `day`, or (None) its repair."""
    from tidegate.engines.duckdb import DuckDBEngine

    engine = DuckDBEngine(warehouse)
    try:
        if day is None:
            engine.repair_reference_orders()
        else:
            engine.break_reference_order(day)
    finally:
        engine.close()


def load_orders(warehouse: Path, rows_per_day: int, seed: int, wait: bool) -> int:
    """Generate the reference orders (2025, one year) into the warehouse; returns the rows."""
    from tidegate.engines.duckdb import DuckDBEngine

    engine = DuckDBEngine(warehouse, wait=wait)
    try:
        return engine.load_reference_orders(rows_per_day, seed)
    finally:
        engine.close()


def init_dbt(root: Path, dbt: Path, target: str | None) -> Initialized:
    """A project controlling the dbt project at `dbt` (see init_dbt.py)."""
    from tidegate.ops.init_dbt import dbt_project_file

    _refuse_existing(root)
    text = dbt_project_file(root, dbt, target)
    root.mkdir(parents=True, exist_ok=True)
    (root / PROJECT_FILE).write_text(text)
    _ignore_generated(root)
    return Initialized(root, None, None)


def _refuse_existing(root: Path) -> None:
    if (root / PROJECT_FILE).exists():
        raise UsageError(f"{root / PROJECT_FILE} already exists; init never overwrites a project")


def _ignore_generated(root: Path) -> None:
    if not (root / ".gitignore").exists():
        (root / ".gitignore").write_text(PROJECT_GITIGNORE)


def init(
    root: Path, example: str | None, rows_per_day: int, seed: int, wait: bool = False
) -> Initialized:
    if example is not None and example not in EXAMPLES:
        raise UsageError(f"unknown example {example!r} (examples: {', '.join(EXAMPLES)})")
    if rows_per_day < 1:
        raise UsageError("--rows-per-day must be at least 1")
    _refuse_existing(root)
    if (root / MODELS_DIR).exists() or (root / WAREHOUSE).exists():
        raise UsageError(f"{root} already holds models or a warehouse; init into an empty folder")
    root.mkdir(parents=True, exist_ok=True)
    try:
        if example is None:
            (root / PROJECT_FILE).write_text(EMPTY_PROJECT.format(name=root.resolve().name))
            (root / MODELS_DIR).mkdir()
        else:
            _copy_example(example, root)
        _ignore_generated(root)
        if example == "flink":
            with (root / ".gitignore").open("a") as ignored:
                ignored.write(FLINK_GITIGNORE)
        rows = (
            load_orders(root / WAREHOUSE, rows_per_day, seed, wait) if example == "orders" else None
        )
    except BaseException:
        # A half-made project would be worse than none: remove what init wrote.
        for written in (PROJECT_FILE, WAREHOUSE, f"{WAREHOUSE}.wal", "write_orders.py"):
            (root / written).unlink(missing_ok=True)
        for folder in (MODELS_DIR, "jobs", "story"):
            shutil.rmtree(root / folder, ignore_errors=True)
        raise
    return Initialized(root, example, rows)
