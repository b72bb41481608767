import sys

from lakeflow.settings.example import main

sys.exit(main())
