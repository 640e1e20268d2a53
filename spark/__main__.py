"""``python -m spark`` runs the replay job (same as ``python -m spark.replay``)."""

from __future__ import annotations

import sys

from spark.replay import main

sys.exit(main())
