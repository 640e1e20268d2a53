"""``python -m devhost.worker``: the worker process, as the Functions host starts the Python worker.

The host passes the real worker's arguments (``--host 127.0.0.1 --port <Settlement gRPC port>
--functions-grpc-max-message-length <n>``, read from ``sys.argv`` by the binding extension) and its own
channel (``--devhost-channel-fd``, one end of a socket pair); see ``devhost.worker.process_loop``.
"""

from __future__ import annotations

import argparse
import signal

from devhost.channel.frames import CHANNEL_FD_ARGUMENT
from devhost.worker.process_loop import run


def main() -> None:
    """Parse the channel argument (the worker arguments stay on ``sys.argv`` for the extension) and serve."""
    parser = argparse.ArgumentParser(prog="python -m devhost.worker", add_help=False)
    parser.add_argument(CHANNEL_FD_ARGUMENT, dest="channel_fd", type=int, required=True)
    arguments, _ = parser.parse_known_args()
    # Ctrl-C in a terminal reaches the whole process group; the host stops this worker itself once it has
    # drained (and when the host goes away, the closed channel ends the worker).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run(arguments.channel_fd)


if __name__ == "__main__":
    main()
