-- Append-only fact table: each run appends the orders of day `var('day')`, and every appended
-- row is mirrored as an insert record to the Kafka topic `shop.orders` (log options are set in
-- dbt_project.yml and models/marts/schema.yml, in dbt's underscored spelling).
{{ config(
    materialized='incremental',
    incremental_strategy='append',
    file_format='parquet',
    unique_key='order_id'
) }}

select
    order_id,
    customer_id,
    order_date,
    ordered_at,
    status,
    amount,
    coupon_code,
    load_day
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where load_day = {{ var('day', 1) }}
{% endif %}
