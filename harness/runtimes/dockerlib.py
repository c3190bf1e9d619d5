"""Import docker-py without paramiko unless an ssh:// engine needs it (`import_docker`,
`enable_ssh`), and requests without a character-set detector: an engine answers JSON,
read as UTF-8. Why: paramiko (with invoke and unittest.mock) took ~130 ms, a quarter of a
one-cell sweep's overhead, for the ssh:// transport alone; charset_normalizer ~30-70 ms
to guess an encoding that an engine's JSON never needs (requests reads a body that names
none as UTF-8, its documented fallback, and warns that the detector is missing)."""

from __future__ import annotations

import sys
import warnings

HIDDEN = ("paramiko", "charset_normalizer", "chardet")


def import_docker() -> None:
    """Import docker-py, leaving paramiko and requests' character-set detector out
    (each left as it is where already imported; no-op once docker is)."""
    if "docker" in sys.modules:
        return
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # importing it: ImportError
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Unable to find acceptable character")
            # lazy: docker-py's one import, with paramiko and the charset detector hidden
            import docker  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]


def enable_ssh() -> None:
    """Give docker-py its ssh:// transport if it was imported without paramiko."""
    import_docker()
    client, transport = sys.modules["docker.api.client"], sys.modules["docker.transport"]
    if not hasattr(client, "SSHHTTPAdapter"):
        # lazy: paramiko (~130 ms) only where an ssh:// engine is asked for
        from docker.transport.sshconn import SSHHTTPAdapter

        client.SSHHTTPAdapter = SSHHTTPAdapter  # type: ignore[attr-defined]
        transport.SSHHTTPAdapter = SSHHTTPAdapter  # type: ignore[attr-defined]
