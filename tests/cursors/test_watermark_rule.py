"""The watermark rules as pure logic over snapshot values, and the cursor's units."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tidegate.domain.cursor import (
    CursorKind,
    Observation,
    Snapshot,
    blocking,
    cursor_value,
    from_micros,
    lag_watermark,
    max_watermark,
    parse_lag,
    parse_start,
    snapshot_watermark,
    to_micros,
)


def test_a_snapshot_reads_and_prints_as_postgresql_writes_it() -> None:
    found = Snapshot.parse("750:760:752,755")
    assert found == Snapshot(750, 760, (752, 755))
    assert str(found) == "750:760:752,755"
    assert Snapshot.parse("10:10:") == Snapshot(10, 10, ())


@pytest.mark.parametrize("text", ["", "1:2", "a:b:", "5:4:", "5:9:3", "5:9:9", "5:9:6,x"])
def test_a_malformed_snapshot_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a snapshot"):
        Snapshot.parse(text)


def test_a_transaction_ended_below_xmin_or_below_xmax_outside_xip() -> None:
    now = Snapshot(100, 110, (103,))
    assert now.ended(99) and now.ended(104)
    assert not now.ended(103)  # in progress
    assert not now.ended(110)  # not started at the snapshot: not known to have ended


def test_the_transactions_that_block_a_candidate_are_those_still_open_that_write_the_source() -> (
    None
):
    seen = Snapshot(100, 110, (101, 103, 105))
    now = Snapshot(103, 120, (103, 105, 112))
    assert now.open_of(seen) == (103, 105)
    assert blocking(seen, now, None) == (103, 105)
    assert blocking(seen, now, frozenset({105, 112})) == (105,)
    # pg_locks shows 32-bit ids; snapshots carry the epoch in the high bits
    epoch = 3 * 2**32
    wide = Snapshot(epoch + 100, epoch + 110, (epoch + 105,))
    assert blocking(wide, wide, frozenset({105})) == (epoch + 105,)


def test_the_newest_settled_candidate_is_the_watermark() -> None:
    now = Snapshot(200, 210, (204,))
    newest = Observation(600, Snapshot(200, 205, (204,)))  # 204 is still open
    earlier = Observation(500, Snapshot(150, 160, (155,)))  # 155 has ended
    oldest = Observation(400, Snapshot(100, 101, ()))
    found = snapshot_watermark([newest, earlier, oldest], now)
    assert found.value == 500
    assert found.reason == (
        "max 500 (an earlier run's snapshot); newer rows wait for transaction(s) 204 still open"
    )
    assert snapshot_watermark([earlier], now).reason == "max 500 settled (this run's snapshot)"


def test_nothing_settled_means_no_watermark_and_says_what_it_waits_for() -> None:
    now = Snapshot(200, 210, tuple(range(201, 208)))
    found = snapshot_watermark([Observation(600, Snapshot(200, 209, tuple(range(201, 208))))], now)
    assert found.value is None
    assert found.reason == (
        "waiting for transaction(s) 201, 202, 203, 204, 205 and 2 more still open"
    )
    assert snapshot_watermark([Observation(None, now)], now).reason == "the source has no rows"


def test_an_open_transaction_that_does_not_write_the_source_does_not_hold_it_back() -> None:
    now = Snapshot(200, 210, (204,))
    seen = Observation(600, Snapshot(200, 205, (204,)))
    assert snapshot_watermark([seen], now, frozenset()).value == 600
    assert snapshot_watermark([seen], now, frozenset({204})).value is None


def test_the_lag_rule_keeps_a_margin_below_max_and_for_timestamps_below_now() -> None:
    assert lag_watermark(CursorKind.INTEGER, 1000, 50, 0).value == 950
    micros = 1_000_000
    at = to_micros(datetime(2026, 1, 1, 12, tzinfo=timezone.utc))
    found = lag_watermark(CursorKind.TIMESTAMP, at, 60 * micros, at + 10 * micros)
    assert found.value == at - 60 * micros
    # rows stamped ahead of the clock: now - lag is the lower bound
    late = lag_watermark(CursorKind.TIMESTAMP, at, 60 * micros, at - 30 * micros)
    assert late.value == at - 90 * micros
    assert late.reason == "now minus lag 60s"
    assert lag_watermark(CursorKind.INTEGER, None, 5, 0).value is None
    assert max_watermark(7).value == 7


def test_cursor_values_are_ids_or_exact_epoch_microseconds() -> None:
    moment = datetime(2026, 3, 4, 5, 6, 7, 891011)
    assert from_micros(to_micros(moment)) == moment
    assert to_micros(datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)) == 1_000_000
    assert cursor_value(CursorKind.INTEGER, 42) == 42
    assert cursor_value(CursorKind.TIMESTAMP, moment) == to_micros(moment)
    for kind, raw in (
        (CursorKind.INTEGER, "42"),
        (CursorKind.INTEGER, True),
        (CursorKind.TIMESTAMP, 42),
    ):
        with pytest.raises(ValueError, match="expected"):
            cursor_value(kind, raw)


def test_declared_starts_and_lags_are_parsed_in_the_cursors_units() -> None:
    assert parse_start(CursorKind.INTEGER, 100) == 100
    assert parse_start(CursorKind.TIMESTAMP, "1970-01-01 00:00:02") == 2_000_000
    assert parse_lag(CursorKind.INTEGER, 0) == 0
    assert parse_lag(CursorKind.TIMESTAMP, "5m") == 300_000_000
    assert parse_lag(CursorKind.TIMESTAMP, "250ms") == 250_000
    with pytest.raises(ValueError, match="not an integer"):
        parse_start(CursorKind.INTEGER, "100")
    with pytest.raises(ValueError, match="not a timestamp"):
        parse_start(CursorKind.TIMESTAMP, "yesterday")
    with pytest.raises(ValueError, match="not a duration"):
        parse_lag(CursorKind.TIMESTAMP, "5 minutes")
    with pytest.raises(ValueError, match="not a count of ids"):
        parse_lag(CursorKind.INTEGER, -1)
