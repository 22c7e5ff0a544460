"""``python -m spmd`` == the ``spmd`` command."""

import sys

from .cli import main

sys.exit(main())
