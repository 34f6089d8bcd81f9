/* tidegate
grain = "month"
time_column = "month"
start = "2025-01"
unique_key = ["month"]

[columns]
month = "DATE NOT NULL"
orders = "BIGINT NOT NULL"
cancelled_orders = "BIGINT NOT NULL"
gross_revenue = "DECIMAL(18, 2) NOT NULL"
net_revenue = "DECIMAL(18, 2) NOT NULL"
net_margin = "DECIMAL(9, 4)"

[[checks]]
type = "row_count"
min = 1
max = 1

[[checks]]
name = "margin_at_most_one"
type = "expression"
expression = "net_margin <= 1"
severity = "warn"
*/
-- The monthly report read by finance: one row per month.
SELECT
    month,
    CAST(sum(order_count) AS BIGINT) AS orders,
    CAST(coalesce(sum(order_count) FILTER (WHERE status = 'cancelled'), 0) AS BIGINT)
        AS cancelled_orders,
    CAST(sum(gross_revenue) AS DECIMAL(18, 2)) AS gross_revenue,
    CAST(sum(net_revenue) AS DECIMAL(18, 2)) AS net_revenue,
    CAST(sum(net_revenue) / nullif(sum(gross_revenue), 0) AS DECIMAL(9, 4)) AS net_margin
FROM monthly_revenue
WHERE month >= $start AND month < $end
GROUP BY month
