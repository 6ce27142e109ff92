"""Two logged models that change between two runs (keys deleted, new and changed, over two
partitions each), for the tests of readers of a run record's cut (test_flink_at_run.py,
test_jvm_at_run.py): each reader, bounded by a record, must meet each table as that run left it."""

CONFIG = "{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2) }}"
# step 1: ids 3..32; step 2: 3-5 deleted, 33-35 new, every other name changed
CUSTOMERS = CONFIG + """
select id, concat('customer ', cast(id * {{ var('step') }} as string)) as name
from range({{ var('step') * 3 }}, {{ 30 + var('step') * 3 }}) as r(id)
"""
# step 1: ids 5..44; step 2: 5-9 deleted, 45-49 new, every other amount changed
ORDERS = CONFIG + """
select id, id % 7 + 1 as customer_id, cast(id * {{ var('step') }} / 100 as decimal(12,2)) as amount
from range({{ var('step') * 5 }}, {{ 40 + var('step') * 5 }}) as r(id)
"""
MODELS = {"customers": CUSTOMERS, "orders": ORDERS}
