"""The Docker runtime over ssh:// for real: Debian's openssh-server on loopback, the
harness reaching this machine's engine through ssh://root@127.0.0.1:PORT.

docker-py's ssh transport opens an ssh session and runs `docker system dial-stdio` on
the far side, so the "remote" needs the docker CLI and an engine; here both are this
machine's. The client side trusts only the test sshd's host key and uses a throw-away
key, without reading or writing the real ~/.ssh: for docker-py's paramiko transport
through a temporary HOME (~/.ssh/config, known_hosts, id_ed25519), and for the ssh CLI
transport (`use_ssh_client`, which reads the passwd entry's home, not $HOME) through an
`ssh` shim first on PATH that adds `-F` with the same settings.

Bind mounts: the agent, the scenario directory and the output directory are mounted
from host paths. Over ssh to this same machine those paths exist, so a cell runs as
usual; a truly remote host would need them copied in (put_archive) and the output
copied back (get_archive).

Needs openssh-server (installed here with apt-get when running as root in CI, i.e.
CI=true or HARNESS_REQUIRE_DOCKER=1; otherwise skipped) and paramiko.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostkit import ensure_apt, free_port, required, stop

from harness.cli import main
from harness.runtimes.docker import DockerRuntime
from tests.resultkit import held_exit, held_ok

pytestmark = [
    pytest.mark.docker,
    # docker-py's ssh CLI transport (SSHSocket.close) terminates its `ssh` child without
    # waiting for it or closing the socket object: ResourceWarnings from docker-py, not us.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
SSHD = "/usr/sbin/sshd"
BASE = "harness-test/base:bookworm"
SCENARIOS = Path(__file__).parent / "scenarios"


def _missing(what: str) -> None:
    if required():
        pytest.fail(f"{what}; CI must provide it (see this module's docstring)", pytrace=False)
    pytest.skip(what)


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"sshd did not listen on 127.0.0.1:{port}: {log.read_text()[-2000:]}")


@dataclass
class Sshd:
    port: int
    url: str


@pytest.fixture
def sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sshd]:
    """sshd on 127.0.0.1:PORT, key-only root login, and a client HOME that trusts it."""
    ensure_apt(SSHD, "openssh-server")
    try:
        import paramiko  # noqa: F401  (docker-py's ssh:// transport)
    except ImportError:
        _missing("paramiko is not installed (docker-py needs it for ssh://)")
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        _missing("ssh-keygen is missing (apt-get install -y openssh-client)")
        return
    d = tmp_path / "sshd"
    d.mkdir()
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")],
                   check=True)
    home = tmp_path / "home"
    dot = home / ".ssh"
    dot.mkdir(parents=True, mode=0o700)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(dot / "id_ed25519")],
                   check=True)
    # The ssh session's environment is sshd's, not ours: pass DOCKER_HOST on if set.
    options = ""
    if os.environ.get("DOCKER_HOST"):
        options = f'environment="DOCKER_HOST={os.environ["DOCKER_HOST"]}" '
    (d / "authorized_keys").write_text(options + (dot / "id_ed25519.pub").read_text())
    port = free_port()
    (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitUserEnvironment yes
UsePAM no
StrictModes no
""")
    host_pub = (d / "host_key.pub").read_text().split()
    (dot / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (dot / "config").write_text(f"""\
Host 127.0.0.1
  IdentityFile {dot / 'id_ed25519'}
  IdentitiesOnly yes
  UserKnownHostsFile {dot / 'known_hosts'}
  StrictHostKeyChecking yes
  BatchMode yes
""")
    ssh = shutil.which("ssh")
    if ssh is None:
        _missing("the ssh client is missing (apt-get install -y openssh-client)")
        return
    shim = tmp_path / "bin" / "ssh"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {ssh} -F {dot / "config"} "$@"\n')
    shim.chmod(0o755)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
    log = d / "sshd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc, log)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
        yield Sshd(port, f"ssh://root@127.0.0.1:{port}")
    finally:
        # Collect docker-py's leftovers now, under this module's warning filters, not
        # at the end of the session where they would fail the run.
        gc.collect()
        stop(proc)


def test_docker_runtime_reaches_the_engine_over_ssh(sshd: Sshd) -> None:
    rt = DockerRuntime(base_url=sshd.url)
    client = rt.client  # pings, or raises EngineUnavailable with the reason
    try:
        assert client.api.base_url == "http+docker://ssh"  # the ssh transport, not the socket
        assert client.info()["ID"]
        assert rt.image_labels(BASE) is not None, f"{BASE} missing: bash images/setup-engine.sh"
    finally:
        client.close()


def test_paramiko_transport_works_too(sshd: Sshd) -> None:
    """docker-py's default ssh transport: one SSH connection, a channel per request."""
    import docker

    client = docker.DockerClient(base_url=sshd.url, use_ssh_client=False, timeout=30)
    try:
        assert client.ping()
        assert client.api.inspect_image(BASE)["Id"]
    finally:
        client.close()


def write_matrix(tmp_path: Path, hosts: str = "") -> Path:
    m = tmp_path / "m.yaml"
    m.write_text(f"""\
name: ssh
runtime: docker
{hosts}defaults: {{iterations: 200, warmup: 20, sample_every: 10, timeout: 60s}}
matrix:
  image: [{BASE}]
  gpu: [none]
  scenario: [{SCENARIOS / 'stable.py'}]
""")
    return m


def cells(out: Path) -> dict[str, dict]:
    (path,) = out.glob("ssh/*/results.json")
    found: dict[str, dict] = json.loads(path.read_text())["cells"]
    return found


def test_sweep_runs_a_cell_over_ssh(sshd: Sshd, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(["sweep", str(write_matrix(tmp_path)), "--docker-host", sshd.url,
                 "--out", str(out), "-q"])
    cell = cells(out)["bookworm.cpu.stable"]
    assert held_exit(code, cells(out)) and held_ok(cell), cell["reason"]
    assert cell["fingerprint"]["python"].startswith("3.11")


def test_matrix_hosts_list_with_an_ssh_endpoint(sshd: Sshd, tmp_path: Path) -> None:
    hosts = f"hosts: [{{name: loop, url: '{sshd.url}'}}]\n"
    out = tmp_path / "out"
    code = main(["sweep", str(write_matrix(tmp_path, hosts)), "--out", str(out), "-q"])
    found = cells(out)
    assert held_exit(code, found), found
    (cell,) = found.values()
    assert held_ok(cell) and cell["id"].startswith("loop."), (cell["id"], cell["reason"])
