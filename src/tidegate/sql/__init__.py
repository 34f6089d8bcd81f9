"""The only place SQL text is made: sqlglot expressions, quoting and transpiling."""
