# pkgutil-style namespace package shared with dbt-core and the other adapters.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
