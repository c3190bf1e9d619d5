"""Results directory: versioned JSON, atomic writes, a lock, and resume."""

from harness.store.results import SCHEMA, RunStore, SeriesCache, atomic_write_text, load_json

__all__ = ["SCHEMA", "RunStore", "SeriesCache", "atomic_write_text", "load_json"]
