"""The application of the migration test: it keeps inserting orders and updating their amounts
while the backfill runs, writing `net_revenue` itself (the expand phase of an expand/contract
migration). Run as `python -m tests.ranges.app_writer DSN SEED`; SIGTERM ends it, and it prints
what it did as JSON. Any error ends it at once with exit 1: the test requires none."""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from types import FrameType

import psycopg

# new orders take the ids after the generated ones: the backfill's `all` covers the first
FIRST_NEW_ID = 1_000_001
# a new order, its net_revenue computed from its own amounts as the backfill's expression does
INSERT = (
    "INSERT INTO orders (order_id, order_ts, customer_id, status, gross_amount, discount, refund, "
    "net_revenue) VALUES (%(id)s, now(), %(customer)s, 'paid', %(gross)s, %(discount)s, 0, "
    "CAST(%(gross)s::numeric - %(discount)s::numeric - 0 AS DECIMAL(18, 2)))"
)
# a new amount, and the new column computed from the row as updated (SET sees the old row)
UPDATE = (
    "UPDATE orders SET gross_amount = gross_amount + 1, "
    "net_revenue = CAST(gross_amount + 1 - discount - refund AS DECIMAL(18, 2)) "
    "WHERE order_id = %s"
)


def main(dsn: str, seed: int) -> int:
    stop = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    chance = random.Random(seed)
    inserted = updated = 0
    with psycopg.connect(dsn, autocommit=True, application_name="app") as con:
        print("ready", flush=True)
        while not stop:
            try:
                if chance.random() < 0.3:
                    values = {
                        "id": FIRST_NEW_ID + inserted,
                        "customer": chance.randrange(1000),
                        "gross": chance.randrange(10, 500),
                        "discount": chance.randrange(0, 5),
                    }
                    con.execute(INSERT, values)
                    inserted += 1
                else:
                    con.execute(UPDATE, [chance.randrange(1, 1_000_001)])
                    updated += 1
            except psycopg.Error as error:
                print(f"app error: {error}", file=sys.stderr, flush=True)
                return 1
            time.sleep(0.002)
    print(json.dumps({"inserted": inserted, "updated": updated}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
