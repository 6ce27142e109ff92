{#-- Operations on logged models, for `dbt run-operation`.

     dbt run-operation logstore_recover --args '{model: orders}'
       brings the model's table and log into agreement now (what its next run does first:
       finish a failed run's commit and its log write), without building the model.
     dbt run-operation logstore_unlock --args '{model: orders}'
       removes the model's run lock, for a run known to be dead on another host. --#}

{% macro logstore_recover(model) -%}
  {%- set node = logstore_model_node(model) -%}
  {%- set log_config = adapter.logstore_config(node) -%}
  {%- if not log_config.enabled -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model ~ "' has no log to recover (config 'log.system' is not set)") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema,
                                       identifier=node.alias, type='table') -%}
  {%- do logstore_begin(log_config, target) -%}
  {%- do adapter.logstore_release_lock() -%}
  {{ log("logstore: " ~ target ~ " and its log " ~ log_config.topic ~ " agree", info=true) }}
{%- endmacro %}


{% macro logstore_unlock(model) -%}
  {%- set node = logstore_model_node(model) -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema,
                                       identifier=node.alias, type='table') -%}
  {{ log("logstore: " ~ target ~ ": " ~ adapter.logstore_unlock(target), info=true) }}
{%- endmacro %}


{% macro logstore_model_node(name) -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == name -%}
    {{ return(node) }}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("logstore: no model named '" ~ name ~ "' in this project") }}
{%- endmacro %}

