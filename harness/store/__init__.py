"""Results directory: versioned JSON, atomic writes, a lock, and resume."""

from harness.store.results import SCHEMA, RunStore, atomic_write_text, load_json

__all__ = ["SCHEMA", "RunStore", "atomic_write_text", "load_json"]
