"""Ordered endpoints: one key's events handled in publish order, and a failure that holds its key.

An ordered endpoint's input queue requires sessions; every event carries its contract's ordering key as the
``SessionId`` (:func:`shared.contracts.ordering_key`), and the trigger handles one message at a time per
session. Service Bus alone lets a dead-lettered message's successors overtake it. Busbar holds the key
instead (:mod:`shared.ordering.ordered`): the key's record in Table Storage (:mod:`shared.ordering.held_keys`)
names the blocking message, and every later message of the key is parked, in order, in the endpoint's hold
queue (:mod:`shared.ordering.parking`) until the blocker is resolved; then the parked messages are handled
first, in their original order.
"""
