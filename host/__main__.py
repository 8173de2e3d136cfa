"""``python -m pentegg``: the same as the ``pentegg`` command."""

import sys

from pentegg.cli import main

sys.exit(main())
