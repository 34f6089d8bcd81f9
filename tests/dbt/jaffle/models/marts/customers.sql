select
    c.id as customer_id,
    c.name,
    min(o.ordered_at) as first_order_at,
    count(o.order_id) as order_count,
    coalesce(sum(o.amount), 0) as lifetime_value
from {{ ref('stg_customers') }} as c
left join {{ ref('orders') }} as o
    on o.customer_id = c.id
group by c.id, c.name
