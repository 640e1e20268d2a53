"""Everything that stops the host from starting, reported at one start.

The Functions host indexes every function at start and logs each one in error ("The 'X' function is in
error: ..." for a '%Setting%' that does not resolve, a schedule that is not one), so one start shows every
broken binding. devhost refuses to start instead of running without those functions, and collects the same
way: the startup hook's failure (``make run``'s provisioning, which reports every invalid app setting of the
app at once), each timer's schedule and each Service Bus trigger's connection. One problem is raised as
itself; several as one :class:`HostStartupProblems` listing each.
"""

from __future__ import annotations


class HostStartupProblems(Exception):
    """Several problems stopped the host from starting; ``problems`` holds each, the message lists them."""

    def __init__(self, problems: list[tuple[str, Exception]]) -> None:
        self.problems = list(problems)
        lines = [f"{len(problems)} problems stop the host from starting:"]
        for where, error in problems:
            text = f"{where}: {type(error).__name__}: {error}".replace("\n", "\n    ")
            lines.append(f"  - {text}")
        super().__init__("\n".join(lines))


class StartupProblems:
    """Collects the start-up's failures (``with problems.collect(where): ...``) to raise them together."""

    def __init__(self) -> None:
        self._found: list[tuple[str, Exception]] = []

    def collect(self, where: str) -> _Collecting:
        """A block whose :class:`Exception` is kept (with ``where`` it happened), not raised."""
        return _Collecting(self._found, where)

    def raise_any(self) -> None:
        """Raise what was collected: a single problem as itself, several as :class:`HostStartupProblems`."""
        if len(self._found) == 1:
            raise self._found[0][1]
        if self._found:
            raise HostStartupProblems(self._found)


class _Collecting:
    # A class, not contextlib.contextmanager: its __exit__ says (-> bool) that it may swallow the exception,
    # so a type checker knows the code after the block runs with the block's assignments possibly undone.
    def __init__(self, found: list[tuple[str, Exception]], where: str) -> None:
        self._found = found
        self._where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> bool:
        if isinstance(error, Exception):
            self._found.append((self._where, error))
            return True
        return False
