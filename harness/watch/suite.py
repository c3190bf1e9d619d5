"""A repository's tags from a registry: Docker Registry HTTP API v2, `tags/list`, with
the bearer-token flow NGC and Docker Hub use; credentials from NGC_API_KEY or the Docker
config, anonymous otherwise. A REPO that is not a repository is an InputError (exit 2);
an unreachable registry or refused credentials EnvironmentUnavailable (exit 3)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from harness.errors import EnvironmentUnavailable, InputError

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
NGC = "nvcr.io"
NGC_USER = "$oauthtoken"
PAGE_SIZE = 1000
MAX_PAGES = 1000
TIMEOUT = (5.0, 30.0)  # connect, read (seconds)
# Docker's reference grammar: lowercase path components separated by '/'.
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::[0-9]+)?")
_PARAM = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\s]*))')
LOOPBACK = ("localhost", "127.", "[::1]")


@dataclass(frozen=True)
class RepoRef:
    """A repository as written (`nvcr.io/nvidia/tensorflow`) and where its API is."""

    written: str    # what the user wrote; image references are `written:TAG`
    host: str       # registry host[:port]; docker.io for Docker Hub
    name: str       # repository path on that host, e.g. nvidia/tensorflow, library/python

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.host == DOCKER_HUB else self.host

    @property
    def loopback(self) -> bool:
        return self.host.startswith(LOOPBACK)

    def image(self, tag: str) -> str:
        return f"{self.written}:{tag}"


def parse_repo(text: str) -> RepoRef:
    """`nvcr.io/nvidia/tensorflow`, `127.0.0.1:5000/x/y` or `python` -> RepoRef.

    The first part is a registry host when it has a '.' or ':' or is `localhost`, as
    Docker decides; otherwise the repository is on Docker Hub (`library/` for one part).

    Raises:
        InputError: empty, a tag or digest given, or not a valid repository name.
    """
    written = text.strip()
    fix = "write REPO like nvcr.io/nvidia/tensorflow or 127.0.0.1:5000/team/image"
    if not written or any(c.isspace() for c in written):
        raise InputError(f"repository {text!r} is empty or has spaces\n  fix: {fix}")
    if "@" in written:
        raise InputError(f"repository {written!r} names a digest\n  fix: pass the repository "
                         "alone; the baseline tag goes to --baseline")
    first, _, rest = written.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
        if not _HOST.fullmatch(host):
            raise InputError(f"repository {written!r}: bad registry host {host!r}\n  fix: {fix}")
    else:
        host, path = DOCKER_HUB, written
    if ":" in path:
        raise InputError(f"repository {written!r} includes a tag\n  fix: pass the repository "
                         f"alone ({written.rsplit(':', 1)[0]}) and the tag with --baseline")
    parts = path.split("/")
    bad = [p for p in parts if not _COMPONENT.fullmatch(p)]
    if bad:
        raise InputError(f"repository {written!r}: bad path component {bad[0]!r} (lowercase "
                         f"letters, digits and . _ - only)\n  fix: {fix}")
    if host == DOCKER_HUB and len(parts) == 1:
        path = f"library/{path}"
    return RepoRef(written=written, host=host, name=path)


def docker_config_path(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("DOCKER_CONFIG")
    return Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"


def credentials_for(host: str, env: Mapping[str, str] = os.environ,
                    config: Path | None = None) -> tuple[str, str] | None:
    """(user, secret) for a registry: NGC_API_KEY for nvcr.io, else the Docker config.

    Credential helpers (`credsStore`) are not consulted; an unreadable config is ignored,
    since anonymous access is enough for public repositories.
    """
    if host == NGC and env.get("NGC_API_KEY"):
        return NGC_USER, env["NGC_API_KEY"]
    path = config or docker_config_path(env)
    try:
        auths = json.loads(path.read_text(encoding="utf-8")).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return None
    keys = [host, f"https://{host}", f"http://{host}"]
    if host == DOCKER_HUB:
        keys.insert(0, "https://index.docker.io/v1/")
    for key in keys:
        entry = auths.get(key)
        if not isinstance(entry, dict):
            continue
        if entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
        try:
            user, _, secret = base64.b64decode(str(entry.get("auth", ""))).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            continue
        if user and secret:
            return user, secret
    return None


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="R",service="S"` -> ("bearer", {"realm": "R", "service": "S"})."""
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), {m[1].lower(): m[2] if m[2] is not None else m[3]
                            for m in _PARAM.finditer(rest)}


class RegistryClient:
    """Lists the tags of one repository; follows pagination and the token flow."""

    def __init__(self, repo: RepoRef, credentials: tuple[str, str] | None = None,
                 insecure: bool = False, session: requests.Session | None = None,
                 page_size: int = PAGE_SIZE):
        self.repo = repo
        self.credentials = credentials
        self.scheme = "http" if insecure or repo.loopback else "https"
        if session is None:
            session = requests.Session()
            # A registry on this machine is never behind the proxy the environment names.
            session.trust_env = not repo.loopback
        self.session = session
        self.page_size = page_size
        self._auth: dict[str, str] = {}

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.repo.api_host}"

    def tags(self) -> list[str]:
        """Every tag of the repository, in the registry's order, all pages.

        Raises:
            InputError: the registry does not know the repository.
            EnvironmentUnavailable: unreachable, refused credentials, or not a registry.
        """
        url: str | None = f"{self.base}/v2/{self.repo.name}/tags/list?n={self.page_size}"
        seen: set[str] = set()
        out: list[str] = []
        while url is not None and url not in seen and len(seen) < MAX_PAGES:
            seen.add(url)
            resp = self._get(url)
            try:
                body = resp.json()
                tags = body.get("tags") or []
            except (ValueError, AttributeError) as exc:
                raise self._unavailable(f"{url} answered {resp.status_code} with no tag list "
                                        "(is this a Docker registry?)",
                                        "check the registry host in REPO") from exc
            out.extend(str(t) for t in tags)
            nxt = resp.links.get("next", {}).get("url")
            url = urljoin(url, nxt) if nxt else None
        return out

    def _get(self, url: str) -> requests.Response:
        resp = self._request(url, self._auth)
        if resp.status_code == 401:
            self._auth = self._authorize(resp)
            resp = self._request(url, self._auth)
            if resp.status_code in (401, 403):
                raise self._denied(resp, "the registry refused the token")
        if resp.status_code == 403:
            raise self._denied(resp, "access denied")
        if resp.status_code == 404:
            raise InputError(f"{self.repo.api_host} has no repository {self.repo.name!r} "
                             f"({_errors(resp)})\n  fix: check REPO's spelling: it is "
                             "the image reference without :TAG")
        if resp.status_code >= 400:
            raise self._unavailable(f"{url} answered {resp.status_code}: {_errors(resp)}",
                                    "retry later, or check the registry host in REPO")
        return resp

    def _request(self, url: str, headers: Mapping[str, str], **kw: Any) -> requests.Response:
        try:
            return self.session.get(url, headers=dict(headers), timeout=TIMEOUT, **kw)
        except requests.exceptions.SSLError as exc:
            raise self._unavailable(f"TLS failed talking to {url}: {exc}",
                                    "for a plain-HTTP registry pass --insecure") from exc
        except requests.exceptions.RequestException as exc:
            raise self._unavailable(f"cannot reach {url}: {_reason(exc)}",
                                    "check the host and port in REPO and the network "
                                    "(and --insecure for a plain-HTTP registry)") from exc

    def _authorize(self, resp: requests.Response) -> dict[str, str]:
        """The Authorization header answering a 401's challenge."""
        scheme, params = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        if scheme == "basic":
            if self.credentials is None:
                raise self._denied(resp, "the registry wants a user and password")
            raw = ":".join(self.credentials).encode()
            return {"Authorization": f"Basic {base64.b64encode(raw).decode()}"}
        if scheme != "bearer" or not params.get("realm"):
            raise self._denied(resp, "401 without a Bearer challenge (WWW-Authenticate: "
                                     f"{resp.headers.get('WWW-Authenticate', 'absent')!r})")
        query = {"scope": params.get("scope") or f"repository:{self.repo.name}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        realm = params["realm"]
        token_resp = self._request(realm, {}, params=query, auth=self.credentials)
        if token_resp.status_code in (401, 403):
            raise self._denied(token_resp, f"the token service {realm} refused the credentials")
        try:
            body = token_resp.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError) as exc:
            raise self._unavailable(f"token service {realm} answered {token_resp.status_code} "
                                    "without JSON", "retry later") from exc
        if token_resp.status_code >= 400 or not isinstance(token, str) or not token:
            raise self._unavailable(f"token service {realm} answered "
                                    f"{token_resp.status_code} without a token", "retry later")
        return {"Authorization": f"Bearer {token}"}

    def _denied(self, resp: requests.Response, what: str) -> EnvironmentUnavailable:
        who = "anonymously" if self.credentials is None else f"as {self.credentials[0]!r}"
        if self.repo.host == NGC:
            fix = ("set NGC_API_KEY to an NGC API key (user $oauthtoken), or "
                   f"`docker login {NGC}`")
        else:
            fix = f"`docker login {self.repo.host}` (credentials are read from " \
                  f"{docker_config_path()}), and check that the repository exists"
        return self._unavailable(f"{what} for {self.repo.name} ({who}; HTTP "
                                 f"{resp.status_code}: {_errors(resp)})", fix)

    def _unavailable(self, what: str, fix: str) -> EnvironmentUnavailable:
        return EnvironmentUnavailable(f"registry {self.repo.api_host}: {what}\n  fix: {fix}")


def _reason(exc: Exception) -> str:
    """The root cause of a requests error ("[Errno 111] Connection refused"), not its
    nested reprs."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    return found[0].strip() if found else text[:300]


def _errors(resp: requests.Response) -> str:
    """The registry's error codes and messages, or the start of the body."""
    try:
        errors = resp.json().get("errors") or []
        text = "; ".join(f"{e.get('code', '?')}: {e.get('message', '')}" for e in errors)
    except (ValueError, AttributeError):
        text = ""
    return text or resp.text[:200].strip() or resp.reason or "no details"


def list_tags(repo: RepoRef, insecure: bool = False) -> list[str]:
    """Every tag of `repo`, with the credentials `credentials_for` finds.

    Raises:
        InputError: the registry does not know the repository.
        EnvironmentUnavailable: unreachable, refused credentials, or not a registry.
    """
    client = RegistryClient(repo, credentials_for(repo.host), insecure)
    try:
        return client.tags()
    finally:
        client.session.close()
