{{ config(event_time='paid_at') }}

select
    id as payment_id,
    order_id,
    paid_at,
    method,
    {{ cents_to_dollars('amount_cents') }} as amount
from {{ source('raw', 'payments') }}
