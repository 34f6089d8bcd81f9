"""Text from users (reasons, messages) is printed as text: never read as console markup."""

from __future__ import annotations

from pathlib import Path

from tests.kit import tidegate

MARKUP = "[/bold] closes nothing [red]and colours nothing[/red] [link=http://x]x[/link]"


def test_markup_in_a_reason_is_shown_verbatim(project: Path) -> None:
    paused = tidegate("pause", "daily_revenue", "--reason", MARKUP, "--project", project)
    assert paused.exit_code == 0, paused.stderr
    history = tidegate("history", "daily_revenue", "--project", project)
    assert history.exit_code == 0, history.stderr
    assert "internal error" not in history.stderr
    # a table cell may wrap a long reason: compare the text without the table's layout
    flattened = " ".join(
        part.strip() for line in history.stdout.splitlines() for part in line.split("│")
    )
    for word in ("[/bold]", "[red]and", "colours", "nothing[/red]", "[link=http://x]x[/link]"):
        assert word in flattened, word
