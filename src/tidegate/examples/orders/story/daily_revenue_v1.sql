/* tidegate
grain = "day"
time_column = "order_date"
start = "2025-01-01"
unique_key = ["order_date", "status"]
schedule = "0 2 * * *"

[columns]
order_date = "DATE NOT NULL"
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"
gross_revenue = "DECIMAL(18, 2) NOT NULL"

[[checks]]
type = "unique"
columns = ["order_date", "status"]

[[checks]]
type = "accepted_values"
column = "status"
values = ["completed", "shipped", "cancelled", "refunded"]

# Reconciled per partition against the source, exact to the cent.
[[reconciliations]]
name = "row_count"
source = "orders"
source_expression = "count(*)"
target_expression = "sum(order_count)"

[[reconciliations]]
name = "gross_amount"
source = "orders"
source_expression = "sum(gross_amount)"
target_expression = "sum(gross_revenue)"
*/
-- Revenue per day and order status, before net_revenue was added: the first version in the
-- demo's story. $start and $end are the partition's bounds (UTC), bound as parameters.
SELECT
    CAST(order_ts AS DATE) AS order_date,
    status,
    count(*) AS order_count,
    CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue
FROM orders
WHERE order_ts >= $start AND order_ts < $end
GROUP BY CAST(order_ts AS DATE), status
