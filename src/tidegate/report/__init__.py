"""See it: the HTML report and the live local UI, read from the ledger only (docs/design.md §7).

`data` turns the ledger into a view model, `cells` is the pure calendar arithmetic behind it,
`page` puts a view model into the self-contained page and `server` serves it live.
"""
