{{ config(event_time='ordered_at') }}

select
    id as order_id,
    customer_id,
    ordered_at,
    status
from {{ source('raw', 'orders') }}
