"""The contract with the re-drive: what ``shared.redrive`` archives, the replay sends back as it was."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from emulator.testing import EmulatorHandle
from shared.redrive.job import run_redrive
from spark.params import parse_params
from spark.properties import ORIGINAL_MESSAGE_ID_PROPERTY, REPLAY_RUN_ID_PROPERTY
from spark.replay import run
from tests.emulator.sdk_helpers import SendProperties, app_properties, drain, opened, receive
from tests.spark.management_args import management_args


def test_messages_the_redrive_archived_are_replayed_with_their_properties_past_duplicate_detection(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"redrive-replay-{uuid.uuid4().hex[:8]}", requires_duplicate_detection=True)
    sent: dict[str, SendProperties] = {
        f"poison-{n}": {"n": n, "tenant": "contoso", "NServiceBus.EnclosedMessageTypes": "Sales.OrderPlaced"}
        for n in range(5)
    }
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        sender = client.get_queue_sender(queue)
        receiver = client.get_queue_receiver(queue)
        with opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage(
                        f"body-{mid}", message_id=mid, application_properties=props, subject="Order"
                    )
                    for mid, props in sent.items()
                ]
            )
            for message in receive(receiver, len(sent), wait=2):
                # a permanent failure: the re-drive's default policy archives it instead of re-driving
                receiver.dead_letter_message(
                    message, reason="DeserializationFailed", error_description="bad json"
                )
    env = {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_SUBSCRIPTION_ID": "sub",
        "BUSBAR_RESOURCE_GROUP": "rg",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.emulator.management_token,
        "BUSBAR_REDRIVE_ENTITIES": queue,
        "BUSBAR_ARCHIVE_URL": str(tmp_path / "archive"),
    }
    redrive = run_redrive(env, run_id="redrive-1", receive_wait=0.5)
    assert redrive.totals()["archived"] == len(sent)

    def replay(run_id: str, *extra: str) -> dict[str, int]:
        params = parse_params(
            [
                *("--archive_path", str(tmp_path / "archive"), "--ledger_path", str(tmp_path / "ledger")),
                *(
                    "--report_path",
                    str(tmp_path / "report"),
                    "--connection_string",
                    emulator.connection_string,
                ),
                *("--reasons", "DeserializationFailed", "--run_ids", "redrive-1", "--replay_run_id", run_id),
                *management_args(emulator.emulator),
                *extra,
            ],
            env={},
        )
        return run(params, spark).outcomes

    # Under the original MessageIds, inside the target's duplicate-detection window, the broker would accept
    # the copies and drop them silently; the default run holds them instead (reported, not recorded as
    # sent), so nothing is lost and a later run can send them.
    assert replay("preserve-ids") == {"held": len(sent)}
    namespace = emulator.emulator.namespace
    counts = emulator.call(lambda: namespace.counts(namespace.queues[queue.lower()]))
    assert isinstance(counts, dict) and counts["activeMessageCount"] == 0
    # Without the check (the old behaviour, now an explicit choice) the report says sent and nothing
    # arrives: the silent loss the check prevents.
    assert replay("unchecked", "--duplicate_detection_check", "false") == {"sent": len(sent)}
    counts = emulator.call(lambda: namespace.counts(namespace.queues[queue.lower()]))
    assert isinstance(counts, dict) and counts["activeMessageCount"] == 0

    # The remedy: send under derived MessageIds (the failures were not recorded as sent by the checked run,
    # but the unchecked one recorded them, so this needs --force).
    assert replay("derived-ids", "--force", "--message_id_policy", "derive") == {"sent": len(sent)}
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(queue) as receiver:
            replayed = drain(receiver, len(sent), wait=2)
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            assert dead_letters.peek_messages(max_message_count=10) == []
    originals = {}
    for message in replayed:
        properties = app_properties(message)
        original = properties.pop(ORIGINAL_MESSAGE_ID_PROPERTY)
        originals[original] = message.message_id
        assert properties == {**sent[original], REPLAY_RUN_ID_PROPERTY: "derived-ids"}
        assert (str(message), message.subject) == (f"body-{original}", "Order")
    assert sorted(originals) == sorted(sent)
    assert all(new_id not in sent for new_id in originals.values())


def test_dead_lettered_messages_with_a_session_id_are_replayed_into_their_session_in_order(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    # An ordered endpoint's queue: each failed event goes back into its key's session, in the order the
    # session had, through both hops (the re-drive's archive, then the replay).
    queue = emulator.create_queue(f"ordered-replay-{uuid.uuid4().hex[:8]}", requires_session=True)
    sessions = ("c-1", "c-2")
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(f"{session}:{n}", message_id=f"{session}-{n}", session_id=session)
                    for n in range(3)
                    for session in sessions
                ]
            )
        for session in sessions:
            with client.get_queue_receiver(queue, session_id=session) as receiver:
                for message in receive(receiver, 3, wait=2):
                    receiver.dead_letter_message(
                        message, reason="DeserializationFailed", error_description="bad json"
                    )
    env = {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_SUBSCRIPTION_ID": "sub",
        "BUSBAR_RESOURCE_GROUP": "rg",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.emulator.management_token,
        "BUSBAR_REDRIVE_ENTITIES": queue,
        "BUSBAR_ARCHIVE_URL": str(tmp_path / "archive"),
    }
    assert run_redrive(env, run_id="redrive-keyed", receive_wait=0.5).totals()["archived"] == 6
    params = parse_params(
        [
            *("--archive_path", str(tmp_path / "archive"), "--ledger_path", str(tmp_path / "ledger")),
            *("--report_path", str(tmp_path / "report"), "--connection_string", emulator.connection_string),
            *("--run_ids", "redrive-keyed", "--replay_run_id", "keyed"),
            *management_args(emulator.emulator),
        ],
        env={},
    )

    assert run(params, spark).outcomes == {"sent": 6}
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        for session in sessions:
            with client.get_queue_receiver(queue, session_id=session) as receiver:
                replayed = drain(receiver, 3, wait=2)
            assert [m.message_id for m in replayed] == [f"{session}-{n}" for n in range(3)]
            assert [m.session_id for m in replayed] == [session] * 3
