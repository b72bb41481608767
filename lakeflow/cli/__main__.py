"""``python -m lakeflow.cli``: the ``lakeflow`` command."""

import sys

from lakeflow.cli.main import main

sys.exit(main())
