"""An issue draft's exact environments (issue 51), for `report.issue`: each side's pins
as its cell found them installed, a dated image's day with the resolver's flags, and the
commands that reproduce them (a `pip install` of those pins, a matrix that pins both
sides for `harness sweep`). Never a `pip:` image's requirement list as the environment:
unpinned, it installs today's releases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import yaml

from harness.answers.search import TOOLING
from harness.matrixfile.model import BUDGET_CAP, DEFAULT_BUDGET_S, abilities
from harness.report.text import md
from harness.result.codec import JSON
from harness.result.model import CellResult as Result
from harness.runtimes.resolver import flags


def exact_pins(res: Result) -> tuple[str, ...]:
    """A `pip:` image's environment as `name==X.Y.Z` pins: the packages its cell found
    installed (the fingerprint) but the installers a venv brings along, unless asked
    for; else the pins its day resolved to (`pins` label); else its requirement list.
    Empty for an image that is not built from a `pip:` list."""
    if not res.image.pip:
        return ()
    resolved = res.image.labels.get("pins", "").split()
    asked = {p.split("==", 1)[0].split("[", 1)[0].strip().lower().replace("_", "-")
             for p in (*res.image.pip, *resolved)}
    found = {n: v for n, v in res.fingerprint.packages.items()
             if n not in TOOLING or n in asked}
    if found:
        return tuple(f"{n}=={v}" for n, v in sorted(found.items()))
    return tuple(resolved) or tuple(res.image.pip)


def interpreter(res: Result) -> str:
    """`python3.12` for a cell whose agent ran on Python 3.12.x, else `python3`."""
    version = (res.fingerprint.python or "").split(".")
    return f"python{version[0]}.{version[1]}" if len(version) >= 2 and all(
        v.isdigit() for v in version[:2]) else "python3"


def as_of_words(res: Result) -> str | None:
    """"2025-07-15 (00:00 UTC), resolved by `uv pip compile --exclude-newer ...`" for a
    dated image; None for any other. A cell recorded before the flags were kept says
    uv's and pip's."""
    labels = res.image.labels
    day = labels.get("as_of")
    if not day:
        return None

    how = (f"`{labels['resolved_with']}`" if labels.get("resolved_with") else
           f"`{flags(day)}` (uv; with pip: `{flags(day, 'pip')}`)")
    return f"{day} (00:00 UTC), resolved by {how}"


def environment_lines(good: Result | None, bad: Result) -> list[str]:
    """Each side's environment exactly: image, requirements, day and resolver flags,
    Python, and the pins its cell found installed."""
    cells = [(f"last good ({md(good.image.label)})", good)] if good is not None else []
    cells.append((f"first bad ({md(bad.image.label)})", bad))
    lines = ["| | " + " | ".join(h for h, _ in cells) + " |",
             "|---|" + "---|" * len(cells)]

    def row(name: str, value: Callable[[Result], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(md(value(c)) for _, c in cells) + " |")

    row("image", lambda c: (c.image.digest or "-") if c.image.pip else
        f"{c.image.ref} (digest {c.image.digest or '-'})")
    if any(c.image.pip for _, c in cells):
        row("requirements (`pip:`)", lambda c: " ".join(c.image.pip) or "-")
    if any(c.image.labels.get("as_of") for _, c in cells):
        row("as of", lambda c: as_of_words(c) or "not dated")
    if any(c.image.labels.get("yanked") for _, c in cells):
        row("yanked pins", lambda c: c.image.labels.get("yanked", "-"))
    row("Python", lambda c: c.fingerprint.python or "-")
    row("scenario", lambda c: f"{c.scenario.script or c.scenario.id} "
        f"{json.dumps(dict(c.scenario.params), sort_keys=True)}")
    for head, c in cells:
        pins = exact_pins(c)
        if pins:
            lines += ["", f"{head[0].upper()}{head[1:]}, the packages its cell found "
                      "installed:", "", "```text", *pins, "```"]
    return lines


def run_length(settings: Mapping[str, JSON]) -> dict[str, JSON]:
    """The matrix keys of a run's length as it was made: `budget` (and `max_iterations`
    where it was not the budget's own cap) for a run in early-stop mode, else
    `iterations`; with `warmup` and `sample_every`. A budgeted run's `iterations` is the
    default it never read: written beside `budget`, the matrix would be refused."""
    early = isinstance(settings.get("max_iterations"), int)
    keys = ("max_iterations", "warmup", "sample_every") if early else (
        "iterations", "warmup", "sample_every")
    out: dict[str, JSON] = {}
    budget = settings.get("budget")
    if early and isinstance(budget, int | float):
        out["budget"] = f"{budget:g}s"
    for k in keys:
        value = settings.get(k)
        if isinstance(value, int) and not (k == "max_iterations" and value == BUDGET_CAP
                                           and "budget" in out):
            out[k] = value
    return out


def calls_made(res: Result) -> int | None:
    """The calls the cell's run measured (its end record's count), None where unknown."""
    made = res.end.iterations if res.end.iterations is not None else res.summary.iterations
    return made or None


def run_words(res: Result) -> str:
    """The run as it was made: "a 5 s time budget (554 calls) after 200 warm-up calls"
    for a budgeted run, "2000 iterations after 200 warm-up" for a fixed one (with the
    calls it made where it ended sooner)."""
    settings = res.settings
    made = calls_made(res)
    warm = f" after {settings.get('warmup', '?')} warm-up"
    if isinstance(settings.get("max_iterations"), int):
        budget = settings.get("budget")
        seconds = budget if isinstance(budget, int | float) else DEFAULT_BUDGET_S
        ran = f"{made:,} calls measured" if made else "its calls not recorded"
        return f"a {seconds:g} s time budget ({ran}){warm}"
    asked = settings.get("iterations", "?")
    if made and isinstance(asked, int) and made < asked:
        return f"{made:,} of {asked:,} iterations{warm}"
    return f"{asked} iterations{warm}"


def repro_matrix(good: Result | None, bad: Result, script: str) -> str:
    """A matrix that runs the scenario on both environments as they were, for as long
    (`run_length`: a time budget where the run had one): each `pip:` image pinned
    exactly (no `as_of:`: today's index would resolve it anew), a container image by
    the digest it ran (`repo@sha256:...`, where the engine knew one), a local
    interpreter by its name."""
    def image(name: str, c: Result) -> object:
        pins = exact_pins(c)
        if pins:
            return {"name": name, "python": interpreter(c), "pip": list(pins)}
        if not abilities(c.runtime).container_images:
            return {"name": name, "python": c.image.ref}
        digest = c.image.digest or ""
        return {"name": name, "ref": digest if "@" in digest else c.image.ref}

    sides = ([("last-good", good)] if good is not None else []) + [("first-bad", bad)]
    scenario: dict[str, object] = {"script": script.rsplit("/", 1)[-1] or "scenario.py",
                                   "id": bad.scenario.id}
    if bad.scenario.params:
        scenario["params"] = dict(bad.scenario.params)
    defaults = run_length(bad.settings)
    doc: dict[str, object] = {"name": f"repro-{bad.scenario.id}",
                              "runtime": (bad.runtime or "local").rpartition("/")[2],
                              "defaults": defaults,
                              "matrix": {"image": [image(n, c) for n, c in sides if c],
                                         "gpu": [bad.gpu.value or "none"],
                                         "scenario": [scenario]}}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=10_000)


def reproducer(bad: Result, script: str, good: Result | None, *, time: bool = False,
               memory: bool = True) -> str:
    """A stand-alone reproduction: the first bad image's exact pins (or image), and a
    loop over the scenario, without harness, as long as the cell's run (its warm-up,
    then the calls it measured), that prints the verdict's own quantity: the median step
    time of each tenth of the calls where the finding is about `time`, the process's
    max RSS every 100 calls where it is about `memory`."""
    name = script.rsplit("/", 1)[-1] or "scenario.py"
    asked = bad.settings.get("iterations", 1000)
    calls = calls_made(bad) or (asked if isinstance(asked, int) else 1000)
    warmup = bad.settings.get("warmup", 0)
    if bad.image.pip:
        day = bad.image.labels.get("as_of")
        env = (f"# first bad, {bad.image.label}" + (f" (as of {day})" if day else "") +
               f":\n{interpreter(bad)} -m venv bad && . bad/bin/activate && pip install "
               f"{' '.join(exact_pins(bad))}")
        if good is not None and good.image.pip:
            day = good.image.labels.get("as_of")
            env += (f"\n# the last good instead, {good.image.label}" +
                    (f" (as of {day})" if day else "") +
                    f":\n# {interpreter(good)} -m venv good && . good/bin/activate && "
                    f"pip install {' '.join(exact_pins(good))}")
    elif (command := abilities(bad.runtime).command) is not None:
        env = f"{command} run --rm -it -v $PWD:/w -w /w {bad.image.ref} bash"
    else:
        env = f"# the interpreter of image {bad.image.label}: {bad.image.ref}"
    params = json.dumps(dict(bad.scenario.params), sort_keys=True)
    block = max(1, calls // 10)
    loop = ([f"for i in range({warmup}):\n    mod.step(state)\n"]
            if isinstance(warmup, int) and warmup > 0 else [])
    loop.append(f"times = []\nfor i in range({calls}):\n" if time else
                f"for i in range({calls}):\n")
    if time:
        loop.append("    t0 = time.perf_counter()\n    mod.step(state)\n"
                    "    times.append(time.perf_counter() - t0)\n"
                    f"    if (i + 1) % {block} == 0:\n"
                    f"        last = sorted(times[-{block}:])\n"
                    f"        print(f'calls {{i + 2 - {block}}}..{{i + 1}}: median step "
                    "{last[len(last) // 2] * 1e3:.4g} ms')\n")
    else:
        loop.append("    mod.step(state)\n")
    if memory or not time:
        loop.append("    if i % 100 == 0:\n"
                    "        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                    "        print(f'call {i}: max RSS {kib} KiB')\n")
    modules = ", ".join(["importlib.util", *(["resource"] if memory or not time else []),
                         *(["time"] if time else [])])
    what = " and ".join([*(["step time"] if time else []),
                         *(["memory"] if memory or not time else [])])
    return (f"## Reproduce without harness\n\nThe run's {warmup} warm-up and {calls:,} "
            f"measured calls, printing {what}:\n\n```sh\n{env}\npython3 - <<'EOF'\n"
            f"import {modules}\n"
            f"spec = importlib.util.spec_from_file_location('scenario', '{name}')\n"
            f"mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            f"state = mod.setup({params})\n" + "".join(loop) + "EOF\n```\n\n")
