{% materialization incremental, adapter='logstore', supported_languages=['sql', 'python'] -%}
  {%- set log_config = adapter.logstore_config(model) -%}
  {%- if not log_config.enabled -%}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}

  {#-- Validate early, as dbt-spark does; `merge` is allowed on every file format here, because
       where Spark has no MERGE (parquet, orc, ...) the adapter upserts by rewriting. --#}
  {%- set file_format = dbt_spark_validate_get_file_format(config.get('file_format', default='parquet')) -%}
  {%- set raw_strategy = config.get('incremental_strategy') or 'append' -%}
  {%- set strategy = raw_strategy if raw_strategy == 'merge'
                     else dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) -%}
  {%- set has_merge = file_format in ['delta', 'iceberg', 'hudi'] -%}
  {%- set unique_key = config.get('unique_key', none) -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set incremental_predicates = config.get('predicates', none) or config.get('incremental_predicates', none) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set reduced_inputs = adapter.logstore_reduced_inputs() -%}
  {%- if reduced_inputs -%}
    {{ return(logstore_reduced_run(log_config, target_relation, reduced_inputs)) }}
  {%- endif -%}

  {#-- microbatch: dbt-spark's insert_overwrite of each batch's partitions --#}
  {%- set overwrites = strategy in ['insert_overwrite', 'microbatch'] -%}
  {%- if overwrites and partition_by -%}
    {%- call statement() -%}
      set spark.sql.sources.partitionOverwriteMode = DYNAMIC
    {%- endcall -%}
  {%- endif -%}

  {#-- a log that goes on keeps the shape its topic holds --#}
  {%- set log_config = adapter.logstore_continue_log(log_config, target_relation) -%}
  {%- set partitions = logstore_begin(log_config, target_relation, config.get('partition_by')) -%}
  {{ run_hooks(pre_hooks) }}

  {%- set existing_relation = load_relation(this) -%}
  {%- if existing_relation is none or existing_relation.is_view or should_full_refresh() -%}
    {% do logstore_replace_table(log_config, target_relation, existing_relation, compiled_code, partitions) %}
  {%- else -%}
    {%- set staging = logstore_relation(target_relation, 'new') -%}
    {%- set changes = logstore_relation(target_relation, 'changes') -%}
    {#-- A real table, not a temp view: the rows committed and the rows logged must be the same
         rows even when the model's SQL is not deterministic. --#}
    {%- set plain = adapter.logstore_replaces_in_place(file_format, existing_relation) -%}
    {%- do logstore_stage(staging, compiled_code, plain) -%}
    {%- do process_schema_changes(on_schema_change, staging, existing_relation) -%}
    {%- if strategy == 'append' -%}
      {%- do adapter.logstore_check_unique(log_config, staging, existing_relation) -%}
      {#-- the rows as the insert takes them: the table's columns (on_schema_change) --#}
      {%- do logstore_build_changes(log_config, changes, staging, shape_of=existing_relation) -%}
    {%- elif overwrites -%}
      {%- do logstore_build_changes(log_config, changes, staging, existing_relation, partition_by, unique_check=true, shape_of=existing_relation) -%}
    {%- endif -%}
    {%- set op_aware = strategy == 'merge' and adapter.logstore_has_op_column(staging) -%}
    {%- set upserts = staging -%}
    {%- if op_aware -%}
      {#-- rows from logstore_changes(): keys whose op is 'd' are deleted, the rest upserted
           (each key once, deletes included: a query of its own) --#}
      {%- do adapter.logstore_check_unique(log_config, staging) -%}
      {%- set upserts = logstore_relation(target_relation, 'upserts') -%}
      {%- do logstore_create_table_as(upserts, adapter.logstore_upserts_sql(staging), plain) -%}
    {%- endif -%}
    {%- if strategy == 'merge' -%}
      {#-- the diff counts each new key in its own shuffle: a repeated one fails the run --#}
      {%- do logstore_build_changes(log_config, changes, upserts, existing_relation, log_config.unique_key,
                                    scope_relation=staging, unique_check=not op_aware) -%}
    {%- endif -%}
    {%- if strategy == 'merge' and (not has_merge or op_aware) -%}
      {#-- upsert by rewrite: old rows with other keys plus the new rows, swapped in (no row
           count, as dbt-spark gives none: a count would be a Spark job of its own) --#}
      {%- set merged = logstore_relation(target_relation, 'merged') -%}
      {%- do logstore_create_table_as(merged, adapter.logstore_upserted_rows_sql(log_config, upserts, existing_relation, staging), plain) -%}
      {%- do logstore_swap_in(log_config, merged, target_relation, existing_relation, changes, partitions, none) -%}
    {%- else -%}
      {#-- the rows the statement brings: the intent of a plain table records them, for recovery
           (an Iceberg or Delta version needs no count, and dbt-spark reports none) --#}
      {%- set rows_affected = none if plain else adapter.logstore_row_count(staging) -%}
      {#-- intent, statement, tag, log write: commit_protocol.commit_by_statement --#}
      {%- set response = adapter.logstore_commit_by_statement(
            log_config, target_relation, staging, existing_relation, changes, logstore_changeset_id(), partitions,
            dbt_spark_get_incremental_sql(strategy, staging, target_relation, existing_relation, unique_key, incremental_predicates),
            rows_affected, partition_by if overwrites else log_config.unique_key, strategy != 'append') -%}
      {%- do store_result('main', response=response) -%}
    {%- endif -%}
    {%- do adapter.drop_relation(staging) -%}
    {%- if op_aware -%}
      {%- do adapter.drop_relation(upserts) -%}
    {%- endif -%}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
