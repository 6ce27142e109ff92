{#-- Views cannot carry a log: check the options (a log on them is an
     error naming the model and key), then build exactly as dbt-spark does. --#}

{% materialization view, adapter='logstore' -%}
  {%- do adapter.logstore_config(model) -%}
  {{ return(materialization_view_spark()) }}
{%- endmaterialization %}

