{#-- Steps of the commit protocol shared by the logged materializations
     (see dbt/adapters/logstore/commit_protocol.py for the order and why). --#}

{% macro logstore_relation(target_relation, suffix) -%}
  {{ return(target_relation.incorporate(
       path={"identifier": target_relation.identifier ~ '__logstore_' ~ suffix}, type='table')) }}
{%- endmacro %}


{% macro logstore_set_tblproperties(relation, properties) -%}
  {%- call statement('logstore_tblproperties') -%}
    alter table {{ relation }} set tblproperties (
      {%- for key, value in properties.items() %}
      '{{ key }}' = '{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ "," if not loop.last }}
      {%- endfor %}
    )
  {%- endcall -%}
{%- endmacro %}


{#-- Before anything changes: the log is reachable, its topic exists, and a change set that a
     failed run left behind is settled (re-sent if its table commit happened, else dropped). --#}
{% macro logstore_begin(log_config, target_relation) -%}
  {%- do adapter.logstore_prepare(log_config) -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- set leftover = adapter.get_relation(database=changes.database, schema=changes.schema,
                                          identifier=changes.identifier) -%}
  {%- if leftover is not none -%}
    {%- set existing = adapter.get_relation(database=target_relation.database,
                                            schema=target_relation.schema,
                                            identifier=target_relation.identifier) -%}
    {%- set pending = adapter.logstore_pending_changeset(leftover, existing) -%}
    {%- if pending -%}
      {{ log("logstore: re-sending change set " ~ pending ~ " of " ~ target_relation ~ " left by a failed run", info=true) }}
      {%- do logstore_finish(log_config, existing, leftover, pending) -%}
    {%- else -%}
      {%- do adapter.drop_relation(leftover) -%}
    {%- endif -%}
  {%- endif -%}
  {%- do adapter.drop_relation(logstore_relation(target_relation, 'new')) -%}
{%- endmacro %}


{% macro logstore_stage(staging_relation, compiled_code) -%}
  {%- call statement('main') -%}
    {{ create_table_as(False, staging_relation, compiled_code) }}
  {%- endcall -%}
{%- endmacro %}


{% macro logstore_build_changes(log_config, changes_relation, new_relation, old_relation=none, partition_by=none) -%}
  {%- call statement('logstore_changes') -%}
    create table {{ changes_relation }} using parquet
    tblproperties ('logstore.changeset.id' = '{{ invocation_id }}')
    as {{ adapter.logstore_change_sql(log_config, new_relation, old_relation, partition_by) }}
  {%- endcall -%}
{%- endmacro %}


{#-- After the table commit: stream the change set to the log_config, then mark it mirrored. --#}
{% macro logstore_finish(log_config, target_relation, changes_relation, changeset_id) -%}
  {%- set response = adapter.logstore_mirror(log_config, changes_relation, target_relation) -%}
  {%- do logstore_set_tblproperties(target_relation, {'logstore.changeset.mirrored': changeset_id}) -%}
  {%- do adapter.drop_relation(changes_relation) -%}
  {{ return(response) }}
{%- endmacro %}


{#-- Replace the table's rows (table models, first and full-refresh builds of incremental
     models): stage the new rows, diff them against the old table, then swap the staged table
     in. The staged table carries the change-set tag, so tag and rows commit together. --#}
{% macro logstore_replace_table(log_config, target_relation, old_relation, compiled_code) -%}
  {%- set staging = logstore_relation(target_relation, 'new') -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- do logstore_stage(staging, compiled_code) -%}
  {%- do adapter.logstore_check_unique(log_config, staging) -%}
  {%- set prior = old_relation if (old_relation is not none and old_relation.is_table) else none -%}
  {%- do logstore_build_changes(log_config, changes, staging, prior) -%}
  {%- do logstore_set_tblproperties(staging, adapter.logstore_properties(log_config, invocation_id)) -%}
  {%- if old_relation is not none -%}
    {%- do adapter.drop_relation(old_relation) -%}
  {%- endif -%}
  {%- do adapter.rename_relation(staging, target_relation) -%}
  {%- set response = logstore_finish(log_config, target_relation, changes, invocation_id) -%}
  {%- do store_result('main', response=response) -%}
{%- endmacro %}
