"""``python -m intentkey``: the command-line tool (see :mod:`intentkey.cli`)."""

import sys

from .cli import main

sys.exit(main())
