select
    cast(ordered_at as date) as order_date,
    status,
    count(*) as order_count,
    sum(amount) as revenue
from {{ ref('orders') }}
group by 1, 2
