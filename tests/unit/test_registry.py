"""The registry client against a tiny in-process registry (http.server on 127.0.0.1), and
the watch logic on top of it (tag order, state, the suite matrix) with FakeRuntime.

The fake registry implements what the client relies on: `GET /v2/<name>/tags/list`
paginated with `?n=&last=` and a relative `Link: <...>; rel="next"`, and, when asked,
the Bearer challenge -> `GET /token?service=&scope=` (optionally with basic auth) ->
retry with `Authorization: Bearer`.
"""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from fakeregistry import NAME, TOKEN, Registry
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.errors import EnvironmentUnavailable, InputError, SpecError
from harness.store import RunStore
from harness.watch import (
    RegistryClient,
    WatchState,
    credentials_for,
    make_plan,
    newer_tags,
    parse_challenge,
    parse_repo,
    run_plan,
    suite_matrix,
    tag_order,
)


def tags_of(reg: Registry, credentials: tuple[str, str] | None = None) -> list[str]:
    c = RegistryClient(reg.repo, credentials)
    try:
        return c.tags()
    finally:
        c.session.close()


# --- REPO strings -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "host", "name", "api"), [
    ("nvcr.io/nvidia/tensorflow", "nvcr.io", "nvidia/tensorflow", "nvcr.io"),
    ("127.0.0.1:5000/harness-test/base", "127.0.0.1:5000", "harness-test/base", None),
    ("localhost/team/img", "localhost", "team/img", None),
    ("python", "docker.io", "library/python", "registry-1.docker.io"),
    ("pytorch/pytorch", "docker.io", "pytorch/pytorch", "registry-1.docker.io"),
    ("docker.io/library/python", "docker.io", "library/python", "registry-1.docker.io"),
])
def test_parse_repo_splits_host_and_name(text: str, host: str, name: str, api: str | None
                                         ) -> None:
    ref = parse_repo(text)
    assert (ref.host, ref.name, ref.written) == (host, name, text)
    assert ref.api_host == (api or host)
    assert ref.image("23.01") == f"{text}:23.01"


@pytest.mark.parametrize("text", ["", "a b", "nvcr.io/nvidia/tensorflow:22.12-tf1-py3",
                                  "python@sha256:abc", "Team/Image", "nvcr.io/nvidia//tf",
                                  "bad host!.io/x"])
def test_bad_repo_strings_are_input_errors(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_repo(text)
    assert info.value.exit_code == 2
    assert "fix:" in str(info.value)


def test_loopback_registries_speak_plain_http_others_https() -> None:
    assert RegistryClient(parse_repo("127.0.0.1:5000/a/b")).base == "http://127.0.0.1:5000"
    assert RegistryClient(parse_repo("nvcr.io/nvidia/tf")).base == "https://nvcr.io"
    assert RegistryClient(parse_repo("reg.lan:5000/a"), insecure=True).base == \
        "http://reg.lan:5000"


# --- tags/list, pagination, tokens --------------------------------------------------------

def test_follows_link_pagination(registry: Registry) -> None:
    registry.tags = [f"23.0{i}-cpu" for i in range(1, 6)]
    assert tags_of(registry) == registry.tags
    pages = registry.paths("/v2/")
    assert len(pages) == 3
    assert "last=23.02-cpu" in pages[1] and "last=23.04-cpu" in pages[2]


def test_bearer_challenge_gets_a_token_once_and_retries(registry: Registry) -> None:
    registry.tags = ["a1", "a2", "a3"]
    registry.auth = "bearer"
    assert tags_of(registry) == ["a1", "a2", "a3"]
    token_calls = registry.paths("/token")
    assert len(token_calls) == 1  # the token is reused for the next page
    q = parse_qs(urlsplit(token_calls[0]).query)
    assert q == {"service": ["fake-registry"], "scope": [f"repository:{NAME}:pull"]}
    listed = [h for p, h in registry.seen if p.startswith("/v2/")]
    assert "Authorization" not in listed[0]
    assert all(h.get("Authorization") == f"Bearer {TOKEN}" for h in listed[1:])


def test_access_token_field_and_basic_credentials_at_the_realm(registry: Registry) -> None:
    registry.tags = ["x"]
    registry.auth = "bearer"
    registry.token_field = "access_token"
    registry.user = ("$oauthtoken", "nvapi-secret")
    assert tags_of(registry, ("$oauthtoken", "nvapi-secret")) == ["x"]


def test_refused_credentials_exit_3_with_the_fix(registry: Registry) -> None:
    registry.tags = ["x"]
    registry.auth = "bearer"
    registry.user = ("$oauthtoken", "right")
    with pytest.raises(EnvironmentUnavailable) as info:
        tags_of(registry, ("$oauthtoken", "wrong"))
    text = str(info.value)
    assert info.value.exit_code == 3
    assert "refused the credentials" in text and "as '$oauthtoken'" in text
    assert "fix: `docker login 127.0.0.1:" in text


def test_basic_challenge_needs_credentials(registry: Registry) -> None:
    registry.tags = ["x"]
    registry.auth = "basic"
    assert tags_of(registry, ("u", "p")) == ["x"]
    with pytest.raises(EnvironmentUnavailable, match="wants a user and password"):
        tags_of(registry)


def test_unknown_repository_is_bad_input(registry: Registry) -> None:
    ref = parse_repo(f"127.0.0.1:{registry.port}/nobody/here")
    with pytest.raises(InputError, match="NAME_UNKNOWN") as info:
        RegistryClient(ref).tags()
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("status", "body", "match"), [
    (500, b"boom", "answered 500: boom"),
    (200, b"<html>not a registry</html>", "no tag list"),
    (401, b"{}", "without a Bearer challenge"),
])
def test_server_failures_are_environment_errors(registry: Registry, status: int, body: bytes,
                                                match: str) -> None:
    registry.status, registry.body = status, body
    with pytest.raises(EnvironmentUnavailable, match=match):
        tags_of(registry)


def test_unreachable_registry_exit_3_chained() -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ref = parse_repo(f"127.0.0.1:{port}/a/b")
    with pytest.raises(EnvironmentUnavailable, match="Connection refused") as info:
        RegistryClient(ref).tags()
    assert isinstance(info.value.__cause__, requests.exceptions.ConnectionError)
    assert "fix:" in str(info.value)


def test_parse_challenge() -> None:
    scheme, params = parse_challenge('Bearer realm="https://nvcr.io/proxy_auth",'
                                     'scope="repository:nvidia/tensorflow:pull"')
    assert scheme == "bearer"
    assert params == {"realm": "https://nvcr.io/proxy_auth",
                      "scope": "repository:nvidia/tensorflow:pull"}
    assert parse_challenge("Basic realm=x") == ("basic", {"realm": "x"})


def test_credentials_from_ngc_key_and_docker_config(tmp_path: Path) -> None:
    assert credentials_for("nvcr.io", {"NGC_API_KEY": "k"}) == ("$oauthtoken", "k")
    config = tmp_path / "config.json"
    auth = base64.b64encode(b"me:s3cret").decode()
    config.write_text(json.dumps({"auths": {"reg.lan:5000": {"auth": auth},
                                            "https://index.docker.io/v1/": {
                                                "username": "hub", "password": "pw"}}}))
    env = {"DOCKER_CONFIG": str(tmp_path)}
    assert credentials_for("reg.lan:5000", env) == ("me", "s3cret")
    assert credentials_for("docker.io", env) == ("hub", "pw")
    assert credentials_for("nvcr.io", env) is None
    assert credentials_for("x.io", {"DOCKER_CONFIG": str(tmp_path / "none")}) is None


# --- which tags are newer -----------------------------------------------------------------

NGC_TAGS = ["20.12-tf1-py3", "22.12-tf1-py3", "23.01-tf1-py3", "23.01-tf2-py3", "21.07-tf1-py3",
            "23.03.1-tf1-py3", "23.03-tf1-py3", "latest", "23.02-tf1-py3-igpu", "24.01-py3"]


def test_calendar_tags_keep_the_baseline_suffix_in_calendar_order() -> None:
    assert newer_tags(NGC_TAGS, "21.07-tf1-py3") == [
        "22.12-tf1-py3", "23.01-tf1-py3", "23.03-tf1-py3", "23.03.1-tf1-py3"]
    assert newer_tags(NGC_TAGS, "21.07-tf1-py3", last="23.01-tf1-py3") == [
        "23.03-tf1-py3", "23.03.1-tf1-py3"]
    assert newer_tags(NGC_TAGS, "23.01-tf2-py3") == []
    assert newer_tags(["23.12", "24.01", "24.01-x", "9.1"], "23.12") == ["24.01"]


def test_last_from_another_family_or_older_than_baseline_is_ignored() -> None:
    assert newer_tags(NGC_TAGS, "22.12-tf1-py3", last="latest") == [
        "23.01-tf1-py3", "23.03-tf1-py3", "23.03.1-tf1-py3"]
    assert newer_tags(NGC_TAGS, "23.01-tf1-py3", last="20.12-tf1-py3")[0] == "23.03-tf1-py3"


def test_other_tags_compare_as_versions_of_the_same_shape() -> None:
    tags = ["2.9.0", "2.10.0", "2.12.0", "2.12.0rc1", "2.13", "v2.14.0", "2.11.1", "latest"]
    assert newer_tags(tags, "2.9.0") == ["2.10.0", "2.11.1", "2.12.0"]
    assert tag_order("2.9.0")("2.10.0") == (2, 10, 0)
    assert tag_order("latest")("nightly") is None


def test_plan_needs_the_baseline_in_the_registry() -> None:
    repo = parse_repo("nvcr.io/nvidia/tensorflow")
    plan = make_plan(repo, "22.12-tf1-py3", NGC_TAGS, None)
    assert plan.images[:2] == ["nvcr.io/nvidia/tensorflow:22.12-tf1-py3",
                               "nvcr.io/nvidia/tensorflow:23.01-tf1-py3"]
    with pytest.raises(InputError, match="no such tag") as info:
        make_plan(repo, "19.01-tf1-py3", NGC_TAGS, None)
    assert "23.03-tf1-py3" in str(info.value)  # the fix names real tags of that kind


def test_state_round_trip_and_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "w" / "watch-state.json"
    state = WatchState.load(path)
    plan = make_plan(parse_repo("nvcr.io/nvidia/tensorflow"), "22.12-tf1-py3", NGC_TAGS, None)
    state.record(plan, tmp_path / "res", ["23.03-tf1-py3"])
    again = WatchState.load(path)
    assert again.last("nvcr.io/nvidia/tensorflow") == "23.03.1-tf1-py3"
    assert again.repos["nvcr.io/nvidia/tensorflow"]["bad"] == ["23.03-tf1-py3"]
    path.write_text("{not json")
    with pytest.raises(InputError, match="delete the file"):
        WatchState.load(path)
    path.write_text("[]")
    with pytest.raises(InputError, match="not a harness watch state"):
        WatchState.load(path)


# --- the suite and the whole check, with FakeRuntime --------------------------------------

SUITE = """\
name: watched
runtime: docker
defaults: {iterations: 300, warmup: 10, sample_every: 5, repeats: 0}
matrix:
  gpu: [none]
  scenario: [loop.py]
"""


def write_suite(tmp_path: Path, text: str = SUITE) -> Path:
    (tmp_path / "loop.py").write_text("def setup(params):\n    return None\n\n\n"
                                      "def step(state):\n    pass\n")
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def test_suite_matrix_replaces_images_and_baseline(tmp_path: Path) -> None:
    plan = make_plan(parse_repo("reg.lan/t/img"), "1.0", ["1.0", "1.1", "1.2"], "1.0")
    matrix, text = suite_matrix(write_suite(tmp_path), plan)
    assert [i.ref for i in matrix.images] == ["reg.lan/t/img:1.0", "reg.lan/t/img:1.1",
                                              "reg.lan/t/img:1.2"]
    assert matrix.baseline == "1.0"
    assert [c.id for c in matrix.cells] == ["1.0.cpu.loop", "1.1.cpu.loop", "1.2.cpu.loop"]
    assert "harness watch reg.lan/t/img" in text


def test_suite_errors_name_the_suites_line(tmp_path: Path) -> None:
    plan = make_plan(parse_repo("reg.lan/t/img"), "1.0", ["1.0", "1.1"], None)
    bad = write_suite(tmp_path, SUITE.replace("warmup: 10", "warmup: 10, iteratons: 3"))
    with pytest.raises(SpecError) as info:
        suite_matrix(bad, plan)
    assert info.value.line == 3 and "iteratons" in str(info.value)
    local = write_suite(tmp_path, SUITE.replace("runtime: docker", "runtime: local"))
    with pytest.raises(SpecError, match="runtime: docker"):
        suite_matrix(local, plan)
    # any runtime that pulls registry images runs a suite (issue 31: podman)
    on_podman = write_suite(tmp_path, SUITE.replace("runtime: docker", "runtime: podman"))
    assert suite_matrix(on_podman, plan)[0].runtime == "podman"


def test_a_leaking_new_tag_is_bad_and_the_baseline_is_not(tmp_path: Path) -> None:
    tags = ["23.01-cpu", "23.02-cpu", "23.03-cpu"]
    plan = make_plan(parse_repo("127.0.0.1:1/t/img"), "23.01-cpu", tags, None)
    matrix, _ = suite_matrix(write_suite(tmp_path), plan)
    runtime = FakeRuntime(lambda c: Behaviour(leak_per_iter=16384)
                          if c.image.label == "23.03-cpu" else Behaviour())
    store = RunStore.open(tmp_path / "reports", matrix.name, False)
    try:
        out = run_plan(plan, matrix, list(matrix.cells), runtime, store, lambda _: None)
    finally:
        store.unlock()
    assert out.bad_tags == ["23.03-cpu"]
    assert runtime.prepared == ["23.01-cpu", "23.02-cpu", "23.03-cpu"]
    assert (store.root / "report.md").is_file()
    assert out.report.meta["new_tags"] == ["23.02-cpu", "23.03-cpu"]


def test_cli_dry_run_and_no_new_tags(registry: Registry, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    registry.tags = ["23.01-cpu", "23.02-cpu", "latest"]
    suite = write_suite(tmp_path)
    repo = f"127.0.0.1:{registry.port}/{NAME}"
    state = tmp_path / "state.json"
    args = ["watch", repo, "--baseline", "23.01-cpu", "--matrix", str(suite),
            "--state", str(state)]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "new: 23.02-cpu" in out and "23.02-cpu.cpu.loop" in out
    assert not state.exists()
    plan = make_plan(registry.repo, "23.01-cpu", registry.tags, None)
    WatchState.load(state).record(plan, tmp_path, [])
    assert main(args) == 0
    assert "no new tags after 23.02-cpu" in capsys.readouterr().out
    assert main(["watch", repo, "--baseline", "22.01-cpu", "--matrix", str(suite),
                 "--state", str(state)]) == 2
    assert "fix: pick an existing tag" in capsys.readouterr().err


def test_cli_watch_records_its_results_directory_as_a_sweep(
        registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a new tag, run on the fake runtime
    registry.tags = ["23.01-cpu", "23.02-cpu"]
    monkeypatch.setattr("harness.runtimes.get_runtime",
                        lambda name, docker_host=None: FakeRuntime(lambda c: Behaviour()))
    repo = f"127.0.0.1:{registry.port}/{NAME}"
    assert main(["watch", repo, "--baseline", "23.01-cpu", "--matrix",
                 str(write_suite(tmp_path)), "--state", str(tmp_path / "state.json"),
                 "--out", str(tmp_path / "r"), "-q"]) == 0
    # THEN its directory says it is a sweep of the suite, with the cells it set out to run
    [plan] = list((tmp_path / "r" / "watched").glob("*/plan.json"))
    data = json.loads(plan.read_text())
    assert (data["kind"], data["name"]) == ("sweep", "watched")
    assert isinstance(data["started"], float)
    assert sorted(c["id"] for c in data["cells"]) == ["23.01-cpu.cpu.loop", "23.02-cpu.cpu.loop"]
    capsys.readouterr()
    assert main(["report", str(tmp_path / "r" / "watched")]) == 0
    assert "planned cells missing" not in capsys.readouterr().out


@pytest.mark.parametrize(("text", "said"), [
    (SUITE.replace("repeats: 0}", "repeats: 0, heap: loud}"),
     "suite.yaml:3: defaults.heap: must be one of quiet, stock, got 'loud'"),
    (SUITE + "colour: red\n", "suite.yaml:7: colour: unknown key 'colour'"),
], ids=["bad-value", "unknown-key"])
def test_cli_watch_refuses_a_wrong_suite_before_asking_the_registry(
        registry: Registry, tmp_path: Path, text: str, said: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a suite with a mistake, and a registry with no new tag (or out of reach)
    registry.tags = ["23.01-cpu"]
    suite = write_suite(tmp_path, text)
    for repo in (f"127.0.0.1:{registry.port}/{NAME}", f"127.0.0.1:1/{NAME}"):
        # WHEN it is watched, THEN the suite is refused, exit 2, named by file and key
        assert main(["watch", repo, "--baseline", "23.01-cpu", "--matrix", str(suite),
                     "--state", str(tmp_path / "state.json"), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert said in err and "registry" not in err, err
