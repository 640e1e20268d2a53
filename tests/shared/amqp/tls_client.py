"""The receiver as the re-drive and the console run it in Azure, in a process of its own so that OpenSSL's
default verify paths (read once per process) are the ones its environment names: ``python -m
tests.shared.amqp.tls_client <connection string> <queue>`` peeks, receives and completes one message, peeks
again, and prints what it saw as JSON. Nothing here picks a CA or an SSL domain: the connection is the
production one (proton's default client domain, peer name verified), so ``SSL_CERT_FILE`` is the only way
the emulator's CA comes to be trusted."""

from __future__ import annotations

import json
import sys

from shared.amqp.connection import Namespace
from shared.amqp.receiver import EntityReceiver


def main(connection_string: str, queue: str) -> None:
    namespace = Namespace.from_connection_string(connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        before = receiver.peek_messages(max_message_count=10)
        [received] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(received)
        after = receiver.peek_messages(max_message_count=10)
    report = {
        "url": namespace.url,
        "secure": namespace.secure,
        "peeked_before": [str(message.message_id) for message in before],
        "received": [str(received.message_id), received.body.decode("utf-8")],
        "peeked_after": [str(message.message_id) for message in after],
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
