"""Azure Table Storage keys from arbitrary text.

A ``PartitionKey`` or ``RowKey`` may not hold ``/``, ``\\``, ``#``, ``?`` or control characters, but queue
paths, session ids and message ids may: keys are the text's base64url form (unpadded), and the raw values
are kept in the entities' own properties for people and queries.
"""

from __future__ import annotations

import base64


def table_key(value: str) -> str:
    """``value`` as a table key: its UTF-8 bytes in unpadded base64url."""
    return base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")
