"""``python -m spmd`` == the ``spmd`` command."""

import sys

from .cli.main import main

sys.exit(main())
