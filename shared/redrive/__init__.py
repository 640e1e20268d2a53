"""Timer-driven dead-letter re-drive with a failure archive (issue 9).

``policy`` (reason -> action), ``decision`` (policy + guards), ``copy`` (the re-sent message), ``guards``
(loop count, duplicate window, size), ``targets`` (discovery through the management plane), ``runner``
(the run loop), ``job`` (one run from app settings), ``cli`` (``python -m shared.redrive run|plan``).
"""
