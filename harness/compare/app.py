"""`harness compare`'s work: read each side's current cells through the gate and join
them (two directories, the hosts of one sweep, or two images); `cli.compare` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from harness.app.report import unchecked_note
from harness.compare.join import compare_hosts, compare_images
from harness.errors import InputError
from harness.store.gate import STALE, read_gated
from harness.store.runs import SWEEP_RESULTS, require

if TYPE_CHECKING:
    from harness.compare.join import Comparison
    from harness.result.model import CellResult
    from harness.store.gate import Gated


@dataclass(frozen=True)
class Asked:
    """What `harness compare` is asked: A, B (None: A again), --image and --host pairs."""

    a: Path
    b: Path | None = None
    images: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()


def missing(asked: Asked) -> None:
    """Refuse every missing side at once, before anything is read.

    Raises:
        InputError: naming every missing side, with the fix.
    """
    gone = [f"{flag} {path}: no such directory" for flag, path in (("A", asked.a),
                                                                   ("B", asked.b))
            if path is not None and not path.exists()]
    if gone:
        raise InputError("; ".join(gone) + "\n  fix: pass a results directory "
                         "(reports/<name>/<timestamp>, as harness sweep writes it)")


def host_order(path: Path, results: dict[str, CellResult]) -> list[str]:
    """A directory's `hosts:` labels, in its matrix's order, else the cells'."""
    found: list[str] = []
    for r in sorted(results.values(), key=lambda r: r.id):
        if r.host.label and r.host.label not in found:
            found.append(r.host.label)
    try:
        top = yaml.safe_load((path / "matrix.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return found
    hosts = top.get("hosts") if isinstance(top, dict) else None
    named = [h.get("name") if isinstance(h, dict) else None for h in hosts or []]
    ordered = [n for n in named if isinstance(n, str) and n in found]
    return ordered + [h for h in found if h not in ordered]



def split_hosts(path: Path, results: dict[str, CellResult], wanted: Sequence[str]
                ) -> list[tuple[dict[str, CellResult], dict[str, CellResult], tuple[str, str]]]:
    """Host against host of one sweep: the two `wanted`, else the first against each other.

    Raises:
        InputError: fewer than two hosts, or a --host that is not one of them.
    """
    hosts = host_order(path, results)
    if len(wanted) not in (0, 2):
        raise InputError(f"--host given {len(wanted)} time(s); give it twice, e.g. "
                         f"--host {' --host '.join(hosts[:2]) or 'old --host new'}")
    for name in wanted:
        if name not in hosts:
            raise InputError(f"--host {name}: no such host in {path} (allowed values: "
                             f"{', '.join(hosts) or 'none: not a hosts: sweep'})")
    if len(wanted or hosts) < 2:
        raise InputError(f"{path} holds one host's cells ({', '.join(hosts) or 'local'}); "
                         "compare needs two results directories (A B), a `hosts:` sweep, "
                         "or one directory with --image X --image Y")
    pairs = [(wanted[0], wanted[1])] if wanted else [(hosts[0], h) for h in hosts[1:]]

    def on(host: str) -> dict[str, CellResult]:
        return {k: r for k, r in results.items() if r.host.label == host}

    return [(on(old), on(new), (old, new)) for old, new in pairs]



def results_of(path: Path, flag: str) -> dict[str, CellResult]:
    """A results directory's current cells (through the gate); the rest kept for `gaps_of`.

    Raises:
        InputError: not a sweep's results directory, or one with no cell results.
    """
    require(path, SWEEP_RESULTS, "harness compare", flag)
    found, _ = read_gated(path, as_run=True)
    if not found.results and not found.was and not found.unreadable:
        raise InputError(f"{flag} {path}: no cells/*/result.json here; pass a directory "
                         "written by `harness sweep`")
    unchecked_note(found)
    _READ[path] = found
    return found.results



_READ: dict[Path, Gated] = {}   # what `results_of` read, for `gaps_of`



def gaps_of(path: Path, image: str | None = None) -> tuple[dict[str, str], list[str]]:
    """A directory's cells with no answer (id -> why), of `image` only, and the rerun fix."""
    found = _READ[path]
    ids = [p.id for p in found.plan if image is None or p.image == image]
    gaps = {cid: ("stale: " + found.stale[cid] if found.state(cid) == STALE
                  else found.state(cid).replace("missing", "not run"))
            for cid in ids if cid not in found.results}
    return gaps, [f"{found.refresh} runs {path}'s again"] if gaps else []



def image_label(name: str, results: dict[str, CellResult], where: Path) -> str:
    """The image label `name` means: a label, or an image's full reference.

    Raises:
        InputError: no image of `results` has that label or reference.
    """
    refs = {r.image.label: r.image.ref for r in results.values()}
    if name in refs:
        return name
    for label, ref in refs.items():
        if name == ref:
            return label
    found = _READ.get(where)
    planned = ({p.image for p in found.plan} | {r.image.label for r in found.was.values()}
               if found is not None else set())
    if found is not None and name in planned:
        # Cells there but none current: say why, not "no such"
        gaps, fix = gaps_of(where, name)
        why = "; ".join(f"{cid}: {g}" for cid, g in sorted(gaps.items())) or "no cell"
        raise InputError(f"--image {name}: no current cell of it in {where} ({why})"
                         + (f"\n  fix: {fix[0]}" if fix else ""))
    allowed = sorted(set(refs) | planned)
    raise InputError(f"--image {name}: no such image in {where} (allowed values: "
                     f"{', '.join(allowed) or 'none'}, or their full references)")



def run_name(path: Path) -> str:
    """NAME/TIMESTAMP of a results directory: what tells two runs apart."""
    full = path.resolve()
    return f"{full.parent.name}/{full.name}" if full.parent.name else full.name



def one_directory(asked: Asked, hosts: list[str]) -> None:
    """`compare A A`: one directory, which compares only where it holds two hosts.

    Raises:
        InputError: A and B are one directory of one host.
    """
    twice = asked.b is not None and asked.b.resolve() == asked.a.resolve() and not asked.images
    if twice and len(hosts) < 2:
        raise InputError(
            f"{asked.a} and {asked.b} are one directory (the cells of one host: "
            f"{', '.join(hosts) or 'local'}): nothing to compare\n  fix: pass two "
            "results directories (A B), or one directory with --image X --image Y")



def names(a: Path, b: Path) -> tuple[str, str]:
    """What tells two runs apart: NAME/TIMESTAMP, else their full paths."""
    names = (run_name(a), run_name(b))
    return names if names[0] != names[1] else (str(a.resolve()), str(b.resolve()))



def results_compared(asked: Asked) -> tuple[list[Comparison], str]:
    """The comparisons asked for, and what the sides are (for a no-shared-cell error).

    Raises:
        InputError: one --image, an unknown image or host, or --host with two directories.
    """
    a = results_of(asked.a, "A")
    if asked.images:
        if len(asked.images) != 2:
            raise InputError(f"--image given {len(asked.images)} time(s); give it twice, e.g. "
                             "--image 20.12-tf1-py3 --image 22.12-tf1-py3")
        b = results_of(asked.b, "B") if asked.b else a
        labels = [image_label(name, results, where) for name, results, where in
                  ((asked.images[0], a, asked.a), (asked.images[1], b, asked.b or asked.a))]
        got = compare_images(a, b, labels[0], labels[1])
        (ga, fa), (gb, fb) = gaps_of(asked.a, labels[0]), gaps_of(asked.b or asked.a, labels[1])
        got.gaps, got.fixes = (ga, gb), list(dict.fromkeys(fa + fb))
        return [got], f"{asked.a} and {asked.b or asked.a}"
    if asked.b is None or asked.b.resolve() == asked.a.resolve() or asked.hosts:
        if asked.b is not None and asked.b.resolve() != asked.a.resolve():
            raise InputError("--host picks two hosts of one directory; with two "
                             "directories, leave it out")
        if not asked.hosts:
            one_directory(asked, host_order(asked.a, a))
        out = [compare_hosts(old, new, hosts)
               for old, new, hosts in split_hosts(asked.a, a, asked.hosts)]
        for c in out:
            gaps, c.fixes = gaps_of(asked.a)
            c.gaps = (gaps, {})
        return out, f"{asked.a}"
    both = compare_hosts(a, results_of(asked.b, "B"), names(asked.a, asked.b))
    (ga, fa), (gb, fb) = gaps_of(asked.a), gaps_of(asked.b)
    both.gaps, both.fixes = (ga, gb), fa + fb
    return [both], f"{asked.a} and {asked.b}"
