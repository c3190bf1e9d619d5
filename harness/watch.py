"""New tags of a repository, run through a suite against a baseline tag: tags newer (by
`tag_order`) than the baseline and the last checked -> sweep [baseline, new...] -> reports.
Tags come from the registry's API v2 (bearer token; NGC_API_KEY, Docker config, or none). A
bad REPO is an InputError; an unreachable registry or refused login EnvironmentUnavailable.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from harness import matrixfile
from harness.analysis.kinds import BAD
from harness.app.command import hold
from harness.errors import EnvironmentUnavailable, InputError, SpecError, interruptible
from harness.matrixfile.model import DEFAULT_RUNTIME, RUNTIMES, Cell, Matrix, abilities
from harness.matrixfile.releases import tag_order as tag_order
from harness.matrixfile.yamlsrc import Located, dump_text, load_text, read_text
from harness.report import Report, write_all
from harness.runtimes import Engines
from harness.runtimes.base import Progress, Runtime
from harness.stages.orchestrator import Sweep, SweepOutcome, prefetch_analysis
from harness.store.results import RunStore, atomic_write_text
from harness.store.runs import SWEEP
from harness.sweeping.course import plan_of

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
    A first part with '.' or ':', or `localhost`, is a host, as Docker decides.

    Raises: InputError: empty, a tag or digest given, or not a valid repository name.
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
    """(user, secret) for a registry: NGC_API_KEY for nvcr.io, else the Docker config
    (no credential helpers; an unreadable one is ignored, as anonymous access may do)."""
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
    """The root cause of a requests error, not its nested reprs."""
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


# The suite over the new tags
STATE_SCHEMA = 1


def newer_tags(tags: Iterable[str], baseline: str, last: str | None = None) -> list[str]:
    """Tags after `baseline` and after `last` (when comparable), oldest first."""
    key = tag_order(baseline)
    start = key(baseline)
    assert start is not None
    last_key = key(last) if last is not None else None
    if last_key is not None and last_key > start:
        start = last_key
    found = {t: k for t in set(tags) if (k := key(t)) is not None and k > start}
    return sorted(found, key=lambda t: (found[t], t))


@dataclass(frozen=True)
class Plan:
    """What one check runs: the baseline and the new tags of a repository."""

    repo: RepoRef
    baseline: str
    last: str | None            # the newest tag an earlier check ran (the state)
    tags: tuple[str, ...]       # every tag the registry listed
    new: tuple[str, ...]        # oldest first

    @property
    def images(self) -> list[str]:
        return [self.repo.image(t) for t in (self.baseline, *self.new)]


def make_plan(repo: RepoRef, baseline: str, tags: list[str], last: str | None) -> Plan:
    """The tags to run.

    Raises:
        InputError: the baseline tag is not in the registry.
    """
    if baseline not in tags:
        comparable = [t for t in tags if tag_order(baseline)(t) is not None]
        nearby = sorted(comparable or tags)[-8:]
        raise InputError(f"--baseline {baseline}: {repo.written} has no such tag ({len(tags)} "
                         f"tags listed)\n  fix: pick an existing tag, e.g. "
                         f"{', '.join(nearby) or '(the repository has no tags)'}")
    return Plan(repo, baseline, last, tuple(tags), tuple(newer_tags(tags, baseline, last)))


@dataclass
class WatchState:
    """The last tag checked per repository, in a JSON file written atomically."""

    path: Path
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> WatchState:
        """The state at `path`; none yet when the file is missing.

        Raises:
            InputError: the file exists but is not a watch state.
        """
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"--state {path}: cannot read a watch state ({exc})\n  fix: "
                             "delete the file to start from the baseline, or pass another "
                             "--state") from exc
        if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA or not isinstance(
                data.get("repos"), dict):
            raise InputError(f"--state {path}: not a harness watch state (schema "
                             f"{STATE_SCHEMA})\n  fix: delete it or pass another --state")
        return cls(path, data["repos"])

    def last(self, repo: str) -> str | None:
        tag = self.repos.get(repo, {}).get("last")
        return tag if isinstance(tag, str) else None

    def record(self, plan: Plan, results: Path, bad: list[str]) -> None:
        """Remember the newest tag run and save.

        Raises:
            StoreError: the state file cannot be written.
        """
        self.repos[plan.repo.written] = {
            "last": plan.new[-1], "baseline": plan.baseline, "checked": list(plan.new),
            "bad": bad, "results": str(results), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write_text(self.path, json.dumps({"schema": STATE_SCHEMA, "repos": self.repos},
                                                indent=1, sort_keys=True) + "\n")


def suite_name(file: Path) -> str:
    """The suite's `name:` (where its results go), without validating the rest.

    Raises:
        SpecError: the file cannot be read or is not YAML.
    """
    data = _read_suite(file).data
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else file.stem


def suite_matrix(file: Path, plan: Plan) -> tuple[Matrix, str]:
    """The suite over the plan's images, validated as any matrix, and its YAML text.

    Raises:
        SpecError: the suite is wrong; lines refer to `file`.
    """
    doc = _read_suite(file)
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("matrix"), dict):
        matrixfile.parse_located(doc, file)  # says what is wrong, with the line
        raise SpecError(str(file), "matrix", doc.line(("matrix",)), "must be a mapping")
    runtime = doc.data.get("runtime", DEFAULT_RUNTIME)
    if not isinstance(runtime, str) or not abilities(runtime).pulls_images:
        pulls = ", ".join(f"`runtime: {n}`" for n in RUNTIMES if abilities(n).pulls_images)
        raise SpecError(str(file), "runtime", doc.line(("runtime",)),
                        "harness watch runs registry images", f"set {pulls}")
    data = dict(doc.data)
    data["matrix"] = {**doc.data["matrix"], "image": plan.images}
    data["baseline"] = {"image": plan.images[0]}
    # Keep the suite's lines, so an error in a replaced key points at the suite's key.
    matrix = matrixfile.parse_located(Located(doc.file, data, doc.lines), file)
    generated = (f"# harness watch {plan.repo.written}: {file} with matrix.image and "
                 f"baseline replaced\n" + dump_text(data))
    return matrix, generated


def _read_suite(file: Path) -> Located:
    text = read_text(file, "pass --matrix with the path of a suite (matrix YAML) file")
    return load_text(text, str(file))


@dataclass(frozen=True)
class WatchOutcome:
    report: Report
    sweep: SweepOutcome
    bad_tags: list[str]         # new tags with a bad cell (leak, regression vs baseline...)
    paths: list[Path]
    baseline_bad: list[str]     # cell ids: the baseline itself is bad there (no comparison)


def run_plan(plan: Plan, matrix: Matrix, cells: list[Cell], runtime: Runtime, store: RunStore,
             progress: Callable[[str], None],
             runtimes: dict[str, Runtime] | None = None) -> WatchOutcome:
    """Sweep the cells and write the reports; the caller has started the runtimes.

    Raises:
        HarnessError: whatever the sweep raises (engine, image, store).
    """
    started = time.time()
    outcome = Sweep(matrix, runtime, store, progress, runtimes).run(cells, False)
    report = Report.from_results(matrix.name, outcome.results, {
        "watch": plan.repo.written, "new_tags": list(plan.new), "runtime": runtime.name,
        "started": started, "seconds": round(outcome.seconds, 3), "ran": outcome.ran,
        "reused": outcome.reused, "baseline": matrix.baseline}, store.root, outcome.series)
    paths = write_all(store, report)
    bad_refs = {r.image.ref for r in outcome.results.values() if r.verdict in BAD}
    bad = [t for t in plan.new if plan.repo.image(t) in bad_refs]
    base_bad = sorted(k for k, r in outcome.results.items()
                      if r.verdict in BAD and r.image.ref == plan.images[0])
    return WatchOutcome(report, outcome, bad, paths, base_bad)


def run_suite(plan: Plan, matrix: Matrix, text: str, cells: list[Cell], out: Path,
              docker_host: str | None, progress: Progress) -> tuple[WatchOutcome, Path]:
    """`harness watch`'s work: sweep the suite's cells (`text`: its matrix file) into a new
    directory under `out`; the outcome and the directory."""
    hold(prefetch_analysis())
    engines = Engines.for_matrix(matrix, matrix.runtime, docker_host)
    engines.start(cells, progress)  # no engine: exit 3 before any results directory exists
    with interruptible():
        store = RunStore.open(out, matrix.name, False)
        with engines.stopped(store.unlock):
            store.write("matrix.yaml", text)
            store.mark(SWEEP, matrix.name, str(store.root / "matrix.yaml"), plan_of(cells))
            progress(f"{len(cells)} cells, results in {store.root}")
            outcome = run_plan(plan, matrix, cells, engines.default, store, progress,
                               engines.by_host)
    return outcome, store.root
