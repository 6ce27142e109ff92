{#-- A logged snapshot (SCD type 2): its rows after the run are staged, as dbt's snapshot MERGE
     would leave them (adapter.logstore_snapshot_rows_sql over dbt's own staging of the source:
     snapshot_staging_table with the model's strategy and hard_deletes), diffed against the
     snapshot's table keyed by dbt_scd_id, and swapped in: new versions are logged as inserts,
     closed versions as updates (their dbt_valid_to). It runs on every file format, parquet and
     orc included (dbt-spark's own snapshot needs delta, iceberg or hudi for MERGE). An unlogged
     snapshot is dbt-spark's. --#}
{% materialization snapshot, adapter='logstore' -%}
  {%- set log_config = adapter.logstore_config(model) -%}
  {%- if not log_config.enabled -%}
    {{ return(materialization_snapshot_spark()) }}
  {%- endif -%}

  {%- set grant_config = config.get('grants') -%}
  {%- set target_relation_exists, target_relation = get_or_create_relation(
        database=none, schema=model.schema, identifier=model.get('alias', model.get('name')), type='table') -%}
  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}
  {%- set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() -%}
  {%- set strategy = strategy_dispatch(config.get('strategy'))(model, "snapshotted_data", "source_data",
                                                                 model['config'], target_relation_exists) -%}
  {%- set reduced_inputs = adapter.logstore_reduced_inputs() -%}
  {%- if reduced_inputs -%}
    {{ return(logstore_reduced_run(log_config, target_relation, reduced_inputs,
                                   build_snapshot_table(strategy, model['compiled_code']))) }}
  {%- endif -%}

  {#-- a log that goes on keeps the shape its topic holds --#}
  {%- set log_config = adapter.logstore_continue_log(log_config, target_relation) -%}
  {%- set partitions = logstore_begin(log_config, target_relation, config.get('partition_by')) -%}
  {{ run_hooks(pre_hooks) }}

  {%- set old_relation = adapter.get_relation(database=none, schema=model.schema, identifier=target_relation.identifier) -%}
  {%- set staging = logstore_relation(target_relation, 'new') -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- set plain = adapter.logstore_replaces_in_place(config.get('file_format'), old_relation) -%}
  {%- if old_relation is none -%}
    {%- do logstore_stage(staging, build_snapshot_table(strategy, model['compiled_code']), plain) -%}
  {%- else -%}
    {{ adapter.valid_snapshot_target(old_relation, columns) }}
    {%- set source_changes = spark_build_snapshot_staging_table(strategy, sql, old_relation) -%}
    {%- do logstore_create_table_as(staging, adapter.logstore_snapshot_rows_sql(
          old_relation, source_changes, columns, config.get('dbt_valid_to_current')), plain) -%}
    {%- do post_snapshot(source_changes) -%}
  {%- endif -%}
  {%- do logstore_build_changes(log_config, changes, staging, old_relation, unique_check=true) -%}
  {#-- no row count, as dbt-spark gives none: a count would be a Spark job of its own --#}
  {%- do logstore_swap_in(log_config, staging, target_relation, old_relation, changes, partitions, none) -%}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=False) %}
  {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
