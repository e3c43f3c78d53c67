"""Every numsim semantic, registered: importing the ``sem_*`` modules fills `semtable.TABLE`.

`lookup` is how the simulator and the support table find a binding's semantics; it lives here,
beside the imports that fill the table, so a lookup can never see a half-filled table.
"""

from __future__ import annotations

from . import sem_async, sem_base, sem_mma, sem_remote, sem_sync  # noqa: F401  (register on import)
from .semtable import TABLE, Semantic


def lookup(name: str) -> "Semantic | None":
    """The semantics of the binding `name`, or None when numsim has none."""
    return TABLE.get(name)
