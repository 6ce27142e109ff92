{#-- A logged seed: its CSV's rows are loaded into a staged table, diffed against the seed's
     table and swapped in, as a `table` model rebuilds (logstore_replace_table), so `dbt seed`
     logs the difference from the previous contents. An unlogged seed is dbt's own. --#}
{% materialization seed, adapter='logstore' -%}
  {%- set log_config = adapter.logstore_config(model) -%}
  {%- if not log_config.enabled -%}
    {{ return(materialization_seed_default()) }}
  {%- endif -%}

  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set agate_table = load_agate_table() -%}
  {%- do store_result('agate_table', response='OK', agate_table=agate_table) -%}

  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- if existing is not none and existing.is_view -%}
    {{ exceptions.raise_compiler_error("Cannot seed to '{}', it is a view".format(existing.render())) }}
  {%- endif -%}

  {#-- a log that goes on keeps the shape its topic holds --#}
  {%- set log_config = adapter.logstore_continue_log(log_config, target_relation) -%}
  {%- set partitions = logstore_begin(log_config, target_relation, config.get('partition_by')) -%}
  {{ run_hooks(pre_hooks) }}

  {#-- after recovery, which may have put a failed run's staged table in place --#}
  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- set staging = logstore_relation(target_relation, 'new') -%}
  {%- set changes = logstore_relation(target_relation, 'changes') -%}
  {%- do logstore_stage_csv(staging, agate_table,
                            adapter.logstore_replaces_in_place(config.get('file_format'), old_relation)) -%}
  {%- do logstore_build_changes(log_config, changes, staging, old_relation, unique_check=true) -%}
  {%- do logstore_swap_in(log_config, staging, target_relation, old_relation, changes, partitions,
                          agate_table.rows | length) -%}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}


{#-- The CSV's rows in `relation`: dbt-spark's create_csv_table and load_csv_rows, which write
     only to `this`, here for the staged table (the same column types, overrides and quoting);
     plain: a parquet table of the adapter's own (logstore_create_table_as). --#}
{% macro logstore_stage_csv(relation, agate_table, plain=false) -%}
  {%- set column_override = model['config'].get('column_types', {}) -%}
  {%- set quote_seed_column = model['config'].get('quote_columns', None) -%}
  {%- set types = [] -%}
  {%- for col_name in agate_table.column_names -%}
    {%- do types.append(column_override.get(col_name, adapter.convert_type(agate_table, loop.index0))) -%}
  {%- endfor -%}
  {%- set create_sql -%}
    create table {{ relation }} (
      {%- for col_name in agate_table.column_names -%}
        {{ adapter.quote_seed_column(col_name | string, quote_seed_column) }} {{ types[loop.index0] }}{{ ", " if not loop.last }}
      {%- endfor -%}
    )
    {%- if plain %}
    using parquet
    {%- else %}
    {{ file_format_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ comment_clause() }}
    {%- endif %}
  {%- endset -%}
  {%- do adapter.logstore_create(relation, create_sql) -%}
  {%- for chunk in agate_table.rows | batch(get_batch_size()) -%}
    {%- set bindings = [] -%}
    {%- for row in chunk -%}
      {%- do bindings.extend(row) -%}
    {%- endfor -%}
    {%- set insert_sql -%}
      insert into {{ relation }} values
      {%- for row in chunk %}
        ({%- for type in types -%} cast({{ get_binding_char() }} as {{ type }}){{ "," if not loop.last }}{%- endfor -%}){{ "," if not loop.last }}
      {%- endfor %}
    {%- endset -%}
    {%- do adapter.add_query(insert_sql, bindings=bindings, abridge_sql_log=True) -%}
  {%- endfor -%}
{%- endmacro %}
