{#-- `dbt clone` of a logged model is refused before anything changes, where it would create or
     replace the model's table: a clone carries the other table's rows and properties (its
     snapshot, its log's offsets and topic), which this table's log never confirmed. Where the
     table exists and no --full-refresh is given, dbt-spark's clone does nothing, and neither do we. --#}
{%- materialization clone, adapter='logstore' -%}
  {%- set log_config = adapter.logstore_config(model) -%}
  {%- if log_config.enabled and defer_relation and (load_cached_relation(this) is none or flags.FULL_REFRESH) -%}
    {{ exceptions.raise_compiler_error(
         "Model '" ~ model.name ~ "' has a log ('log.system' = '" ~ log_config.system ~ "'): dbt clone "
         ~ "would make " ~ this ~ " a copy of " ~ defer_relation ~ ", with that table's snapshot and "
         ~ "log position, which the log of " ~ this ~ " never confirmed. Allowed: leave logged models "
         ~ "out of dbt clone (--exclude), or build them with dbt run or dbt build, which starts their own log.") }}
  {%- endif -%}
  {{ return(materialization_clone_spark()) }}
{%- endmaterialization -%}
