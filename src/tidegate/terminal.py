"""Text bound for a terminal: what users, jobs and the ledger wrote is shown, never obeyed.

A reason, an approval, a stored error or a job's stderr may hold escape sequences (which clear
the screen, retitle the window or forge a hyperlink), C1 controls (which some terminals read as
escape sequences) or bidi overrides (which make a line read otherwise than it is). Every human
line passes through `printable` on its way out — `echo` here, and the rich console of
`tidegate.render` — so no caller has to remember it. JSON documents need none of it: json.dumps
(ensure_ascii) already writes every such character as a \\u escape.
"""

from __future__ import annotations

import click

# the named escapes read better than \x0a in a line that was meant to be one
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_BIDI = (
    "\u061c",  # arabic letter mark
    "\u200e",  # left-to-right mark
    "\u200f",  # right-to-left mark
    *map(chr, range(0x202A, 0x202F)),  # embeddings, overrides, pop
    *map(chr, range(0x2066, 0x206A)),  # isolates, pop
)
_OBEYED = (
    *map(chr, range(0x20)),
    "\x7f",
    *map(chr, range(0x80, 0xA0)),
    *_BIDI,
    # lone surrogates (undecodable bytes in a path) would fail the write to the terminal itself
    *map(chr, range(0xD800, 0xE000)),
)


def _escape(character: str) -> str:
    code = ord(character)
    return _NAMED.get(character) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_ONE_LINE = str.maketrans({c: _escape(c) for c in _OBEYED})
# a line break and a tab lay text out; they cannot rewrite what was printed
_LAID_OUT = str.maketrans({c: _escape(c) for c in _OBEYED if c not in "\n\t"})


def printable(text: str) -> str:
    """`text` with every control character, DEL, C1 control and bidi mark or override written
    as an escape (`\\x1b`, `\\x9b`, `\\u202e`); line breaks and tabs are kept. A backslash
    is left alone: a path or a regex in a message reads as written."""
    return text.translate(_LAID_OUT)


def one_line(text: str) -> str:
    """`printable`, and line breaks and tabs escaped too: for a value shown in one table cell
    or one line, where a line break would start a row or a line of its own."""
    return text.translate(_ONE_LINE)


def echo(message: str = "", err: bool = False) -> None:
    """Print human text on stdout (or stderr). Only JSON documents are echoed otherwise."""
    click.echo(printable(message), err=err)
