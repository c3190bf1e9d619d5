"""Import docker-py without paramiko unless an ssh:// engine needs it.

docker-py imports paramiko (and with it invoke and unittest.mock: ~130 ms, a quarter of
a one-cell sweep's overhead) for its ssh:// transport alone. `import_docker` imports
docker with paramiko hidden (docker-py skips the transport on ImportError);
`enable_ssh` adds the transport back when an ssh:// engine is asked for.
"""

from __future__ import annotations

import sys


def import_docker() -> None:
    """Import docker-py, leaving paramiko out (no-op if either is already imported)."""
    if "docker" in sys.modules or "paramiko" in sys.modules:
        return
    sys.modules["paramiko"] = None  # type: ignore[assignment]  # importing it: ImportError
    try:
        import docker  # noqa: F401
    finally:
        del sys.modules["paramiko"]


def enable_ssh() -> None:
    """Give docker-py its ssh:// transport if it was imported without paramiko."""
    import docker.api.client
    import docker.transport

    if not hasattr(docker.api.client, "SSHHTTPAdapter"):
        from docker.transport.sshconn import SSHHTTPAdapter

        docker.api.client.SSHHTTPAdapter = SSHHTTPAdapter
        docker.transport.SSHHTTPAdapter = SSHHTTPAdapter
