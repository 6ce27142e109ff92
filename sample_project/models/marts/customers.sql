-- One row per current customer with their order history. Rebuilt on every run; the log in
-- `crm.customers` receives only what changed: inserts, updates (before and after) and deletes,
-- as a Debezium change stream that Flink's debezium-json reads with no options (the defaults).
{{ config(
    materialized='table',
    unique_key='customer_id',
    **{'log.system': 'kafka', 'kafka.topic': 'crm.customers', 'log.consistency': 'transactional'}
) }}

with order_totals as (

    select
        customer_id,
        count(*) as order_count,
        cast(sum(case when status = 'completed' then amount else 0 end) as decimal(12, 2))
            as lifetime_value,
        max(ordered_at) as last_order_at
    from {{ ref('orders') }}
    group by customer_id

)

select
    c.customer_id,
    c.full_name,
    c.email,
    c.tier,
    c.signup_date,
    coalesce(o.order_count, 0) as order_count,
    coalesce(o.lifetime_value, cast(0 as decimal(12, 2))) as lifetime_value,
    o.last_order_at,
    c.updated_at
from {{ ref('stg_customers') }} c
left join order_totals o on o.customer_id = c.customer_id
