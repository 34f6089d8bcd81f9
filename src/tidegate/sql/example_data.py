"""The reference `orders` source (docs/design.md §2), generated deterministically inside the engine.

Pseudo-random fields come from integer mixing of the row number and the seed, so the same
(rows per day, seed) gives the same rows on every machine and engine version.
"""

from __future__ import annotations

DAYS = 365
FIRST_DAY = "2025-01-01"

# Named parameters: $rows_per_day, $seed. No identifier or value is pasted into this text.
CREATE_ORDERS = """
CREATE TABLE orders AS
WITH numbered AS (
    SELECT
        n AS i,
        n // $rows_per_day AS day_index,
        (n * 2654435761 + $seed * 40503 + 11) % 1000003 AS r1,
        (n * 40503 + $seed * 2654435761 + 29) % 1000033 AS r2,
        (n * 97 + $seed * 7919 + 3) % 1000037 AS r3
    FROM range(CAST($days AS BIGINT) * $rows_per_day) AS t(n)
),
priced AS (
    SELECT
        i, day_index, r1, r2, r3,
        CASE WHEN r2 % 100 < 80 THEN 'completed'
             WHEN r2 % 100 < 92 THEN 'shipped'
             WHEN r2 % 100 < 97 THEN 'cancelled'
             ELSE 'refunded' END AS status,
        1000 + r1 % 49000 AS gross_cents,
        ((1000 + r1 % 49000) * ((r3 % 4) * 5)) // 100 AS discount_cents
    FROM numbered
)
SELECT
    CAST(i + 1 AS BIGINT) AS order_id,
    CAST(DATE '2025-01-01' AS TIMESTAMP)
        + to_days(CAST(day_index AS INTEGER))
        + to_seconds((r1 * 7 + r3) % 86400) AS order_ts,
    CAST(r3 % 50000 + 1 AS BIGINT) AS customer_id,
    status,
    CAST(gross_cents * 0.01 AS DECIMAL(18, 2)) AS gross_amount,
    CAST(discount_cents * 0.01 AS DECIMAL(18, 2)) AS discount,
    CAST((CASE WHEN status = 'refunded' THEN gross_cents - discount_cents
               WHEN r3 % 50 = 0 THEN (gross_cents - discount_cents) // 2
               ELSE 0 END) * 0.01 AS DECIMAL(18, 2)) AS refund
FROM priced
ORDER BY order_id
"""

# The demo's second story: a bad load gives one order of a day an unknown status ($day: the
# day's start), which the model's accepted_values check stops; the repair restores it.
BREAK_ONE_ORDER = """
UPDATE orders SET status = 'lost'
WHERE order_id = (
    SELECT min(order_id) FROM orders
    WHERE order_ts >= $day AND order_ts < $day + INTERVAL 1 DAY
)
"""
REPAIR_ORDERS = "UPDATE orders SET status = 'completed' WHERE status = 'lost'"

# Every generated order, to copy into another engine's warehouse.
ORDER_ROWS = "SELECT * FROM orders ORDER BY order_id"
