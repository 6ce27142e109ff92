-- Downstream of `customers`, fed by its log instead of its files: logstore_changes() gives the
-- changes committed to `customers` since this table last read it (its first run reads the
-- table itself), one row per key with normalize=true, with their op in `_logstore_op`.
-- A customer who leaves the gold tier (or is deleted) becomes a delete here; the merge deletes
-- the keys whose op is 'd' and upserts the rest. This table is logged too: `crm.gold_customers`.
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='customer_id',
    **{'log.system': 'kafka', 'kafka.topic': 'crm.gold_customers', 'log.changelog-mode': 'all'}
) }}

select
    customer_id,
    full_name,
    lifetime_value,
    order_count,
    case when _logstore_op = 'd' or tier <> 'gold' then 'd' else _logstore_op end as _logstore_op
from {{ logstore_changes(ref('customers'), normalize=true) }}
