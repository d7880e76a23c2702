"""Database engines: everything one database needs (connections, its SQL dialect, faults).

SQLite is the one engine today; code above the store asks these names, never an engine.
"""

from __future__ import annotations

from .sqlite import fault_of

__all__ = ["fault_of"]
