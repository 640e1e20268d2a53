"""Run ``python -m shared.redrive run`` with a hook that, at the point named by argv[2] (``send``: after the
copies were sent; ``archive``: after the archive file was written) and before the dead-lettered originals
are completed, writes the marker file named by argv[1] and then waits to be killed.

Used by the SIGKILL tests; settings come from the environment like the real CLI's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from shared.redrive.cli import main
from shared.redrive.message import DeadLetter
from shared.redrive.runner import RunHooks


def pause_forever(handled: Sequence[DeadLetter]) -> None:
    Path(sys.argv[1]).write_text(",".join(str(d.message_id) for d in handled))
    time.sleep(600)


if __name__ == "__main__":
    hooks = (
        RunHooks(after_send=pause_forever) if sys.argv[2] == "send" else RunHooks(after_archive=pause_forever)
    )
    sys.exit(main(["run", "--receive-wait", "0.3"], hooks=hooks))
