"""The public import path `dbt.adapters.logstore.reader`, kept: the module is reading/reader.py."""
import sys

from dbt.adapters.logstore.reading import reader

sys.modules[__name__] = reader
