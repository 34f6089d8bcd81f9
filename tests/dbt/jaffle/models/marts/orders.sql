{# unique_key on PostgreSQL only: dbt-postgres's microbatch requires one (it merges each batch
   on it), dbt-duckdb's refuses one (it replaces each batch's rows, delete+insert). The refs are
   read in CTEs, never aliased in place: on PostgreSQL a microbatch ref renders as an aliased
   subquery (`(select ...) _dbt_et_filter_subq_stg_orders`), which takes no second alias. #}
{{
    config(
        materialized='incremental',
        incremental_strategy='microbatch',
        event_time='ordered_at',
        batch_size='day',
        begin='2025-01-01',
        unique_key=(none if target.type == 'duckdb' else 'order_id'),
        on_schema_change='fail',
    )
}}

with stg_orders as (
    select * from {{ ref('stg_orders') }}
),

order_payments as (
    select * from {{ ref('int_order_payments') }}
)

select
    stg_orders.order_id,
    stg_orders.customer_id,
    stg_orders.ordered_at,
    stg_orders.status,
    cast(coalesce(order_payments.amount, 0) as decimal(18, 2)) as amount,
    cast(coalesce(order_payments.payment_count, 0) as bigint) as payment_count
from stg_orders
left join order_payments
    on order_payments.order_id = stg_orders.order_id
