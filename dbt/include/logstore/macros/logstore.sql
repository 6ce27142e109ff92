{#-- Steps of the commit protocol shared by the logged materializations
     (see dbt/adapters/logstore/commit_protocol.py for the order and why). --#}

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


{% macro logstore_tblproperties_list(properties) -%}
  (
    {%- for key, value in properties.items() %}
    '{{ key }}' = '{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ "," if not loop.last }}
    {%- endfor %}
  )
{%- endmacro %}


{% macro logstore_set_tblproperties(relation, properties) -%}
  {%- call statement('logstore_tblproperties') -%}
    alter table {{ relation }} set tblproperties {{ logstore_tblproperties_list(properties) }}
  {%- endcall -%}
{%- endmacro %}


{#-- Before anything changes: this run takes the model's lock (one run at a time); the log
     is reachable and its topic exists; what a failed run left behind is settled (a swap it
     began is finished; its change set re-sent if its table commit happened, else dropped);
     a log that starts now (a new topic) first receives the table's current rows, and takes
     no change set of a failed run. Returns the topic's partition count. --#}
{% macro logstore_begin(log_config, target_relation, partition_by=none) -%}
  {%- do adapter.logstore_check_catalog(log_config, partition_by) -%}
  {%- do adapter.logstore_lock(log_config, target_relation, invocation_id) -%}
  {%- set partitions = adapter.logstore_prepare(log_config) -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- set leftover = adapter.get_relation(database=changes.database, schema=changes.schema,
                                          identifier=changes.identifier) -%}
  {%- set existing = adapter.get_relation(database=target_relation.database,
                                          schema=target_relation.schema,
                                          identifier=target_relation.identifier) -%}
  {%- if leftover is not none and existing is none -%}
    {#-- a run that died between dropping the old table and renaming the new one in --#}
    {%- set staged = adapter.logstore_interrupted_swap(leftover, target_relation) -%}
    {%- if staged is not none -%}
      {{ log("logstore: putting " ~ staged ~ " in place of " ~ target_relation ~ " (a failed run had committed it)", info=true) }}
      {%- do adapter.rename_relation(staged, target_relation) -%}
      {%- set existing = target_relation.incorporate(type='table') -%}
    {%- endif -%}
  {%- endif -%}
  {%- set log_starts = adapter.logstore_log_is_new(log_config, existing, partitions) -%}
  {%- if leftover is not none -%}
    {#-- a log that starts now starts from the table's rows: a failed run's change set is moot --#}
    {%- set pending = adapter.logstore_pending_changeset(leftover, existing, log_starts) -%}
    {%- if pending -%}
      {{ log("logstore: re-sending change set " ~ pending ~ " of " ~ target_relation ~ " left by a failed run", info=true) }}
      {%- do adapter.logstore_settle_sources(existing, pending) -%}
      {%- do logstore_finish(log_config, existing, leftover, pending, recovering=true) -%}
    {%- else -%}
      {%- do adapter.drop_relation(leftover) -%}
    {%- endif -%}
  {%- endif -%}
  {%- if log_starts -%}
    {{ log("logstore: " ~ target_relation ~ " starts its log in " ~ log_config.topic ~ " with the table's current rows", info=true) }}
    {%- set changeset_id = logstore_changeset_id() ~ '-start' -%}
    {%- do logstore_build_changes(log_config, changes, existing, changeset_id=changeset_id) -%}
    {%- do logstore_set_tblproperties(existing, adapter.logstore_properties(log_config, changeset_id, partitions, record_sources=false)) -%}
    {%- do logstore_finish(log_config, existing, changes, changeset_id, log_starts=true) -%}
  {%- endif -%}
  {%- do adapter.drop_relation(logstore_relation(target_relation, 'new')) -%}
  {%- do adapter.drop_relation(logstore_relation(target_relation, 'merged')) -%}
  {%- do adapter.drop_relation(logstore_relation(target_relation, 'upserts')) -%}
  {{ return(partitions) }}
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


{#-- The change set from old_relation (none: no old rows) to new_relation, as a table tagged
     with its change-set id; scope_by limits the old rows (partitions or keys replaced).
     unique_check: fail before the commit if new_relation repeats a key of a keyed log; with
     old rows the diff counts keys in its own shuffle, else a query of its own does.
     shape_of: the table new_relation's rows are inserted into by column name. --#}
{% macro logstore_build_changes(log_config, changes_relation, new_relation, old_relation=none, scope_by=none, changeset_id=none, scope_relation=none, unique_check=false, shape_of=none) -%}
  {%- set changeset_id = changeset_id or logstore_changeset_id() -%}
  {%- set mark_duplicates = unique_check and old_relation is not none -%}
  {%- if unique_check and not mark_duplicates -%}
    {%- do adapter.logstore_check_unique(log_config, new_relation) -%}
  {%- endif -%}
  {%- set create_changes -%}
    create table {{ changes_relation }} using parquet {{ adapter.logstore_readable_table_options() }}
    tblproperties ('{{ adapter.logstore_names().changeset_id }}' = '{{ changeset_id }}')
    as {{ adapter.logstore_change_sql(log_config, new_relation, old_relation, scope_by, scope_relation, mark_duplicates, shape_of) }}
  {%- endset -%}
  {%- do adapter.logstore_create(changes_relation, create_changes) -%}
  {%- do adapter.logstore_check_change_set(log_config, changes_relation, mark_duplicates) -%}
{%- endmacro %}


{#-- After the table commit: write the change set to the log as the next snapshot, then record
     the snapshot (id, log offsets after it) with the table and drop the change set. --#}
{% macro logstore_finish(log_config, target_relation, changes_relation, changeset_id, rows_affected=none, recovering=false, log_starts=false) -%}
  {%- set response = adapter.logstore_mirror(log_config, changes_relation, target_relation, changeset_id,
                                             rows_affected, recovering, log_starts) -%}
  {%- do logstore_set_tblproperties(target_relation, adapter.logstore_snapshot_properties(response, changeset_id)) -%}
  {%- do adapter.drop_relation(changes_relation) -%}
  {{ return(response) }}
{%- endmacro %}


{#-- The commit of a rebuilt table, its rows and the change-set tag together, then the change set
     goes to the log. On Iceberg and Delta one `create or replace table` commits both and keeps
     the table's history (table_formats.py); otherwise the staged table, tagged, takes the
     model's name (a swap). --#}
{% macro logstore_swap_in(log_config, staged_relation, target_relation, old_relation, changes_relation, partitions, rows_affected) -%}
  {%- set properties = adapter.logstore_properties(log_config, logstore_changeset_id(), partitions, old_relation) -%}
  {%- if adapter.logstore_replaces_in_place(config.get('file_format'), old_relation) -%}
    {%- call statement('logstore_replace') -%}
      {{ logstore_replace_table_as(target_relation, staged_relation, properties) }}
    {%- endcall -%}
    {%- do adapter.drop_relation(staged_relation) -%}
  {%- else -%}
    {%- do logstore_set_tblproperties(staged_relation, properties) -%}
    {%- if old_relation is not none -%}
      {%- do adapter.drop_relation(old_relation) -%}
      {%- do adapter.logstore_crash_point('mid_swap') -%}
    {%- endif -%}
    {%- do adapter.rename_relation(staged_relation, target_relation) -%}
  {%- endif -%}
  {%- set response = logstore_finish(log_config, target_relation, changes_relation, logstore_changeset_id(), rows_affected) -%}
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
  {%- do logstore_swap_in(log_config, staging, target_relation, old_relation, changes, partitions,
                          adapter.logstore_row_count(staging)) -%}
{%- endmacro %}


{#-- dbt-spark's create_table_as for Iceberg and Delta, with the commit's properties next to the
     model's own `tblproperties`, so that the rows and their tag are one commit. --#}
{% macro logstore_replace_table_as(target_relation, staged_relation, properties) -%}
  {%- set all_properties = {} -%}
  {%- do all_properties.update(config.get('tblproperties') or {}) -%}
  {%- do all_properties.update(properties) -%}
  create or replace table {{ target_relation }}
  {{ file_format_clause() }}
  {{ options_clause() }}
  tblproperties {{ logstore_tblproperties_list(all_properties) }}
  {{ partition_cols(label="partitioned by") }}
  {{ clustered_cols(label="clustered by") }}
  {{ location_clause() }}
  {{ comment_clause() }}
  as select * from {{ staged_relation }}
{%- endmacro %}
