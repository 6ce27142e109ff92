-- The CRM export of day `var('day')`: each extract is a full snapshot of the customers.
select
    customer_id,
    full_name,
    -- dbt-spark's session method loads an empty CSV cell as the string 'None', not null
    -- (dbt-labs/dbt-adapters#487): turn it back into null here.
    nullif(email, 'None') as email,
    tier,
    signup_date,
    updated_at
from {{ ref('raw_customers') }}
where extract_day = {{ var('day', 1) }}
