{% materialization table, adapter='logstore', supported_languages=['sql', 'python'] %}
  {%- set log_config = adapter.logstore_config(model) -%}
  {%- if not log_config.enabled -%}
    {{ return(materialization_table_spark()) }}
  {%- endif -%}

  {%- set identifier = model['alias'] -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set target_relation = api.Relation.create(identifier=identifier, schema=schema,
                                                database=database, type='table') -%}
  {%- set reduced_inputs = adapter.logstore_reduced_inputs() -%}
  {%- if reduced_inputs -%}
    {{ return(logstore_reduced_run(log_config, target_relation, reduced_inputs)) }}
  {%- endif -%}

  {#-- a log that goes on keeps the shape its topic holds --#}
  {%- set log_config = adapter.logstore_continue_log(log_config, target_relation) -%}
  {%- set partitions = logstore_begin(log_config, target_relation, config.get('partition_by')) -%}
  {{ run_hooks(pre_hooks) }}

  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {% do logstore_replace_table(log_config, target_relation, old_relation, compiled_code, partitions) %}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}
  {% do persist_constraints(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
