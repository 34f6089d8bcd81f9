"""Text bound for a terminal shows control characters and bidi overrides as escapes: a reason,
an error or a job's stderr cannot move the cursor, retitle the window or reorder what is read."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from tidegate.terminal import echo, one_line, printable

# what a terminal obeys or a bidi algorithm reorders, rather than shows
OBEYED = {
    *map(chr, range(0x20)),
    "\x7f",
    *map(chr, range(0x80, 0xA0)),
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
    "\u200e",
    "\u200f",
    "\u061c",
}
LAYOUT = {"\n", "\t"}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x\x1b[2J\x1b]0;pwned\x07", "x\\x1b[2J\\x1b]0;pwned\\x07"),
        ("csi\x9b31m del\x7f nul\x00", "csi\\x9b31m del\\x7f nul\\x00"),
        ("invoice_\u202egnp.exe", "invoice_\\u202egnp.exe"),
        ("\u2066isolated\u2069 \u200fmark", "\\u2066isolated\\u2069 \\u200fmark"),
        ("overwritten\rshown", "overwritten\\rshown"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("plain [red]text[/red] é ü 数据 \\x1b", "plain [red]text[/red] é ü 数据 \\x1b"),
        ("lone \udc80 surrogate", "lone \\udc80 surrogate"),
    ],
)
def test_printable_escapes_what_a_terminal_would_obey(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_one_line_also_escapes_line_breaks_and_tabs() -> None:
    assert one_line("first\nsecond\r\n\tthird\x1b") == "first\\nsecond\\r\\n\\tthird\\x1b"


def escaped(character: str) -> bool:
    return character in OBEYED - LAYOUT or 0xD800 <= ord(character) < 0xE000


@given(st.text())
def test_each_character_is_kept_or_escaped_as_printable_ascii(text: str) -> None:
    shown = printable(text)
    assert shown == "".join(printable(c) for c in text)
    for character in text:
        alone = printable(character)
        if escaped(character):
            assert alone.startswith("\\") and alone.isascii() and alone.isprintable()
        else:
            assert alone == character
    assert not (set(one_line(text)) & OBEYED)
    assert printable(shown) == shown  # escaping twice changes nothing more


@given(st.text(st.characters(exclude_categories=("Cc", "Cs", "Cf"))))
def test_text_without_controls_is_unchanged(text: str) -> None:
    assert printable(text) == text == one_line(text)


def test_echo_escapes_on_stdout_and_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    echo("reason: \x1b]0;pwned\x07")
    echo("error: \u202eevil", err=True)
    out, err = capsys.readouterr()
    assert out == "reason: \\x1b]0;pwned\\x07\n"
    assert err == "error: \\u202eevil\n"


def terminal_output(print_to: Console) -> str:
    file = print_to.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_the_console_escapes_text_and_table_cells_but_keeps_its_own_styles() -> None:
    from tidegate.render import Table, TerminalConsole

    console = TerminalConsole(
        file=io.StringIO(), force_terminal=True, color_system="standard", markup=False, width=120
    )
    table = Table("event", "reason")
    table.add_row("pause", "x\x1b[2J\x1b]0;pwned\x07 two\nlines")
    console.print(table)
    console.print("last attempt failed: \u202eevil\x9b")
    written = terminal_output(console)
    assert "x\\x1b[2J\\x1b]0;pwned\\x07 two\\nlines" in written  # one line in its cell
    assert "last attempt failed: \\u202eevil\\x9b" in written
    # the table's header is still bold: the console's own escapes are not text from a user
    assert "\x1b[1m" in written
    assert "\x1b]" not in written and "\x07" not in written and "\u202e" not in written


def test_text_that_names_an_emoji_is_printed_as_it_is() -> None:
    from tidegate.render import console

    with console.capture() as captured:
        console.print("reason: see :warning: in the :smile: column")
    assert captured.get() == "reason: see :warning: in the :smile: column\n"
