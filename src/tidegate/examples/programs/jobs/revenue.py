"""A job outside tidegate: revenue per day and order status from the orders tidegate exported
for the batch, written as Parquet into the folder tidegate gave. It reads and writes files only:
tidegate holds the warehouse, and publishes the output once its checks pass."""

import argparse
from pathlib import Path

import duckdb

DAILY_REVENUE = """
SELECT
    CAST(order_ts AS DATE) AS order_date,
    status,
    count(*) AS order_count,
    CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,
    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue
FROM read_parquet($orders)
WHERE order_ts >= CAST($start AS TIMESTAMPTZ) AND order_ts < CAST($end AS TIMESTAMPTZ)
GROUP BY ALL
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for option in ("--start", "--end", "--inputs", "--output"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    orders = str(Path(args.inputs) / "orders.parquet")
    bounds = {"orders": orders, "start": args.start, "end": args.end}
    rows = con.sql(DAILY_REVENUE, params=bounds)
    rows.write_parquet(str(Path(args.output) / "daily_revenue.parquet"))


if __name__ == "__main__":
    main()
