"""Pure values and rules of tidegate: no I/O happens in this package."""
