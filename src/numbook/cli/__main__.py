"""``python -m numbook.cli``: the same as the ``numbook`` command."""

import sys

from numbook.cli import main

sys.exit(main())
