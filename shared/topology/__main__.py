"""Entry point of ``python -m shared.topology`` (see :mod:`shared.topology.cli`)."""

import sys

from shared.topology.cli import run

sys.exit(run())
