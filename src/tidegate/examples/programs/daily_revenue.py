"""daily_revenue as a Python model: revenue per day and order status, the same rows as
models/daily_revenue.sql, computed with pyarrow from the orders of the partition's window."""

import pyarrow as pa
import pyarrow.compute as pc

import tidegate


@tidegate.model(
    grain="day",
    time_column="order_date",
    start="2025-01-01",
    unique_key=["order_date", "status"],
    sources=["orders"],
    packages=["pyarrow"],
    columns={
        "order_date": "DATE NOT NULL",
        "status": "VARCHAR NOT NULL",
        "order_count": "BIGINT NOT NULL",
        "gross_revenue": "DECIMAL(18, 2) NOT NULL",
        "net_revenue": "DECIMAL(18, 2) NOT NULL",
    },
    checks=[
        {"type": "unique", "columns": ["order_date", "status"]},
        {
            "name": "net_not_above_gross",
            "type": "expression",
            "expression": "net_revenue <= gross_revenue",
        },
    ],
    reconciliations=[
        {
            "name": "net_amount",
            "source": "orders",
            "source_expression": "sum(gross_amount - discount - refund)",
            "target_expression": "sum(net_revenue)",
        },
    ],
)
def daily_revenue(ctx: tidegate.Context) -> pa.Table:
    orders = ctx.read("orders")  # the rows of the window [ctx.start, ctx.end), as Arrow
    net = pc.subtract(pc.subtract(orders["gross_amount"], orders["discount"]), orders["refund"])
    rows = pa.table(
        {
            "order_date": pc.cast(orders["order_ts"], pa.date32()),
            "status": orders["status"],
            "gross_amount": orders["gross_amount"],
            "net_amount": net,
        }
    )
    daily = rows.group_by(["order_date", "status"]).aggregate(
        [([], "count_all"), ("gross_amount", "sum"), ("net_amount", "sum")]
    )
    # the declared types are reached by safe casts: a sum too large for DECIMAL(18, 2) fails
    return pa.table(
        {
            "order_date": daily["order_date"],
            "status": daily["status"],
            "order_count": daily["count_all"],
            "gross_revenue": daily["gross_amount_sum"],
            "net_revenue": daily["net_amount_sum"],
        }
    )
