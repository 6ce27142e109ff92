import sys

from dbt.adapters.logstore.cli.commands import main

sys.exit(main())
