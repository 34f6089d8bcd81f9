-- ephemeral (dbt_project.yml): inlined as a CTE into its consumers
select
    order_id,
    sum(amount) as amount,
    count(*) as payment_count
from {{ ref('stg_payments') }}
group by order_id
