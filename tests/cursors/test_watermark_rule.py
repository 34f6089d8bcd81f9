"""The watermark rules as pure logic over the transactions open at each read, and the
cursor's units."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from tidegate.domain.cursor import (
    CursorKind,
    CursorMark,
    Observation,
    OpenTransactions,
    WatermarkRule,
    below_newest,
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


def open_at(*ids: str) -> OpenTransactions:
    return OpenTransactions(frozenset(ids))


def test_open_transactions_read_and_print_as_pg_locks_lists_them() -> None:
    found = OpenTransactions.parse("12/7,3/45,-1/900")
    assert found == open_at("3/45", "12/7", "-1/900")
    assert str(found) == "-1/900,3/45,12/7"
    assert OpenTransactions.parse("") == OpenTransactions.parse(None) == open_at()


@pytest.mark.parametrize("text", ["1:2:", "a/b", "3/", "3/4,x", "3/4;5/6"])
def test_a_malformed_list_of_open_transactions_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a list of open transactions"):
        OpenTransactions.parse(text)


def test_every_transaction_open_at_the_read_and_still_open_blocks_it() -> None:
    # open at the read: whether they had written (an xid) or not is not asked
    seen = open_at("3/10", "4/20", "5/30")
    now = open_at("4/20", "5/30", "6/40")  # 3/10 ended, 6/40 started after the read
    assert blocking(seen, now) == ("4/20", "5/30")
    assert blocking(seen, open_at("6/40")) == ()


def test_the_newest_settled_candidate_is_the_watermark() -> None:
    now = open_at("2/204")
    newest = Observation(600, open_at("2/204"))  # still open
    earlier = Observation(500, open_at("3/155"))  # has ended
    oldest = Observation(400, open_at())
    found = snapshot_watermark([newest, earlier, oldest], now)
    assert found.value == 500
    assert found.reason == (
        "max 500 (an earlier run's read); newer rows wait for transaction(s) 2/204 still open"
    )
    assert snapshot_watermark([earlier], now).reason == "max 500 settled (this run's read)"


def test_nothing_settled_means_no_watermark_and_says_what_it_waits_for() -> None:
    now = open_at(*(f"{n}/1" for n in range(1, 8)))
    found = snapshot_watermark([Observation(600, now)], now)
    assert found.value is None
    assert found.reason == (
        "waiting for transaction(s) 1/1, 2/1, 3/1, 4/1, 5/1 and 2 more still open"
    )
    assert snapshot_watermark([Observation(None, now)], now).reason == "the source has no rows"


def test_a_cursor_that_is_not_unique_stops_below_the_value_its_rule_reached() -> None:
    found = below_newest(max_watermark(7))
    assert found.value == 6
    assert found.reason == (
        "max 7 (one writer, no transaction in flight); rows at 7 wait for the next run "
        "(the cursor column is not unique)"
    )
    assert below_newest(max_watermark(None)).value is None


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


def test_a_recorded_read_in_another_form_never_settles_a_candidate() -> None:
    mark = CursorMark(
        run_id="run-1",
        model="m",
        table="events",
        column="id",
        observed_at="2026-01-01T00:00:00+00:00",
        candidate=600,
        snapshot="750:760:752",  # a pg_current_snapshot() text
        committed=None,
        watermark=None,
        rule=WatermarkRule.SNAPSHOT,
        reason="",
    )
    assert mark.observation == Observation(600)
    assert snapshot_watermark([mark.observation], open_at()).value is None
    assert replace(mark, snapshot="3/4").observation == Observation(600, open_at("3/4"))
