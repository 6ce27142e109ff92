-- Every order extracted up to and including day `var('day')`; each extract holds only that
-- day's new orders.
select
    order_id,
    customer_id,
    ordered_at,
    to_date(ordered_at) as order_date,
    status,
    amount,
    -- dbt-spark's session method loads an empty CSV cell as the string 'None', not null
    -- (dbt-labs/dbt-adapters#487): turn it back into null here.
    nullif(coupon_code, 'None') as coupon_code,
    extract_day as load_day
from {{ ref('raw_orders') }}
where extract_day <= {{ var('day', 1) }}
