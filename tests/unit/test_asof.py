"""`as_of:` (issue 44): days on a local image entry, their resolutions, and the day search.

No test here asks a package index: the matrix tests are validation, the day search runs
over a made-up resolution history, the one-build test seeds the resolution cache with a
wheel made here, and the unreachable index is a URL nothing listens on.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sweepkit
from fakeruntime import Behaviour

from harness import matrixfile
from harness.cli import main
from harness.culprit.search import BAD, GOOD, UNTESTABLE
from harness.days.search import Change, halvings, search_days
from harness.errors import EXIT_ENVIRONMENT, SpecError
from harness.matrixfile import releases
from harness.runtimes import resolver

DEFAULTS = {"iterations": 40, "warmup": 5, "sample_every": 5, "repeats": 0}


def load_images(tmp_path: Path, entry: dict[str, object], runtime: str = "local"
                ) -> list[tuple[str, str | None, int]]:
    path = sweepkit.write_matrix(tmp_path, [entry], gpus=["none"], runtime=runtime)
    return [(i.label, i.as_of, i.index) for i in matrixfile.load(path).images]


def spec_error(tmp_path: Path, entry: dict[str, object], runtime: str = "local") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_images(tmp_path, entry, runtime)
    return info.value


def test_a_list_of_days_is_one_image_per_day_in_day_order(tmp_path: Path) -> None:
    got = load_images(tmp_path, {"name": "app", "pip": ["aiohttp"],
                                 "as_of": ["2025-07-15", "2025-05-15"]})
    assert got == [("app@2025-05-15", "2025-05-15", 0), ("app@2025-07-15", "2025-07-15", 1)]


@pytest.mark.parametrize(("every", "days"), [
    ("1 month", ["2025-01-31", "2025-02-28", "2025-03-31", "2025-04-10"]),
    ("2 weeks", ["2025-01-31", "2025-02-14", "2025-02-28", "2025-03-14", "2025-03-28",
                 "2025-04-10"]),
    ("30 days", ["2025-01-31", "2025-03-02", "2025-04-01", "2025-04-10"]),
])
def test_a_range_steps_by_its_unit_and_ends_on_its_last_day(tmp_path: Path, every: str,
                                                            days: list[str]) -> None:
    got = load_images(tmp_path, {"name": "app", "pip": ["aiohttp"], "as_of": {
        "from": "2025-01-31", "to": "2025-04-10", "every": every}})
    assert [d for _, d, _ in got] == days


@pytest.mark.parametrize(("as_of", "where", "words"), [
    (["2025-13-01"], "matrix.image[0].as_of[0]", "YYYY-MM-DD"),
    ({"from": "2025-06-01", "to": "2025-01-01"}, "matrix.image[0].as_of.from", "swap"),
    ({"from": "2025-01-01", "to": "2025-06-01", "every": "1 fortnight"},
     "matrix.image[0].as_of.every", "1 month"),
    ({"from": "2025-01-01"}, "matrix.image[0].as_of", "to"),
    (["2025-01-01", "2025-01-01"], "matrix.image[0].as_of[1]", "once"),
    ([(dt.date.today() + dt.timedelta(days=40)).isoformat()], "matrix.image[0].as_of",
     "or before"),
    ({"from": "2000-01-01", "to": "2025-01-01", "every": "1 day"}, "matrix.image[0].as_of",
     "every: 1 month"),
])
def test_a_bad_as_of_names_its_key_and_the_fix(tmp_path: Path, as_of: object, where: str,
                                               words: str) -> None:
    err = spec_error(tmp_path, {"name": "app", "pip": ["aiohttp"], "as_of": as_of})
    assert err.path == where, str(err)
    assert words in err.fix, str(err)


def test_as_of_needs_a_pip_list_and_the_local_runtime(tmp_path: Path) -> None:
    err = spec_error(tmp_path, {"name": "app", "as_of": ["2025-01-01"]})
    assert (err.path, "pip: [aiohttp]" in err.fix) == ("matrix.image[0].as_of", True)
    err = spec_error(tmp_path / "d", {"ref": "python:3.12", "as_of": ["2025-01-01"]},
                     runtime="docker")
    assert err.path == "matrix.image[0].as_of" and "runtime: local" in err.fix


def test_a_month_step_keeps_the_day_or_the_months_last() -> None:
    assert releases.step(dt.date(2024, 1, 31), 1, "month") == dt.date(2024, 2, 29)
    assert releases.step(dt.date(2024, 11, 15), 3, "month") == dt.date(2025, 2, 15)


# ------------------------------------------------------------------ the day search
def history(changes_on: dict[str, str]) -> tuple[dict[str, int], object]:
    """A resolution history: multidict's pin changes on the given days; the resolver
    counts how often each day was asked."""
    asked: dict[str, int] = {}
    order = sorted(changes_on)

    def resolve(day: str) -> tuple[str, ...]:
        asked[day] = asked.get(day, 0) + 1
        version = "6.4.3"
        for when in order:
            if day >= when:
                version = changes_on[when]
        return ("aiohttp==3.12", f"multidict=={version}")

    return asked, resolve


def test_the_day_search_runs_only_new_resolutions_and_names_the_change() -> None:
    # 6.5.0 (still good) on 06-02, 6.6.3 (leaks) on 06-30, 61 days in all.
    asked, resolve = history({"2025-06-02": "6.5.0", "2025-06-30": "6.6.3"})
    runs: list[tuple[str, str]] = []

    def probe(day: str, pins: tuple[str, ...]) -> str:
        runs.append((day, pins[1]))
        return BAD if pins[1] == "multidict==6.6.3" else GOOD

    lines: list[str] = []
    out = search_days("cpu.s", "2025-05-15", "2025-07-15", resolve, probe, lines.append,
                      lambda name, version: f"{name}-{version}-time")
    assert (out.last_good, out.first_bad, out.found) == ("2025-06-29", "2025-06-30", True)
    assert out.changes == [Change("multidict", "6.5.0", "6.6.3", "multidict-6.6.3-time")]
    # Only 6.5.0 is new to the search: 6.4.3 is the good day's and 6.6.3 the bad day's.
    assert [pins for _, pins in runs] == ["multidict==6.5.0"]
    assert out.probes == 1
    # Each line says how many runs it took (what --find-cause counts down), not in words.
    assert sum(getattr(line, "probed", 0) for line in lines) == len(runs) == 1
    # log2 of the 60 days between, not every day: each day resolved once.
    assert out.resolutions == len(asked) <= 2 + halvings(60) == 2 + 6
    assert all(n == 1 for n in asked.values())
    assert "went bad between 2025-06-29 and 2025-06-30: multidict 6.5.0 -> 6.6.3" in (
        out.sentence())


def test_an_untestable_day_stops_the_search_and_says_where() -> None:
    _, resolve = history({"2025-06-10": "6.5.0", "2025-06-20": "6.6.3"})
    out = search_days("cpu.s", "2025-06-01", "2025-06-30", resolve,
                      lambda day, pins: UNTESTABLE, lambda s: None)
    assert not out.found and out.untestable is not None
    assert out.sentence().startswith(f"stopped: {out.untestable} ran untestable")


def test_ends_that_resolve_alike_search_nothing() -> None:
    _, resolve = history({})
    out = search_days("cpu.s", "2025-06-01", "2025-06-30", resolve,
                      lambda day, pins: pytest.fail("nothing to run"), lambda s: None)
    assert not out.found and out.probes == 0 and "same pins" in out.sentence()


# ------------------------------------------------------------------ resolving
def tiny_wheel(where: Path) -> Path:
    """A wheel of one empty module, installable with no index."""
    path = where / "tinypkg-1.0-py3-none-any.whl"
    files = {"tinypkg.py": "",
             "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\n"
                                               "Version: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
                                            "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    files["tinypkg-1.0.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + (
        "tinypkg-1.0.dist-info/RECORD,,\n")
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_two_days_that_resolve_alike_build_one_venv(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    wheel = tiny_wheel(tmp_path)
    for day in ("2025-05-15", "2025-06-15"):   # what uv would have said both days
        seeded = resolver.cache_file(cache, ["tinypkg"], day, sys.version)
        seeded.parent.mkdir(parents=True, exist_ok=True)
        seeded.write_text(json.dumps({"pins": [str(wheel)]}))
    path = sweepkit.write_matrix(
        tmp_path, [{"name": "app", "pip": ["tinypkg"], "python": sys.executable,
                    "as_of": ["2025-05-15", "2025-06-15"]}], gpus=["none"],
        defaults=DEFAULTS)
    main(["sweep", str(path), "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert out.count("building venv") == 1, out
    assert "app@2025-06-15: cached venv" in out or "app@2025-05-15: cached venv" in out
    assert len(list((cache / "venvs").iterdir())) == 2     # the venv and its lock file
    (run,) = (tmp_path / "r" / "t").iterdir()
    cells = json.loads((run / "results.json").read_text())["cells"]
    labels = [cells[f"app@{d}.cpu.loop"]["image"]["labels"] for d in ("2025-05-15",
                                                                       "2025-06-15")]
    assert [x["as_of"] for x in labels] == ["2025-05-15", "2025-06-15"]
    assert labels[0]["pins"] == labels[1]["pins"] == str(wheel)
    assert labels[0]["venv"] == labels[1]["venv"]


def test_days_the_index_is_asked_about_are_said_and_a_known_day_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    wheel = tiny_wheel(tmp_path)
    seeded = resolver.cache_file(cache, ["tinypkg"], "2025-05-15", sys.version)
    seeded.parent.mkdir(parents=True, exist_ok=True)
    seeded.write_text(json.dumps({"pins": [str(wheel)]}))
    asked: list[str] = []

    def by_uv(uv: str, reqs: list[str], day: str, python: str, label: str) -> tuple[str, ...]:
        asked.append(day)
        return (str(wheel),)

    monkeypatch.setattr(resolver, "uv_bin", lambda: "uv")
    monkeypatch.setattr(resolver, "_by_uv", by_uv)
    path = sweepkit.write_matrix(
        tmp_path, [{"name": "app", "pip": ["tinypkg"], "python": sys.executable,
                    "as_of": ["2025-05-15", "2025-06-15", "2025-07-15"]}], gpus=["none"],
        defaults=DEFAULTS)
    main(["sweep", str(path), "--out", str(tmp_path / "r")])
    text = "".join(capsys.readouterr())
    assert sorted(asked) == ["2025-06-15", "2025-07-15"]
    assert "resolving 2 dated image(s) as the package index stood on their days (1 known " \
           "from earlier sweeps)" in text, text
    assert "resolved app@2025-06-15 (" in text and "resolved app@2025-07-15 (" in text
    assert "/2): 1 pin(s)" in text
    # a second sweep asks the index nothing, and says nothing of resolving
    main(["sweep", str(path), "--out", str(tmp_path / "r2")])
    text = "".join(capsys.readouterr())
    assert len(asked) == 2 and "resolving" not in text and "resolved app@" not in text


def test_doctor_reads_a_dated_image_as_the_sweep_resolved_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor's check of a dated image is the sweep's resolution, under the same cache
    key: a day the sweep resolved is read from the cache, the index not asked."""
    from harness.matrixfile.model import ImageSpec
    from harness.runtimes.local import _image_checks

    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    monkeypatch.setattr(resolver, "uv_bin", lambda: pytest.fail("the index was asked"))
    seeded = resolver.cache_file(cache, ["aiohttp"], "2025-05-15", sys.version)
    seeded.parent.mkdir(parents=True, exist_ok=True)
    seeded.write_text(json.dumps({"pins": ["aiohttp==3.11.18", "multidict==6.4.3"]}))
    image = ImageSpec("aiohttp@2025-05-15", sys.executable, 0, pip=("aiohttp",),
                      python=sys.executable, as_of="2025-05-15")
    checks = list(_image_checks(image))
    assert checks[-1] == ("ok", "image aiohttp@2025-05-15: aiohttp resolves as of "
                                "2025-05-15 to 2 pins", ""), checks


def test_an_index_that_cannot_be_reached_exits_3_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    if resolver.uv_bin() is None:
        pytest.skip("uv is not installed (pip install uv)")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))   # nothing cached to fall on
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")   # nothing listens
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    path = sweepkit.write_matrix(tmp_path, [{"name": "app", "pip": ["aiohttp"],
                                             "as_of": ["2025-05-15"]}], gpus=["none"],
                                 defaults=DEFAULTS)
    code = main(["sweep", str(path), "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == EXIT_ENVIRONMENT, text
    assert "app@2025-05-15: the package index could not be reached" in text
    assert "fix: check the network and uv's index setting" in text
    assert "Traceback" not in text


def test_harness_day_on_a_row_of_undated_images_is_bad_input(
        fake_sweep: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 79 item 13: it searched nothing and exited 0; a directory without a dated
    image is no input `harness day` can search: exit 2, with the fix."""
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384)})
    assert run.outcome.results[f"v2.{run.cells[0].row}"].verdict == "leak"
    assert main(["day", str(run.store.root)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"harness: {run.store.root}: no dated image (as_of:) here" in err
    assert "fix: " in err and "harness culprit" in err


@pytest.mark.parametrize(("said", "kind", "words"), [
    ("error: No solution found when resolving dependencies\n  cause: Because there are no "
     "versions of aiohttp and you require aiohttp, we can conclude that your requirements "
     "are unsatisfiable.\n\nhint: `aiohttp` was filtered by `exclude-newer` to only include "
     "packages uploaded before 2012-01-03T00:00:00Z. The latest version satisfying the "
     "requirement is v4.0.0a1, published at 2019-10-09T11:29:30.939Z.",
     resolver.TooEarly, "as of 2012-01-03 (00:00 UTC): Because there are no versions"),
    ("error: Failed to fetch: http://127.0.0.1:9/simple/aiohttp/\n  cause: error sending "
     "request for url (http://127.0.0.1:9/simple/aiohttp/)\n  cause: tcp connect error\n"
     "  cause: Connection refused (os error 111)",
     resolver.Unreachable, "could not be reached to resolve aiohttp as of 2012-01-03"),
])
def test_what_uv_said_is_read_as_too_early_or_unreachable(said: str, kind: type,
                                                          words: str) -> None:
    err = resolver._failure(said, ["aiohttp"], "2012-01-03", "app@2012-01-03")
    assert isinstance(err, kind)
    assert str(err).startswith("app@2012-01-03: ") and words in str(err)
    assert "\n  fix: " in str(err)
    assert err.exit_code == (2 if kind is resolver.TooEarly else 3)


def test_an_upload_time_is_the_earliest_file_of_that_version() -> None:
    files = [{"filename": "multidict-6.5.1-cp311-cp311-manylinux_x86_64.whl",
              "upload-time": "2025-06-24T22:20:00Z"},
             {"filename": "multidict-6.5.1.tar.gz", "upload-time": "2025-06-24T22:13:46Z"},
             {"filename": "multidict-6.5.10.tar.gz", "upload-time": "2025-01-01T00:00:00Z"},
             {"filename": "multidict_extra-6.5.1.tar.gz", "upload-time": "2020-01-01T00:00:00Z"},
             {"filename": "multidict-6.4.4.tar.gz", "upload-time": "2025-05-19T00:00:00Z"}]
    assert resolver.earliest(files, "multidict", "6.5.1") == "2025-06-24T22:13:46Z"
    assert resolver.earliest(files, "multidict", "9.9") is None
    assert resolver.file_version("typing_extensions-4.14.1-py3-none-any.whl",
                                "typing-extensions") == "4.14.1"


def test_a_days_result_never_answers_for_another_day(tmp_path: Path) -> None:
    from harness.result.runkey import key_of, why_changed

    path = sweepkit.write_matrix(tmp_path, [{"name": "app", "pip": ["aiohttp"],
                                             "as_of": ["2025-05-15", "2025-07-15"]}],
                                 gpus=["none"])
    may, july = matrixfile.load(path).cells
    said = why_changed(key_of(may, "local"), key_of(july, "local"))
    assert said is not None and "as_of day" in said and "2025-05-15 -> 2025-07-15" in said


# ------------------------------------------------------------------ yanked releases
# A faked simple index (PEP 691 JSON): multidict 6.5.0 reached it on 06-17 and is yanked
# now; a resolver skips it for a range (uv and pip do), so no day resolves to it.
YANKED_REASON = "The version has a regression in 'md.update()' in certain conditions"
FILES = [
    {"filename": "multidict-6.4.4.tar.gz", "upload-time": "2025-05-19T00:00:00Z"},
    {"filename": "multidict-6.5.0.tar.gz", "upload-time": "2025-06-17T10:00:00Z",
     "yanked": YANKED_REASON},
    {"filename": "multidict-6.5.0-py3-none-any.whl", "upload-time": "2025-06-17T10:01:00Z",
     "yanked": YANKED_REASON},
    {"filename": "multidict-6.5.1.tar.gz", "upload-time": "2025-06-24T22:13:46Z",
     "yanked": False},
]


class FakePage:
    status_code = 200

    def __init__(self) -> None:
        self.headers = {"Content-Type": "application/vnd.pypi.simple.v1+json"}

    def json(self) -> dict[str, Any]:
        return {"name": "multidict", "files": FILES}


@pytest.fixture
def fake_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The index uploads asks, faked: each page asked is recorded."""
    import requests

    asked: list[str] = []

    def get(url: str, **_: Any) -> FakePage:
        asked.append(url)
        return FakePage()

    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://index.test/simple")
    monkeypatch.setattr(requests, "get", get)
    resolver._files.cache_clear()
    yield asked
    resolver._files.cache_clear()


def resolve_as_uv_does(day: str) -> tuple[str, ...]:
    """The newest multidict uploaded before the day, a yanked one skipped."""
    live = [f for f in FILES if not f.get("yanked") and f["upload-time"] < f"{day}T00:00:00Z"]
    newest = max(live, key=lambda f: str(f["upload-time"]))
    return ("aiohttp==3.12", f"multidict=={resolver.file_version(newest['filename'], 'multidict')}")


def test_a_yanked_release_between_two_days_is_skipped_and_said(fake_index: list[str]) -> None:
    assert resolver.yanked_releases("multidict") == {"6.5.0": YANKED_REASON}
    runs: list[str] = []

    def probe(day: str, pins: tuple[str, ...]) -> str:
        runs.append(pins[1])
        return BAD if pins[1] == "multidict==6.5.1" else GOOD

    out = search_days("cpu.s", "2025-06-10", "2025-07-01", resolve_as_uv_does, probe,
                      lambda s: None, resolver.upload_time, resolver.yanked_releases)
    # skipped: no day between resolves to 6.5.0, though it was on the index from 06-17
    assert "multidict==6.5.0" not in runs
    assert (out.last_good, out.first_bad) == ("2025-06-24", "2025-06-25")
    # ... and said, with the index's reason
    (change,) = [c for c in out.changes if c.name == "multidict"]
    assert change.yanked == (("6.5.0", YANKED_REASON),)
    assert change.words() == ("multidict 6.4.4 -> 6.5.1 (uploaded 2025-06-24T22:13:46Z; "
                              f"passes over 6.5.0 (yanked: {YANKED_REASON}))")
    assert f"6.5.0 (yanked: {YANKED_REASON})" in out.sentence()
    saved = json.loads(json.dumps(out.to_dict()))     # day.json
    assert saved["changes"][0]["yanked"] == [["6.5.0", YANKED_REASON]]
    # one page asked, however many versions were looked up in it
    assert fake_index == ["http://index.test/simple/multidict/"]


def test_a_day_that_resolves_to_a_yanked_release_says_so_in_its_cell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_index: list[str]) -> None:
    """Only an exact pin lands on a yanked release; the day's resolution keeps it, and
    the cell's labels say it."""
    monkeypatch.setattr(resolver, "uv_bin", lambda: "uv")
    monkeypatch.setattr(resolver, "_by_uv", lambda *a: ("multidict==6.5.0",))
    pins = resolver.resolve(["multidict==6.5.0"], "2025-06-20", sys.executable, sys.version,
                            tmp_path, "md@2025-06-20")
    assert pins == ("multidict==6.5.0",)
    assert resolver.notes(tmp_path, ["multidict==6.5.0"], "2025-06-20", sys.version) == {
        "resolved_with": "uv pip compile --exclude-newer 2025-06-20T00:00:00Z",
        "yanked": f"multidict 6.5.0 (yanked: {YANKED_REASON})"}
    # a range never lands on one: the index is not asked for it
    fake_index.clear()
    monkeypatch.setattr(resolver, "_by_uv", lambda *a: ("multidict==6.5.1",))
    resolver.resolve(["multidict"], "2025-06-26", sys.executable, sys.version, tmp_path, "x")
    assert fake_index == [] and "yanked" not in resolver.notes(
        tmp_path, ["multidict"], "2025-06-26", sys.version)


def test_an_html_index_page_says_yanked_with_data_yanked() -> None:
    page = ('<html><body><a href="x/multidict-6.4.4.tar.gz#sha256=1">multidict-6.4.4.tar.gz'
            '</a><a href="x/multidict-6.5.0.tar.gz" data-yanked="leaks &amp; crashes">'
            'multidict-6.5.0.tar.gz</a><a href="y" data-yanked>multidict-6.3.0.tar.gz</a>'
            '<a href="z" data-yanked="">multidict-6.3.0-py3-none-any.whl</a></body></html>')
    files = resolver.html_files(page)
    assert resolver.yanked_in(files, "multidict") == {"6.5.0": "leaks & crashes", "6.3.0": ""}
    assert resolver.yanked_words("6.3.0", "") == "6.3.0 (yanked: no reason given)"
