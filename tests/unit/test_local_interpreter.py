"""The local runtime's interpreter: the file that runs, asked once (issue 62).

A local image's `python:` found on PATH may be a shim (pyenv's is a bash script that
starts ~10 processes each time): the runtime's one probe of the interpreter also says
its sys.executable, its arguments and its environment, and where the name only chose
the interpreter (the arguments as given, only PATH and PYENV* variables changed) the
cells (and venv builds) run that file with those variables, so the version the probe
saw is the one that runs and no cell starts the shim again. A wrapper that sets another
variable or adds an option runs for every cell, as before.
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from harness import matrixfile
from harness.runtimes import local as local_runtime
from harness.runtimes import process


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def image_of(tmp_path: Path, python: str) -> matrixfile.model.ImageSpec:
    (tmp_path / "loop.py").write_text("def setup(params):\n    return None\n\n\n"
                                      "def step(s):\n    pass\n")
    (tmp_path / "m.yaml").write_text(textwrap.dedent(f"""\
        name: shim
        runtime: local
        matrix:
          image:
            - {{name: py, python: {python}}}
          scenario: [loop.py]
        """))
    return matrixfile.load(tmp_path / "m.yaml").images[0]


def test_a_shim_on_path_is_probed_once_and_the_cells_run_its_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN `python: python3` where PATH's python3 is a shim that notes each start
    starts = tmp_path / "starts"
    shim = executable(tmp_path / "bin" / "python3", textwrap.dedent(f"""\
        #!/bin/sh
        echo started >> {starts}
        exec {sys.executable} "$@"
        """))
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(local_runtime, "_VERSIONS", {})
    image = image_of(tmp_path, "python3")
    runtime = local_runtime.LocalRuntime(tmp_path / "cache")
    # WHEN the image is prepared twice (a sweep's cells share the one answer)
    first = runtime.prepare(image, lambda _: None)
    again = runtime.prepare(image, lambda _: None)
    # THEN its cells run the interpreter the shim started, not the shim, whose version
    # the image's digest names; the shim ran once, for the probe
    assert first.python == again.python == sys.executable != str(shim)
    assert first.digest == f"python {sys.version.split()[0]}"
    assert starts.read_text().splitlines() == ["started"]


def test_an_interpreter_that_names_no_file_of_its_own_runs_as_named(tmp_path: Path) -> None:
    # GIVEN an "interpreter" that answers the probe with a version only
    fake = executable(tmp_path / "python-embedded", "#!/bin/sh\necho '3.99.1 (embedded)'\n")
    # WHEN it is probed
    rc, runs, version, shim_env = process.python_probe(str(fake))
    # THEN it runs as named, and its version is what it said
    assert (rc, runs, version, shim_env) == (0, str(fake), "3.99.1 (embedded)", {})


def test_the_probe_keeps_a_version_of_several_lines_whole(tmp_path: Path) -> None:
    # GIVEN PyPy's kind of sys.version (two lines) before the probe's own line
    fake = executable(tmp_path / "pypy3", "#!/bin/sh\nprintf '3.10.14 (pypy)\\n"
                                          "[PyPy 7.3.17]\\nharness-probe: {}\\n'\n")
    rc, runs, version, _ = process.python_probe(str(fake))
    assert (rc, runs, version) == (0, str(fake), "3.10.14 (pypy)\n[PyPy 7.3.17]")


def test_an_interpreter_that_does_not_run_is_unavailable_with_what_it_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = executable(tmp_path / "python-broken", "#!/bin/sh\necho 'no libpython' >&2\n"
                                                    "exit 3\n")
    monkeypatch.setattr(local_runtime, "_VERSIONS", {})
    runtime = local_runtime.LocalRuntime(tmp_path / "cache")
    with pytest.raises(local_runtime.ImageUnavailable, match="does not run: no libpython"):
        runtime.prepare(image_of(tmp_path, str(broken)), lambda _: None)


@pytest.mark.parametrize("wrapper", ['BAD=1 exec {python} "$@"',
                                     'exec {python} -X dev "$@"'])
def test_a_wrapper_that_sets_a_variable_or_an_option_runs_for_every_cell(
        tmp_path: Path, wrapper: str) -> None:
    script = executable(tmp_path / "py-wrapped",
                        "#!/bin/sh\n" + wrapper.format(python=sys.executable) + "\n")
    rc, runs, version, shim_env = process.python_probe(str(script))
    assert (rc, runs, shim_env) == (0, str(script), {})
    assert version == sys.version


def test_a_version_managers_variables_go_with_its_interpreter(tmp_path: Path) -> None:
    # GIVEN a shim that, as pyenv's does, names the version and puts a folder first
    folder = Path(sys.executable).parent
    script = executable(tmp_path / "python3", f"#!/bin/sh\nexport PYENV_VERSION=9.9\n"
                                              f"PATH={folder}:$PATH exec {sys.executable} "
                                              '"$@"\n')
    rc, runs, _, shim_env = process.python_probe(str(script))
    # THEN the cells run the interpreter, with the variables the shim set for a `python`
    # they start (PATH is the cell's own: the shims on it find the same version)
    assert (rc, runs, shim_env) == (0, sys.executable, {"PYENV_VERSION": "9.9"})


def test_a_wrapper_that_takes_folders_off_path_runs_for_every_cell(tmp_path: Path) -> None:
    script = executable(tmp_path / "python3", f"#!/bin/sh\nPATH=/usr/bin exec "
                                              f'{sys.executable} "$@"\n')
    assert process.python_probe(str(script))[1] == str(script)
