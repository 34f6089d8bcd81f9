-- an order's amount is the sum of its payments: never negative
select order_id, amount
from {{ ref('orders') }}
where amount < 0
