"""The engine goes away mid-cell, through a proxy socket in front of the real engine
that the test cuts: the harness sees what a dockerd restart looks like to a client
(connections broken, then refused) while other suites' containers are left alone.

Wanted (issue 7): the cell is retried once, then recorded as an error outcome.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest
from faultkit import Sweep, cell_running, cells, scenario, wait_for, write_matrix

ENGINE = "/var/run/docker.sock"


class Proxy:
    """A unix-socket forwarder to the engine that can be cut."""

    def __init__(self, path: Path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        self.conns: list[socket.socket] = []
        self.cut_event = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cut_event.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(ENGINE)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.cut_event.set()
        self.server.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


@pytest.mark.docker
def test_engine_lost_mid_cell_is_retried_once_then_an_error(tmp_path: Path) -> None:
    import docker

    sock = Path(f"/tmp/harness-fault-{os.getpid()}.sock")
    sock.unlink(missing_ok=True)
    proxy = Proxy(sock)
    m = write_matrix(tmp_path, [f"{{script: {scenario('slow.py')}, params: {{sleep: 0.02}}}}"])
    out = tmp_path / "out"
    sweep = Sweep(m, out, "-q", "--docker-host", f"unix://{sock}")
    try:
        wait_for("the cell to run", lambda: cell_running(out, "bookworm.cpu.slow"))
        proxy.cut()
        code = sweep.wait(120)
    finally:
        sweep.kill()
        proxy.cut()
        sock.unlink(missing_ok=True)
        client = docker.from_env()
        for c in client.containers.list(all=True, sparse=True, filters={"label": [
                f"harness.host={socket.gethostname()}", f"harness.pid={sweep.proc.pid}"]}):
            # the engine lives on behind the cut proxy; the sweep's own clean-up may be
            # removing the container already (409) or have removed it (404)
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                c.remove(force=True)
        client.close()
    err = sweep.stderr
    assert "Traceback" not in err, err
    assert code in (1, 3), err
    cell = cells(out)["bookworm.cpu.slow"]
    assert "engine" in cell["reason"], cell["reason"]
    assert len(cell["attempts"]) == 2, cell["attempts"]  # retried once
