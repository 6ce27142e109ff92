# The Spark Thrift Server fixture (session-scoped; started only by tests that ask for it).
from tests.functional.thrift_server import spark_thrift_server  # noqa: F401
