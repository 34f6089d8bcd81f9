"""Schema change classification (docs/design.md §3 Validate: additive / breaking)."""

from __future__ import annotations

import pytest

from tidegate.domain.model import ChangeKind, Column, classify_change

BASE = (
    Column("order_date", "DATE", False),
    Column("status", "TEXT", False),
    Column("gross_revenue", "DECIMAL(18, 2)", True),
)


def with_column(columns: tuple[Column, ...], name: str, **changes: object) -> tuple[Column, ...]:
    out = []
    for c in columns:
        if c.name == name:
            fields = {"name": c.name, "type": c.type, "nullable": c.nullable, **changes}
            out.append(Column(**fields))  # type: ignore[arg-type]
        else:
            out.append(c)
    return tuple(out)


def test_a_model_without_an_active_version_is_new() -> None:
    assert classify_change(None, BASE, same_fingerprint=False) is ChangeKind.NEW
    assert classify_change(None, BASE, same_fingerprint=True) is ChangeKind.NEW


def test_the_same_fingerprint_is_unchanged() -> None:
    assert classify_change(BASE, BASE, same_fingerprint=True) is ChangeKind.UNCHANGED


def test_new_logic_with_the_same_columns_is_modified() -> None:
    assert classify_change(BASE, BASE, same_fingerprint=False) is ChangeKind.MODIFIED
    # column order alone is not a schema change
    assert classify_change(BASE, tuple(reversed(BASE)), False) is ChangeKind.MODIFIED


def test_an_added_column_is_additive() -> None:
    added = (*BASE, Column("net_revenue", "DECIMAL(18, 2)", True))
    assert classify_change(BASE, added, False) is ChangeKind.ADDITIVE


def test_relaxing_not_null_is_not_breaking() -> None:
    relaxed = with_column(BASE, "status", nullable=True)
    assert classify_change(BASE, relaxed, False) is ChangeKind.MODIFIED


@pytest.mark.parametrize(
    "new",
    [
        pytest.param(BASE[:-1], id="removed column"),
        pytest.param(with_column(BASE, "gross_revenue", type="DOUBLE"), id="retyped column"),
        pytest.param(with_column(BASE, "gross_revenue", nullable=False), id="nullable to not null"),
        pytest.param((*BASE[:-1], Column("gross", "DECIMAL(18, 2)", True)), id="renamed column"),
        pytest.param(
            (*with_column(BASE, "status", type="BIGINT"), Column("extra", "TEXT")),
            id="retyped plus added",
        ),
    ],
)
def test_breaking_changes(new: tuple[Column, ...]) -> None:
    assert classify_change(BASE, new, same_fingerprint=False) is ChangeKind.BREAKING


def test_column_declaration() -> None:
    assert Column("a", "BIGINT", False).declaration() == "BIGINT NOT NULL"
    assert Column("a", "BIGINT", True).declaration() == "BIGINT"
