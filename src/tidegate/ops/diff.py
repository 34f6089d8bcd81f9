"""Correctness check: compare the outputs of two versions of a model, partition by partition.

A version's output for a partition is the published table's rows when the ledger says the
partition's published attempt was written by that version; otherwise the version's shadow table
(`_tidegate_shadow.MODEL__vN`, written by `validate`) when it holds rows of the partition. Every
comparison runs in the engine: what reaches Python is one row of aggregates per partition and
table, and per partition at most a few sample keys of each kind of difference. The warehouse is
opened read-only; nothing is written to it nor to the ledger.

The sides agree when, in every partition both have output for, row counts, NULL counts and the
keys present are equal, the sum of every numeric column is equal within the relative
`tolerance`, and no key has a changed value (a number counts as changed only beyond the same
relative tolerance). Partitions only one side has output for are reported, not compared.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from tidegate.domain.errors import UsageError
from tidegate.domain.model import Column, Version
from tidegate.domain.partitions import (
    EVERYTHING,
    Grain,
    IntervalSet,
    PartitionKey,
    PartitionRange,
    following,
    parse_range,
)
from tidegate.engines.base import Engine, KeyDifference, PartitionSummary, Relation
from tidegate.engines.factory import open_engine
from tidegate.ops.context import Context
from tidegate.ops.deploy import resolve
from tidegate.sql.statements import DIALECT, SHADOW_SCHEMA

SAMPLE = 5
KINDS = ("only_left", "only_right", "changed")
# no range given: every partition either side has output for


def parse_tolerance(text: str | None) -> Decimal:
    if text is None:
        return Decimal(0)
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0:
        raise UsageError(
            f"--tolerance {text!r} is not a relative tolerance (a number >= 0, e.g. 0.001)"
        )
    return value if value else Decimal(0)  # not "-0"


@functools.lru_cache(maxsize=256)
def is_numeric(type_text: str) -> bool:
    return exp.DataType.build(type_text, dialect=DIALECT).is_type(*exp.DataType.NUMERIC_TYPES)


def within(left: str | None, right: str | None, tolerance: Decimal) -> bool:
    """Whether two sums (exact text) agree: |l - r| <= tolerance * max(|l|, |r|)."""
    if left is None or right is None:
        return left is right
    a, b = Decimal(left), Decimal(right)
    if not (a.is_finite() and b.is_finite()):
        return left == right
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


@dataclass(frozen=True)
class Side:
    """One version, where its output is, and which partitions the ledger says it published."""

    version: Version
    columns: tuple[Column, ...]
    published: Relation
    shadow: Relation | None
    published_starts: frozenset[int]

    @property
    def label(self) -> str:
        return f"v{self.version.seq}"

    def relation(self, source: str) -> Relation:
        if source == "published":
            return self.published
        assert self.shadow is not None
        return self.shadow


def _doc_version(version: Version) -> dict[str, Any]:
    return {"version_id": version.version_id, "seq": version.seq}


def diff(
    ctx: Context,
    model: str,
    left_ref: str,
    right_ref: str,
    partitions: str | None = None,
    tolerance_text: str | None = None,
) -> dict[str, Any]:
    """The `tidegate.diff/v1` document comparing two versions' outputs of `model`."""
    tolerance = parse_tolerance(tolerance_text)
    left_version = resolve(ctx, model, left_ref)
    right_version = resolve(ctx, model, right_ref)
    lspec, rspec = left_version.spec, right_version.spec
    if rspec.update is not None or lspec.update is not None:
        raise UsageError(
            f"{model} is an update model: its versions write one table in place, so there "
            "are no two outputs to compare"
        )
    if lspec.grain is not rspec.grain:
        raise UsageError(
            f"{model}: v{left_version.seq} has {lspec.grain.value} partitions and "
            f"v{right_version.seq} {rspec.grain.value} partitions; they cannot be compared"
        )
    if lspec.keys != rspec.keys:
        raise UsageError(
            f"{model}: v{left_version.seq} and v{right_version.seq} declare different keys; "
            "their partitions cannot be compared"
        )
    grain, keys = rspec.grain, rspec.keys
    requested = parse_range(partitions, grain, keys) if partitions is not None else None
    lo, hi = (requested.start, requested.end) if requested else EVERYTHING

    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        left = _side(ctx, engine, left_version, lo, hi)
        right = _side(ctx, engine, right_version, lo, hi)
        return _compare(engine, model, grain, left, right, requested, tolerance)
    finally:
        engine.close()


def _side(ctx: Context, engine: Engine, version: Version, lo: int, hi: int) -> Side:
    spec = version.spec
    intervals = IntervalSet.of(ctx.state.published_intervals(spec.name, lo, hi, version.version_id))
    starts = frozenset(
        key.start for r in intervals.ranges(spec.grain, spec.chunk_size) for key in r
    )
    published = Relation(spec.name, None, spec.partition_column, spec.grain.value, spec.keys)
    present: set[str] | None = None
    if starts:
        found = engine.table_columns(spec.name)
        present = {c.name for c in found or ()}
    shadow_name = version.shadow_table
    shadow_columns = engine.table_columns(shadow_name, SHADOW_SCHEMA)
    shadow = None
    if shadow_columns is not None:
        shadow = Relation(
            shadow_name, SHADOW_SCHEMA, spec.partition_column, spec.grain.value, spec.keys
        )
        names = {c.name for c in shadow_columns}
        present = names if present is None else present & names
    # The version's contract, as far as the tables holding its output have those columns.
    columns = tuple(c for c in spec.columns if present is None or c.name in present)
    return Side(version, columns, published, shadow, starts)


def _summaries(
    engine: Engine,
    left: Side,
    right: Side,
    lo: int,
    hi: int,
) -> dict[Relation, dict[int, PartitionSummary]]:
    """One pass per table: the published table (once, when both sides read it alike) over the
    partitions the ledger says either side published, and each side's shadow table."""
    wanted: dict[Relation, tuple[list[str], list[str], list[tuple[int, int] | None]]] = {}

    def want(relation: Relation, columns: Sequence[Column], window: tuple[int, int] | None) -> None:
        names, numeric, windows = wanted.setdefault(relation, ([], [], []))
        for c in columns:
            if c.name not in names:
                names.append(c.name)
            if is_numeric(c.type) and c.name not in numeric:
                numeric.append(c.name)
        windows.append(window)

    bounded = None if (lo, hi) == EVERYTHING else (lo, hi)
    for side in (left, right):
        if side.published_starts:
            first = min(side.published_starts)
            last = following(Grain(side.published.grain), max(side.published_starts))
            want(side.published, side.columns, (first, last))
        if side.shadow is not None:
            want(side.shadow, side.columns, bounded)
    found: dict[Relation, dict[int, PartitionSummary]] = {}
    for relation, (names, numeric, windows) in wanted.items():
        window = None
        if all(w is not None for w in windows):
            window = (min(w[0] for w in windows if w), max(w[1] for w in windows if w))
        found[relation] = engine.partition_summaries(relation, names, numeric, window)
    return found


def _source(side: Side, start: int, summaries: Mapping[Relation, Mapping[int, Any]]) -> str | None:
    if start in side.published_starts:
        return "published"
    if side.shadow is not None and start in summaries.get(side.shadow, {}):
        return "shadow"
    return None


def _table_name(relation: Relation) -> str:
    return relation.name if relation.schema is None else f"{relation.schema}.{relation.name}"


def _unique_key(left: Side, right: Side, common: Sequence[str]) -> tuple[list[str] | None, str]:
    lkey, rkey = left.version.spec.unique_key, right.version.spec.unique_key
    if not lkey and not rkey:
        return None, "the model declares no unique_key: aggregates only"
    if lkey != rkey:
        return None, (
            f"{left.label} and {right.label} declare different unique keys: aggregates only"
        )
    missing = [c for c in rkey if c not in common]
    if missing:
        return None, f"key column(s) {', '.join(missing)} not on both sides: aggregates only"
    return list(rkey), ""


def _mode(left: Column, right: Column, tolerance: Decimal) -> str:
    if is_numeric(left.type) and is_numeric(right.type):
        return "numeric" if tolerance > 0 else "exact"
    return "exact" if left.type == right.type else "text"


def _runs(
    starts: Sequence[int], grain: Grain, pair: Mapping[int, tuple[str, str]]
) -> Iterable[tuple[int, int, tuple[str, str]]]:
    """Consecutive compared partitions read from the same pair of tables: one query each."""
    run: list[int] = []
    for start in starts:
        if run and (start != following(grain, run[-1]) or pair[start] != pair[run[0]]):
            yield run[0], following(grain, run[-1]), pair[run[0]]
            run = []
        run.append(start)
    if run:
        yield run[0], following(grain, run[-1]), pair[run[0]]


def _compare(
    engine: Engine,
    model: str,
    grain: Grain,
    left: Side,
    right: Side,
    requested: PartitionRange | None,
    tolerance: Decimal,
) -> dict[str, Any]:
    lo, hi = (requested.start, requested.end) if requested else EVERYTHING
    summaries = _summaries(engine, left, right, lo, hi)
    lcols = {c.name: c for c in left.columns}
    rcols = {c.name: c for c in right.columns}
    common = [c.name for c in left.columns if c.name in rcols]
    key, key_note = _unique_key(left, right, common)

    starts: set[int] = set(left.published_starts) | set(right.published_starts)
    for side in (left, right):
        if side.shadow is not None:
            starts.update(s for s in summaries.get(side.shadow, {}) if lo <= s < hi)
    sources = {s: (_source(left, s, summaries), _source(right, s, summaries)) for s in starts}
    compared = sorted(s for s, (a, b) in sources.items() if a is not None and b is not None)
    if not compared:
        where = f" in {requested.label(left.version.spec.keys)}" if requested else ""
        raise UsageError(
            f"{model}: {left.label} and {right.label} have no partition with output on both "
            f"sides{where} (run, backfill or validate the versions first)"
        )

    keyed: dict[int, dict[str, KeyDifference]] = {}
    if key is not None:
        key_modes = [(n, _mode(lcols[n], rcols[n], Decimal(0))) for n in key]
        value_modes = [(n, _mode(lcols[n], rcols[n], tolerance)) for n in common if n not in key]
        pairs = {s: (str(sources[s][0]), str(sources[s][1])) for s in compared}
        for start, end, (lfrom, rfrom) in _runs(compared, grain, pairs):
            keyed.update(
                engine.key_differences(
                    left.relation(lfrom),
                    right.relation(rfrom),
                    key_modes,
                    value_modes,
                    (start, end),
                    float(tolerance),
                    SAMPLE,
                )
            )

    entries = []
    totals = dict.fromkeys(
        ("compared", "differing", "only_left", "only_right", "rows_left", "rows_right"), 0
    )
    key_totals = dict.fromkeys(KINDS, 0)
    for start in sorted(starts):
        lsource, rsource = sources[start]
        if lsource is None and rsource is None:
            continue
        label = PartitionKey(grain, start, following(grain, start)).label(left.version.spec.keys)
        lsum = _summary(left, lsource, start, summaries)
        rsum = _summary(right, rsource, start, summaries)
        entry: dict[str, Any] = {
            "partition": label,
            "state": "",
            "left": _side_doc(left, lsource, lsum),
            "right": _side_doc(right, rsource, rsum),
            "columns": [],
            "keys": None,
        }
        totals["rows_left"] += lsum.rows if lsum else 0
        totals["rows_right"] += rsum.rows if rsum else 0
        if lsum is None or rsum is None:
            entry["state"] = "only_left" if rsum is None else "only_right"
            totals[entry["state"]] += 1
            entries.append(entry)
            continue
        totals["compared"] += 1
        differs = lsum.rows != rsum.rows
        for name in common:
            doc = _column_doc(name, lcols[name], rcols[name], lsum, rsum, tolerance)
            differs = differs or doc["differs"]
            entry["columns"].append(doc)
        if key is not None:
            found = keyed.get(start, {})
            entry["keys"] = {kind: _keys_doc(key, found.get(kind)) for kind in KINDS}
            for kind in KINDS:
                key_totals[kind] += entry["keys"][kind]["count"]
            differs = differs or any(kind in found for kind in KINDS)
        entry["state"] = "different" if differs else "same"
        totals["differing"] += int(differs)
        entries.append(entry)

    return {
        "schema": "tidegate.diff/v1",
        "model": model,
        "grain": grain.value,
        "left": _doc_version(left.version),
        "right": _doc_version(right.version),
        "range": requested.label(left.version.spec.keys) if requested else None,
        "tolerance": str(tolerance),
        "unique_key": key,
        "key_note": key_note or None,
        "columns": {
            "common": common,
            "only_left": [c.name for c in left.columns if c.name not in rcols],
            "only_right": [c.name for c in right.columns if c.name not in lcols],
            "retyped": [
                {"column": n, "left": lcols[n].type, "right": rcols[n].type}
                for n in common
                if lcols[n].type != rcols[n].type
            ],
        },
        "agree": totals["differing"] == 0,
        "summary": {
            "partitions": len(entries),
            **totals,
            **{f"keys_{kind}": (key_totals[kind] if key is not None else None) for kind in KINDS},
        },
        "partitions": entries,
    }


def _summary(
    side: Side,
    source: str | None,
    start: int,
    summaries: Mapping[Relation, Mapping[int, PartitionSummary]],
) -> PartitionSummary | None:
    if source is None:
        return None
    # a partition published with no rows has no row in the aggregates
    return summaries.get(side.relation(source), {}).get(start) or PartitionSummary(0, {}, {})


def _side_doc(side: Side, source: str | None, summary: PartitionSummary | None) -> Any:
    if source is None or summary is None:
        return None
    return {
        "source": source,
        "table": _table_name(side.relation(source)),
        "rows": summary.rows,
    }


def _column_doc(
    name: str,
    lcol: Column,
    rcol: Column,
    lsum: PartitionSummary,
    rsum: PartitionSummary,
    tolerance: Decimal,
) -> dict[str, Any]:
    summed = is_numeric(lcol.type) and is_numeric(rcol.type)
    left_sum = lsum.sums.get(name) if summed else None
    right_sum = rsum.sums.get(name) if summed else None
    nulls = (lsum.nulls.get(name, 0), rsum.nulls.get(name, 0))
    differs = nulls[0] != nulls[1] or (summed and not within(left_sum, right_sum, tolerance))
    return {
        "column": name,
        "sum_left": left_sum,
        "sum_right": right_sum,
        "nulls_left": nulls[0],
        "nulls_right": nulls[1],
        "differs": differs,
    }


def _keys_doc(key: Sequence[str], found: KeyDifference | None) -> dict[str, Any]:
    if found is None:
        return {"count": 0, "sample": [], "columns": {}}
    return {
        "count": found.count,
        "sample": [dict(zip(key, values, strict=True)) for values in found.sample],
        "columns": dict(found.columns),
    }
