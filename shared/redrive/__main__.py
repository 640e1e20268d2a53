"""``python -m shared.redrive``: see :mod:`shared.redrive.cli`."""

import sys

from shared.redrive.cli import main

sys.exit(main())
