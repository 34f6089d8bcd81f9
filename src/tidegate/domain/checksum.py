"""The per-partition content checksum: order-free, but it sees duplicated rows.

(row count, sum of 64-bit row hashes mod 2^64). An XOR of row hashes would cancel a duplicated
pair of rows; a sum does not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

MODULUS = 2**64


def canonical_row(values: Sequence[str | None]) -> str:
    """The canonical text of a row whose values are already formatted as text.

    Each value is `v<length>:<text>`, NULL is `n`: unambiguous, so no two different rows (a NULL
    and the text "n", or values that differ only in where one ends) share a canonical text.
    The engines build the same text in SQL.
    """
    return "".join("n" if v is None else f"v{len(v)}:{v}" for v in values)


def row_hash(values: Sequence[str | None]) -> int:
    """64-bit row hash: the first 16 hex digits of the MD5 of the canonical row."""
    return int(hashlib.md5(canonical_row(values).encode()).hexdigest()[:16], 16)


def digest_of(rows: Sequence[Sequence[str | None]]) -> int:
    """The digest of rows whose values are already formatted as text: the sum of their row
    hashes, modulo 2^64."""
    return sum(row_hash(values) for values in rows) % MODULUS


@dataclass(frozen=True)
class Checksum:
    rows: int
    digest: int

    def __str__(self) -> str:
        return f"{self.rows}:{self.digest % MODULUS:016x}"

    @staticmethod
    def parse(text: str) -> Checksum:
        rows, _, digest = text.partition(":")
        return Checksum(int(rows), int(digest, 16))
