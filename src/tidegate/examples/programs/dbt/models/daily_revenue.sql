-- Revenue per day and order status, from the orders tidegate exported for the batch; written
-- as Parquet into the folder tidegate reads back, audits and publishes.
{{ config(materialized='external', location=var('output') ~ '/daily_revenue.parquet') }}

SELECT
    CAST(order_ts AS DATE) AS order_date,
    status,
    count(*) AS order_count,
    CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,
    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue
FROM read_parquet('{{ var("inputs") }}/orders.parquet')
WHERE order_ts >= CAST('{{ var("start") }}' AS TIMESTAMPTZ)
  AND order_ts < CAST('{{ var("end") }}' AS TIMESTAMPTZ)
GROUP BY ALL
