from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.domain import schedule as schedule_module
from tidegate.domain.errors import UsageError
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import TIME_SPAN, WHOLE_TABLE, Grain, PartitionRange, to_epoch
from tidegate.domain.schedule import is_valid, last_fire, learn, next_fire, windows


def at(text: str) -> int:
    return to_epoch(datetime.fromisoformat(text).replace(tzinfo=timezone.utc))


def test_fires_around_an_instant() -> None:
    daily = "0 2 * * *"
    assert last_fire(daily, at("2025-03-05T01:59:00")) == at("2025-03-04T02:00:00")
    assert last_fire(daily, at("2025-03-05T02:00:00")) == at("2025-03-05T02:00:00")
    assert next_fire(daily, at("2025-03-05T02:00:01")) == at("2025-03-06T02:00:00")
    assert next_fire(daily, at("2025-03-05T00:00:00")) == at("2025-03-05T02:00:00")
    monthly = "0 3 1 * *"
    assert last_fire(monthly, at("2025-03-01T02:59:59")) == at("2025-02-01T03:00:00")


def test_without_a_schedule_a_partition_is_due_when_it_ends() -> None:
    assert last_fire(None, 1234) == next_fire(None, 1234) == 1234


def test_cron_expressions_are_validated() -> None:
    assert is_valid("*/15 * * * *") and is_valid("0 2 * * 1-5")
    assert not is_valid("daily at two") and not is_valid("61 * * * *")


def test_a_schedule_firing_past_the_calendar_is_a_usage_error() -> None:
    """At the ends of the dates tidegate handles, a rare schedule's fire can be past year 9999
    or before year 1: refused, not an overflow."""
    leap_day = "0 0 29 2 *"
    with pytest.raises(UsageError, match=r"0 0 29 2 \*.*0002-01-01 to 9998-12-31"):
        last_fire(leap_day, TIME_SPAN[0])
    with pytest.raises(UsageError, match=r"0 0 29 2 \*.*0002-01-01 to 9998-12-31"):
        next_fire(leap_day, TIME_SPAN[1])
    assert next_fire("0 2 * * *", TIME_SPAN[1]) == TIME_SPAN[1] + 2 * 3600
    assert last_fire("0 2 * * *", TIME_SPAN[0]) == TIME_SPAN[0] - 22 * 3600


def whole_table(schedule: str | None) -> ModelSpec:
    return ModelSpec(
        "summary",
        "models/summary.sql",
        "SELECT 1 AS one",
        Grain.TABLE,
        "",
        (),
        keys=("all",),
        schedule=schedule,
    )


def test_a_whole_table_is_due_at_each_fire_after_its_last_publish() -> None:
    nightly = whole_table("0 2 * * *")
    assert nightly.whole_table_due(at("2025-03-05T01:00:00"), None)  # never published
    published = at("2025-03-05T02:10:00")
    assert not nightly.whole_table_due(at("2025-03-05T23:59:00"), published)
    assert nightly.whole_table_due(at("2025-03-06T02:00:00"), published)
    assert nightly.all_partitions_until(at("2025-03-06T02:00:00")) == PartitionRange(
        Grain.TABLE, 0, 1
    )
    assert nightly.first_partition() == WHOLE_TABLE


def test_a_whole_table_without_a_schedule_runs_again_on_request_only() -> None:
    on_request = whole_table(None)
    assert on_request.whole_table_due(at("2025-03-05T01:00:00"), None)
    assert not on_request.whole_table_due(at("2030-01-01T00:00:00"), at("2025-03-05T01:00:00"))


@given(
    schedule=st.sampled_from(["0 2 * * *", "*/15 * * * *", "0 3 1 * *", "30 6 * * 1-5"]),
    instants=st.lists(
        st.integers(at("2024-01-01T00:00:00"), at("2026-12-31T00:00:00")), max_size=8
    ),
    known=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_known_windows_of_fires_answer_as_the_cron_arithmetic_does(
    schedule: str, instants: list[int], known: bool
) -> None:
    if not known:
        schedule_module._windows.pop(schedule, None)
    for instant in instants:
        # the window around one instant, then every other instant near it and far from it
        for moment in (instant, instant + 1, instant + 3600, instant - 86_400):
            assert last_fire(schedule, moment) == schedule_module._fire(schedule, moment, False)
            assert next_fire(schedule, moment) == schedule_module._fire(schedule, moment, True)


@pytest.fixture
def no_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """No window of fires known, and whatever the test teaches forgotten after it."""
    monkeypatch.setattr(schedule_module, "_windows", {})


@pytest.mark.usefixtures("no_windows")
def test_windows_an_earlier_command_found_are_taken_unless_malformed() -> None:
    learn(
        {
            "0 2 * * *": [at("2025-03-04T02:00:00"), at("2025-03-05T02:00:00")],
            "0 3 * * *": [5, 4],
            "0 4 * * *": [1.5, 7],
            "0 5 * * *": "not a window",
        }
    )
    assert windows() == {"0 2 * * *": (at("2025-03-04T02:00:00"), at("2025-03-05T02:00:00"))}
    # inside it no cron arithmetic runs: a window that lies is believed (it is the cache's)
    learn({"9 9 * * *": [at("2025-03-04T00:00:00"), at("2025-03-05T00:00:00")]})
    assert last_fire("9 9 * * *", at("2025-03-04T12:00:00")) == at("2025-03-04T00:00:00")
    assert last_fire("9 9 * * *", at("2025-03-05T12:00:00")) == at("2025-03-05T09:09:00")
