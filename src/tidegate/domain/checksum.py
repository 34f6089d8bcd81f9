"""The per-partition content checksum: order-free, but it sees duplicated rows.

(row count, sum of 64-bit row hashes mod 2^64). An XOR of row hashes would cancel a duplicated
pair of rows; a sum does not.
"""

from __future__ import annotations

from dataclasses import dataclass

MODULUS = 2**64


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
