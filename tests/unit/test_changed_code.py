"""Issue 51 item 4, beyond every anchor: once culprit proved a package change and explain
attributed the row's late samples to call sites, the answer names the function the
change changed (`culprit.changes`): both releases read from a package index (here a
`file://` one built in the test: two tiny sdists or wheels), diffed at the syntax tree,
and set against the where record's frames in the package's files."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import LEAK_LIB, Behaviour, FakeRuntime
from sweepkit import on_the_cli, write_matrix

from harness.analysis.codediff import diff, module_diff
from harness.answers.kept import Explanation
from harness.cli import main
from harness.culprit.changes import code_answers, step_lines
from harness.runtimes import sources

SITE = "/venv/lib/python3.11/site-packages"
HTTP_OLD = '''"""http helpers."""


def parse_options_header(value):
    """Split a header."""
    if not value:
        return "", {}
    return value, {}


class Accept:
    def best(self, offers):
        return offers[0]


def untouched():
    return 1
'''
HTTP_NEW = '''"""http helpers, now faster (they said)."""


def parse_options_header(value):
    """Split a header, the new way."""
    if not value:
        return "", {}
    # a comment
    parts = [p.strip() for p in value.split(";")]
    options = {}
    for part in parts[1:]:
        key, _, val = part.partition("=")
        options[key] = val
    return parts[0], options


class Accept:
    def best(self, offers):
        return offers[-1]

    def quality(self, offer):
        return 1.0


def untouched():
    return 1
'''


def sdist(where: Path, name: str, version: str, files: dict[str, str]) -> Path:
    path = where / f"{name}-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        for rel, text in {"setup.py": "", **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def wheel(where: Path, name: str, version: str, files: dict[str, str],
          tag: str = "py3-none-any") -> Path:
    path = where / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
    return path


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `file://` package index (a folder per project), as uv's setting names it, and
    a cache of the test's own."""
    root = tmp_path / "index"
    root.mkdir()
    monkeypatch.delenv("HARNESS_OFFLINE", raising=False)
    monkeypatch.setenv("UV_DEFAULT_INDEX", root.as_uri())
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return root


def project(index: Path, name: str) -> Path:
    folder = index / name
    folder.mkdir(exist_ok=True)
    return folder


def stack_where(*sites: tuple[list[list[Any]], int], samples: int = 100) -> Explanation:
    """explain's where.json for a first bad cell, its late stack samples at `sites`, of
    `samples` in each window."""
    record = {"type": "where", "kinds": ["stack"], "calls": 100, "errors": {},
              "stack": {"hz": 200.0, "windows": {"early": {"samples": samples},
                                                 "late": {"samples": samples}},
                        "sites": [{"frames": f, "early": 10, "late": late}
                                  for f, late in sites]}}
    return Explanation("b.cpu.x", "first bad", "g.cpu.x", ("stack",), 100, (),
                       record=record, table=(("time", "x.py:5 step", "48%", "0%"),))


FOUND = {"status": "found", "answer": [{"name": "demo", "good": "1.0", "bad": "1.1"}]}


def test_the_changed_function_that_holds_the_late_samples_is_named_with_its_share(
        index: Path) -> None:
    # GIVEN demo 1.0 and 1.1 on the index, parse_options_header rewritten in 1.1
    for version, text in (("1.0", HTTP_OLD), ("1.1", HTTP_NEW)):
        sdist(project(index, "demo"), "demo", version, {"src/demo/http.py": text,
                                                        "tests/test_http.py": text})
    # ... and explain put 48 % of the late samples under it, 30 % in an unchanged one
    where = stack_where(
        ([[f"{SITE}/demo/http.py", 9, "parse_options_header"], ["x.py", 5, "step"]], 48),
        ([[f"{SITE}/demo/http.py", 17, "untouched"], ["x.py", 6, "step"]], 30),
        ([["x.py", 7, "step"]], 22))
    (found,) = code_answers(FOUND, where)
    # THEN the answer names it, its lines changed and its share
    assert found.status == "found"
    assert found.words == ("demo 1.0 -> 1.1: `http.py: parse_options_header` changed "
                           f"({found.hits[0].lines} lines) and holds 48 % of the late samples")
    assert found.hits[0].lines == 8 and found.files == ("demo-1.0.tar.gz", "demo-1.1.tar.gz")
    assert json.loads(json.dumps(found.to_json()))["functions"][0]["share"] == 0.48
    # ... both releases kept in the cache under name, version, hash and file name
    kept = sorted(p.relative_to(index.parent / "cache").as_posix()
                  for p in (index.parent / "cache").rglob("*.tar.gz"))
    assert kept == ["sources/demo/1.0/nohash-demo-1.0.tar.gz",
                    "sources/demo/1.1/nohash-demo-1.1.tar.gz"]


def test_a_method_matches_by_qualified_name_and_nothing_intersecting_is_said(
        index: Path) -> None:
    for version, text in (("1.0", HTTP_OLD), ("1.1", HTTP_NEW)):
        wheel(project(index, "demo"), "demo", version, {"demo/http.py": text})
    method = stack_where(([[f"{SITE}/demo/http.py", 14, "Accept.best"]], 60))
    (hit,) = code_answers(FOUND, method)
    assert hit.words.startswith("demo 1.0 -> 1.1: `http.py: Accept.best` changed (1 line) "
                                "and holds 60 % of the late samples")
    # an unchanged attributed function: the module's changes are named instead
    (near,) = code_answers(FOUND, stack_where(([[f"{SITE}/demo/http.py", 17, "untouched"]],
                                               40)))
    assert near.status == "elsewhere" and near.words.startswith(
        "demo 1.0 -> 1.1: the attributed functions did not change (`http.py: untouched` "
        "40 % of the late samples); changed in their modules: `http.py: "
        "parse_options_header` changed (8 lines)")


def test_an_answer_on_few_stack_samples_says_how_many(index: Path) -> None:
    for version, text in (("1.0", HTTP_OLD), ("1.1", HTTP_NEW)):
        wheel(project(index, "demo"), "demo", version, {"demo/http.py": text})
    # GIVEN an attributed run of a step of microseconds: 3 late samples, or none at all
    few = stack_where(([[f"{SITE}/demo/http.py", 9, "parse_options_header"]], 3), samples=3)
    (named,), (nothing,) = code_answers(FOUND, few), code_answers(FOUND, stack_where(samples=0))
    # THEN each says how many samples it rests on
    assert named.status == "found" and named.words.endswith(
        "holds 100 % of the late samples (the stack sampler took 3 samples in its late "
        "window in 100 calls: too few to rest on)")
    assert nothing.status == "unattributed" and nothing.words == (
        "demo 1.0 -> 1.1: explain attributed nothing to read the change against (the "
        "stack sampler took 0 samples in 100 calls: too few to rest on)")
    # ... and nothing where they are many (the other tests' 100 late samples)


def test_a_native_only_change_names_the_extension_module_and_the_native_frame(
        index: Path) -> None:
    # GIVEN nat's C source changed and its Python did not; the release has binary wheels,
    # so its sdist (which holds the C source) is read
    folder = project(index, "nat")
    for version, body in (("2.0", "return x;"), ("2.1", "Py_INCREF(x);\n    return x;")):
        sdist(folder, "nat", version, {"nat/__init__.py": "from ._speed import pop\n",
                                       "nat/_speed.c": f"PyObject *pop(x) {{\n    {body}\n}}\n"})
        wheel(folder, "nat", version, {"nat/__init__.py": ""},
              tag="cp311-cp311-manylinux_2_17_x86_64")
    culprit = {"status": "found", "answer": [{"name": "nat", "good": "2.0", "bad": "2.1"}]}
    heap = {"type": "where", "kinds": ["heap"], "calls": 100, "errors": {},
            "heap": {"traced_start": 0, "traced_end": 6000,
                     "sites": [{"size": 6000, "count": 100, "frames": [["x.py", 17, "step"]]}]}}
    ex = Explanation("b.cpu.x", "first bad", "g.cpu.x", ("heap",), 100, (), record=heap,
                     table=(("heap", "x.py:17 step", "+60 B/call", "0"),))
    (found,) = code_answers(culprit, ex)
    assert found.status == "native" and found.native == ("nat._speed",)
    assert found.words == ("nat 2.0 -> 2.1: native code changed: extension module "
                           "`nat._speed` (nat/_speed.c (1 line)); the attributed site calls "
                           "into it from x.py:17 step")
    # a native frame in the record (memray's): named as the native frame
    so = f"{SITE}/nat/_speed.cpython-311-x86_64-linux-gnu.so"
    heap["heap"]["sites"][0]["frames"] = [[so, 0, "pop_impl"], ["x.py", 17, "step"]]
    (native,) = code_answers(culprit, ex)
    assert native.words.endswith("the attributed frame is native: pop_impl in "
                                 "_speed.cpython-311-x86_64-linux-gnu.so")


def test_a_release_that_cannot_be_had_is_one_line_and_no_failure(
        index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = stack_where(([[f"{SITE}/demo/http.py", 9, "parse_options_header"]], 48))
    # nothing on the index for demo
    (missing,) = code_answers(FOUND, where)
    assert missing.status == "not fetched" and "\n" not in missing.words
    assert missing.words == "demo 1.0 -> 1.1: code not read: the index has no page for demo"
    # a file whose hash is not the index's
    folder = project(index, "demo")
    sdist(folder, "demo", "1.0", {"demo/http.py": HTTP_OLD})
    sdist(folder, "demo", "1.1", {"demo/http.py": HTTP_NEW})
    (folder / "index.html").write_text(
        "".join(f'<a href="demo-{v}.tar.gz#sha256={"0" * 64}">demo-{v}.tar.gz</a>\n'
                for v in ("1.0", "1.1")))
    (bad_hash,) = code_answers(FOUND, where)
    assert bad_hash.words == ("demo 1.0 -> 1.1: code not read: demo-1.0.tar.gz: its hash "
                              "is not the index's")
    # an index that does not answer, and the user's offline settings
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    (down,) = code_answers(FOUND, where)
    assert down.words.startswith("demo 1.0 -> 1.1: code not read: the index did not answer "
                                 "for demo") and "\n" not in down.words
    monkeypatch.setenv("UV_OFFLINE", "1")
    (off,) = code_answers(FOUND, where)
    assert off.words == "demo 1.0 -> 1.1: code not read: offline (UV_OFFLINE is set)"
    monkeypatch.setenv("HARNESS_OFFLINE", "1")
    assert step_lines(FOUND, where)[1] == [
        "demo 1.0 -> 1.1: code not read: offline (HARNESS_OFFLINE is set): no index is asked"]
    assert step_lines({"status": "outside"}, where)[1] == [
        "no package change proved: no code to read"]


def test_the_index_page_hash_is_checked_and_keys_the_cache(index: Path) -> None:
    folder = project(index, "demo")
    links = []
    for version, text in (("1.0", HTTP_OLD), ("1.1", HTTP_NEW)):
        path = wheel(folder, "demo", version, {"demo/http.py": text})
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        links.append(f'<a href="{path.name}#sha256={sha}">{path.name}</a>')
    (folder / "index.html").write_text("\n".join(links))
    got = sources.release("demo", "1.1")
    assert got.files == {"demo/http.py": HTTP_NEW}
    assert (index.parent / "cache" / "sources" / "demo" / "1.1"
            / f"{sha[:16]}-demo-1.1-py3-none-any.whl").is_file()


def test_the_syntax_tree_diff() -> None:
    changes = {(c.function, c.status) for c in module_diff("m.py", HTTP_OLD, HTTP_NEW)}
    # a docstring or comment alone is no change; a method added is said
    assert changes == {("parse_options_header", "changed"), ("Accept.best", "changed"),
                       ("Accept.quality", "added")}
    nested = "def f():\n    def g():\n        return {}\n    return g\n"
    assert {c.function for c in module_diff("m.py", nested, nested.replace("{}", "[]"))} == {
        "f", "f.<locals>.g"}
    d = diff({"a.py": "def f(:\n", "b.so": b"1"}, {"a.py": "def f(:\n  x\n", "b.so": b"2"})
    assert d.unparsed == ("a.py",) and [f.path for f in d.native()] == ["b.so"]


def test_a_function_that_moved_to_another_module_is_matched_not_added(index: Path) -> None:
    # GIVEN demo 1.0 with one module, split in 1.1 into core.py and results.py (as
    # pyparsing 2.4.7's pyparsing.py became 3.0.9's core.py and results.py): the header
    # parser rewritten on the way, Accept moved as it was, one function renamed
    accept = HTTP_OLD[HTTP_OLD.index("class Accept"):HTTP_OLD.index("def untouched")]
    helper = "def {}(x):\n    y = x * 2\n    z = y + 1\n    return z\n"
    old = HTTP_OLD + "\n\n" + helper.format("_scale")
    core = (HTTP_NEW[:HTTP_NEW.index("class Accept")] + "\n\n" + helper.format("scale")
            + "\n\ndef brand_new():\n    return 2\n")
    for version, files in (("1.0", {"demo/pyparsing.py": old}),
                           ("1.1", {"demo/core.py": core, "demo/results.py": accept})):
        wheel(project(index, "demo"), "demo", version, files)
    # WHEN explain put the late samples in the parser, then in the unchanged method
    (moved,) = code_answers(FOUND, stack_where(
        ([[f"{SITE}/demo/core.py", 9, "parse_options_header"]], 50),
        ([[f"{SITE}/demo/results.py", 3, "Accept.best"]], 30)))
    (kept,) = code_answers(FOUND, stack_where(([[f"{SITE}/demo/results.py", 3,
                                                 "Accept.best"]], 30)))
    # THEN the parser moved and changed, holding its share; the method moved unchanged
    assert moved.status == "found" and moved.words == (
        "demo 1.0 -> 1.1: `core.py: parse_options_header` moved from `pyparsing.py` and "
        f"changed ({moved.hits[0].lines} lines) and holds 50 % of the late samples")
    assert moved.hits[0].lines == 8 and [h.function for h in moved.hits] == [
        "parse_options_header"]
    assert json.loads(json.dumps(moved.to_json()))["functions"][0]["moved_from"] == (
        "pyparsing.py")
    assert kept.status == "unchanged" and kept.words.startswith(
        "demo 1.0 -> 1.1: the attributed sites are unchanged (`results.py: Accept.best` 30 % "
        "of the late samples, moved from `pyparsing.py`, its code unchanged)")
    # ... and in the diff: matched by name, else by code; only the new one added
    changes = {(c.path, c.function, c.status, c.moved_from, c.was) for c in diff(
        {"demo/pyparsing.py": old}, {"demo/core.py": core, "demo/results.py": accept}
    ).functions}
    assert changes == {
        ("demo/core.py", "parse_options_header", "moved", "demo/pyparsing.py",
         "parse_options_header"),
        ("demo/results.py", "Accept.best", "moved", "demo/pyparsing.py", "Accept.best"),
        ("demo/core.py", "scale", "moved", "demo/pyparsing.py", "_scale"),
        ("demo/core.py", "brand_new", "added", None, None),
        ("demo/pyparsing.py", "untouched", "removed", None, None)}


# ---------------------------------------------------------------- through the commands
GOOD = ("multidict==6.4.4", "yarl==1.9.4")
BAD = ("multidict==6.6.3", "yarl==1.9.4")
ROW = "cpu.loop"
IMPL = LEAK_LIB.split("site-packages/", 1)[1]     # demo/_impl.py: where the fake leaks


def multidict_on(index: Path) -> None:
    """multidict 6.4.4 and 6.6.3 on the index, holding the module the fake's where
    record attributes the leak to, its `pop` changed."""
    folder = project(index, "multidict")
    for version, body in (("6.4.4", "return d.pop(k)"), ("6.6.3", "v = d.pop(k)\n    "
                                                                  "KEEP.append(v)\n    return v")):
        sdist(folder, "multidict", version, {
            IMPL: f"KEEP = []\n\n\ndef pop(d, k):\n    {body}\n\n\ndef get(d, k):\n"
                  "    return d[k]\n"})


def test_find_cause_and_culprit_name_the_changed_function(
        tmp_path: Path, index: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    multidict_on(index)
    on_the_cli(monkeypatch, FakeRuntime(
        lambda c: Behaviour(leak_per_iter=6000) if "multidict==6.6.3" in c.image.pip
        else Behaviour(), pins_as_packages=True))
    matrix = write_matrix(tmp_path, [{"name": n, "python": "python3", "pip": list(p)}
                                     for n, p in (("g", GOOD), ("b", BAD))],
                          gpus=["none"], name="j")
    assert main(["sweep", str(matrix), "--out", str(tmp_path / "r"), "--find-cause",
                 "-q"]) == 1
    (run,) = (tmp_path / "r" / "j").iterdir()
    said = json.loads((run / "cause" / f"{ROW}.json").read_text())
    words = ("multidict 6.4.4 -> 6.6.3: `_impl.py: pop` changed (3 lines) and holds 100 % "
             "of the heap growth")
    assert f"; {words}; " in said["summary"]
    assert f"code: {words}" in said["steps"]
    (code,) = said["facts"]["code"]
    assert code["functions"][0]["function"] == "pop" and code["part"] == "heap"
    capsys.readouterr()
    # harness culprit on the same run: its answer says it too, in words and in JSON
    assert main(["culprit", str(run), ROW, "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    (row,) = out["answer"]["rows"]
    assert row["code"][0]["words"] == words
    # ... and where no release can be had, one line, the same exit
    monkeypatch.setenv("HARNESS_OFFLINE", "1")
    assert main(["culprit", str(run), ROW]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if "code:" in line]
    assert lines == ["  code: multidict 6.4.4 -> 6.6.3: code not read: offline "
                     "(HARNESS_OFFLINE is set): no index is asked"]
