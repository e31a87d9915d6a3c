"""`python -m tfx_tabular.cli`."""

import sys

from tfx_tabular.cli.app import main

sys.exit(main())
