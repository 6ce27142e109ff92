"""The public import path `dbt.adapters.logstore.replay`, kept: the module is reading/replay.py."""
import sys

from dbt.adapters.logstore.reading import replay

sys.modules[__name__] = replay
