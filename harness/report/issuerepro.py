"""An issue draft's exact environments (issue 51), for `report.issue`: each side's pins
as its cell found them installed, a dated image's day with the resolver's flags, and the
commands that reproduce them (a `pip install` of those pins, a matrix that pins both
sides for `harness sweep`). Never a `pip:` image's requirement list as the environment:
unpinned, it installs today's releases.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from harness.matrixfile.model import abilities
from harness.plans.culpritdiff import TOOLING
from harness.report.text import md
from harness.result.model import CellResult as Result


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
    from harness.runtimes.resolver import flags

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


def repro_matrix(good: Result | None, bad: Result, script: str) -> str:
    """A matrix that runs the scenario on both environments as they were: each `pip:`
    image pinned exactly (no `as_of:`: today's index would resolve it anew), a container
    image by the digest it ran (`repo@sha256:...`, where the engine knew one), a local
    interpreter by its name."""
    import yaml

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
    defaults = {k: bad.settings[k] for k in ("iterations", "warmup", "sample_every")
                if isinstance(bad.settings.get(k), int)}
    doc: dict[str, object] = {"name": f"repro-{bad.scenario.id}",
                              "runtime": (bad.runtime or "local").rpartition("/")[2],
                              "defaults": defaults,
                              "matrix": {"image": [image(n, c) for n, c in sides if c],
                                         "gpu": [bad.gpu.value or "none"],
                                         "scenario": [scenario]}}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=10_000)


def reproducer(bad: Result, script: str, good: Result | None) -> str:
    """A stand-alone reproduction: the first bad image's exact pins (or image), and a
    loop over the scenario that prints the process's memory, without harness."""
    name = script.rsplit("/", 1)[-1] or "scenario.py"
    calls = bad.settings.get("iterations", 1000)
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
    return (f"## Reproduce without harness\n\n```sh\n{env}\npython3 - <<'EOF'\n"
            f"import importlib.util, resource\n"
            f"spec = importlib.util.spec_from_file_location('scenario', '{name}')\n"
            f"mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            f"state = mod.setup({params})\n"
            f"for i in range({calls}):\n    mod.step(state)\n"
            f"    if i % 100 == 0:\n"
            f"        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"        print(f'call {{i}}: max RSS {{kib}} KiB')\nEOF\n```\n\n")
