{#-- The logged materializations' shared steps. The commit protocol's order is Python's
     (dbt/adapters/logstore/commit/protocol.py): each macro here that changes the table or the
     log is one call to it, with the SQL only dbt can render (the model's own statement and
     clauses). --#}

{#-- The protocol's names (dbt/adapters/logstore/names.py) come from the adapter:
     logstore_relation for the model's own relations, logstore_names for properties. --#}
{#-- The id of the change set this run commits (names.changeset_id): dbt's invocation id, and
     each microbatch batch's own. --#}
{% macro logstore_changeset_id() -%}
  {{ return(adapter.logstore_changeset_id(invocation_id, model if model is defined else none)) }}
{%- endmacro %}


{% macro logstore_relation(target_relation, kind) -%}
  {{ return(adapter.logstore_relation(target_relation, kind)) }}
{%- endmacro %}


{#-- Before anything changes (commit_protocol.begin): this run takes the model's lock; the log
     is reachable and its topic exists; what a failed run left behind is settled; a log that
     starts now first receives the table's current rows. Returns the topic's partition count. --#}
{% macro logstore_begin(log_config, target_relation, partition_by=none, resnapshot=false) -%}
  {#-- a model's build: the logged models it reads (their snapshots go into its confirmation) --#}
  {%- set built = model is defined and model.get('resource_type') in ('model', 'seed', 'snapshot') -%}
  {%- set depends_on = (model.get('depends_on') or {}).get('nodes', []) if built else none -%}
  {{ return(adapter.logstore_begin(log_config, target_relation, partition_by, invocation_id, logstore_changeset_id(), resnapshot, depends_on)) }}
{%- endmacro %}


{#-- A run from reduced inputs (dbt's --empty, --sample; run_modes.py) never reaches the log: the
     model's SQL is analysed and run for no rows; an existing table and its log stay as they
     are; a first build creates the table with the model's columns and no rows, and no log. --#}
{% macro logstore_reduced_run(log_config, target_relation, flag, sql=none) -%}
  {%- set sql = sql or compiled_code -%}
  {%- set existing = adapter.get_relation(database=target_relation.database, schema=target_relation.schema,
                                          identifier=target_relation.identifier) -%}
  {{ run_hooks(pre_hooks) }}
  {%- if existing is none -%}
    {#-- staged first: rows from logstore_changes() leave its op and snapshot columns out --#}
    {%- set staging = logstore_relation(target_relation, 'new') -%}
    {%- do logstore_stage(staging, adapter.logstore_limit_zero_sql(sql)) -%}
    {%- set rows = adapter.logstore_upserts_sql(staging) if adapter.logstore_has_op_column(staging)
                   else 'select * from ' ~ staging -%}
    {%- call statement('main') -%}
      {{ create_table_as(False, target_relation, rows) }}
    {%- endcall -%}
    {%- do adapter.drop_relation(staging) -%}
  {%- else -%}
    {%- call statement('main') -%}
      {{ adapter.logstore_limit_zero_sql(sql) }}
    {%- endcall -%}
  {%- endif -%}
  {%- do store_result('main', response=adapter.logstore_not_logged(log_config, flag, existing is none)) -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{%- endmacro %}


{#-- dbt-spark's drop; the adapter's own tables are purged (leftovers.drop_sql, why). --#}
{% macro logstore__drop_relation(relation) -%}
  {% call statement('drop_relation', auto_begin=False) -%}
    {{ adapter.logstore_drop_sql(relation) }}
  {%- endcall %}
{% endmacro %}


{#-- Every relation of the adapter's own is created through adapter.logstore_create, which
     clears what a run killed in the middle of creating it left behind (leftovers.py). --#}
{#-- plain: a parquet table of the adapter's own, for the rows an Iceberg or Delta table is
     replaced with or merged from (table_formats.replaces_in_place; a dropped Iceberg table would
     leave its directory behind); else a table as the model's config makes it, which a swap may
     put in the model's place. --#}
{% macro logstore_create_table_as(relation, sql, plain=false) -%}
  {%- if plain -%}
    {%- set create_plain -%}
      create table {{ relation }} using parquet {{ adapter.logstore_readable_table_options() }}
      as {{ sql }}
    {%- endset -%}
    {%- do adapter.logstore_create(relation, create_plain) -%}
  {%- else -%}
    {%- do adapter.logstore_create(relation, create_table_as(False, relation, sql)) -%}
  {%- endif -%}
{%- endmacro %}


{% macro logstore_stage(staging_relation, compiled_code, plain=false) -%}
  {%- do logstore_create_table_as(staging_relation, compiled_code, plain) -%}
{%- endmacro %}


{#-- The change set from new_relation's rows to old_relation's (none: no old rows), as a change
     table tagged with this run's change-set id, checked before the table commit
     (commit_protocol.build_changes: what scope_by, unique_check and shape_of do). --#}
{% macro logstore_build_changes(log_config, changes_relation, new_relation, old_relation=none, scope_by=none, scope_relation=none, unique_check=false, shape_of=none) -%}
  {%- do adapter.logstore_build_changes(log_config, changes_relation, new_relation, old_relation, scope_by,
                                        logstore_changeset_id(), scope_relation, unique_check, shape_of) -%}
{%- endmacro %}


{#-- The commit of a rebuilt table, its rows and the change-set tag together, then its log write
     (commit_protocol.commit_by_swap): on Iceberg and Delta one `create or replace table` with
     the model's clauses, which keeps the table's history; otherwise the staged table, tagged,
     takes the model's name. --#}
{% macro logstore_swap_in(log_config, staged_relation, target_relation, old_relation, changes_relation, partitions, rows_affected) -%}
  {%- set response = adapter.logstore_commit_by_swap(
        log_config, staged_relation, target_relation, old_relation, changes_relation, logstore_changeset_id(),
        partitions, rows_affected, config.get('file_format'), logstore_replace_clauses(),
        config.get('tblproperties') or {}) -%}
  {%- do store_result('main', response=response) -%}
{%- endmacro %}


{#-- Replace the table's rows (table models, first and full-refresh builds of incremental
     models): stage the new rows, diff them against the old table, swap the staged table in. --#}
{% macro logstore_replace_table(log_config, target_relation, old_relation, compiled_code, partitions) -%}
  {%- set staging = logstore_relation(target_relation, 'new') -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- set plain = adapter.logstore_replaces_in_place(config.get('file_format'), old_relation) -%}
  {%- do logstore_stage(staging, compiled_code, plain) -%}
  {%- if adapter.logstore_has_op_column(staging) -%}
    {#-- rows from logstore_changes(): deletes drop out, its op and snapshot columns are not kept --#}
    {%- set upserts = logstore_relation(target_relation, 'upserts') -%}
    {%- do logstore_create_table_as(upserts, adapter.logstore_upserts_sql(staging), plain) -%}
    {%- do adapter.drop_relation(staging) -%}
    {%- set staging = upserts -%}
  {%- endif -%}
  {%- set prior = old_relation if (old_relation is not none and old_relation.is_table) else none -%}
  {%- do logstore_build_changes(log_config, changes, staging, prior, unique_check=true) -%}
  {#-- no row count, as dbt-spark gives none: a count would be a Spark job of its own --#}
  {%- do logstore_swap_in(log_config, staging, target_relation, old_relation, changes, partitions, none) -%}
{%- endmacro %}


{#-- dbt-spark's create_table_as clauses, for a `create or replace table` of Iceberg or Delta
     (the commit adds the tblproperties: the model's own and the commit's). --#}
{% macro logstore_replace_clauses() -%}
  {{ file_format_clause() }}
  {{ options_clause() }}
  {{ partition_cols(label="partitioned by") }}
  {{ clustered_cols(label="clustered by") }}
  {{ location_clause() }}
  {{ comment_clause() }}
{%- endmacro %}
