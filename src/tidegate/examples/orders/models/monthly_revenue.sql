/* tidegate
grain = "month"
time_column = "month"
start = "2025-01"
unique_key = ["month", "status"]
schedule = "0 3 1 * *"

[columns]
month = "DATE NOT NULL"
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"
gross_revenue = "DECIMAL(18, 2) NOT NULL"
net_revenue = "DECIMAL(18, 2) NOT NULL"

[[checks]]
type = "unique"
columns = ["month", "status"]

[[reconciliations]]
name = "orders"
source = "daily_revenue"
source_expression = "sum(order_count)"
target_expression = "sum(order_count)"

[[reconciliations]]
name = "net_revenue"
source = "daily_revenue"
source_expression = "sum(net_revenue)"
target_expression = "sum(net_revenue)"
*/
SELECT
    CAST(date_trunc('month', order_date) AS DATE) AS month,
    status,
    CAST(sum(order_count) AS BIGINT) AS order_count,
    CAST(sum(gross_revenue) AS DECIMAL(18, 2)) AS gross_revenue,
    CAST(sum(net_revenue) AS DECIMAL(18, 2)) AS net_revenue
FROM daily_revenue
WHERE order_date >= $start AND order_date < $end
GROUP BY CAST(date_trunc('month', order_date) AS DATE), status
