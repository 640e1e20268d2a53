"""Checks over the auto-forwarding graph, run when the emulator starts.

Azure checks a forwarding destination only when the source is created or updated, so two situations are
legal there and silent by nature: a destination that disappears later (here: a restart with a config
that no longer defines an entity that runtime entities forward to), and a cycle (``q1 -> q2 -> q1``,
possible through an update). Azure handles both when messages flow: a message that cannot be forwarded
is dead-lettered in the source, and one that goes round a cycle is dead-lettered with
``MaxTransferHopCountExceeded`` after four hops. The emulator does the same, and says so at start-up so
that a half-configured topology is not a surprise.

Pure functions over plain data; :mod:`emulator.server` feeds them the namespace's entities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from emulator.limits import MAX_TRANSFER_HOPS


@dataclass(frozen=True, slots=True)
class ForwardingSource:
    """A queue or subscription and where it forwards (``None``: it does not)."""

    kind: str  # "Queue" or "Subscription"
    path: str
    forward_to: str | None
    forward_dead_lettered_messages_to: str | None


def dangling_forwards(sources: Iterable[ForwardingSource], exists: Callable[[str], bool]) -> list[str]:
    """One warning per forwarding property whose destination does not exist."""
    warnings: list[str] = []
    for source in sources:
        for key, target in (
            ("ForwardTo", source.forward_to),
            ("ForwardDeadLetteredMessagesTo", source.forward_dead_lettered_messages_to),
        ):
            if target and not exists(target):
                what = "messages" if key == "ForwardTo" else "dead-lettered messages"
                warnings.append(
                    f"{source.kind} '{source.path}' has {key} '{target}', which does not exist (it is not "
                    f"in the configuration any more): its {what} will be dead-lettered in "
                    f"'{source.path}' instead of forwarded, as Azure does when a destination is missing"
                )
    return warnings


def forwarding_cycles(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected components of the forwarding graph that contain a cycle, each as a list of
    nodes in a stable order (Tarjan's algorithm, iterative: 10,000 entities must not hit recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = edges.get(node, ())
            if child < len(successors):
                work.append((node, child + 1))
                successor = successors[child]
                if successor not in index:
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return cycles


def cycle_warnings(edges: Mapping[str, Sequence[str]], label: Callable[[str], str]) -> list[str]:
    """One warning per forwarding cycle, naming its entities."""
    return [
        f"auto-forwarding cycle between {', '.join(label(node) for node in cycle)}: accepted as Azure "
        f"does; a message that goes round it is dead-lettered with MaxTransferHopCountExceeded after "
        f"{MAX_TRANSFER_HOPS} hops"
        for cycle in forwarding_cycles(edges)
    ]
