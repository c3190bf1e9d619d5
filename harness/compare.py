"""`harness compare`: two result sets joined and where they differ said, each side's
current cells read through the gate (`cli.compare` prints). Host mode joins two
directories on (image, scenario), each side named by its GPU, else `hosts:` label, else
directory; image mode joins two images on (GPU, scenario). The goal is "rfft_loop leaks
only on RTX 4090 with 22.12-tf1-py3". Fit mode joins two fit.json boundaries on (image,
scenario, GPU); B lower by more than one step exits 1.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml
from tabulate import tabulate

from harness.analysis.kinds import BAD, GOOD, UNDECIDED, kind
from harness.analysis.rules import ONE_RUN
from harness.app.report import unchecked_note
from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError
from harness.matrixfile.model import LOCAL_HOST, abilities, is_local_endpoint
from harness.result.model import CellResult, carrier_words, cell_text
from harness.result.runkey import why_changed
from harness.store.gate import STALE, read_gated
from harness.store.runs import SWEEP_RESULTS, require

if TYPE_CHECKING:
    from harness.store.gate import Gated


Result = CellResult


def gpu_names(res: CellResult) -> list[str]:
    """GPU names a cell recorded in its fingerprint, shortened ("RTX 4090")."""
    return [n.removeprefix("NVIDIA ").removeprefix("GeForce ")
            for n in res.fingerprint.gpu_names()]


def host_label(res: CellResult) -> str | None:
    """The `hosts:` label a cell ran under; None for the default, unnamed engine."""
    label = res.host.label
    return label if label and label != LOCAL_HOST.label else None


def machine_of(res: CellResult) -> str | None:
    """A remote engine's URL, else the harness's machine; never a container's hostname."""
    url = res.host.url
    if url and not is_local_endpoint(url):
        return url
    if res.host.machine:
        return res.host.machine
    if not abilities(res.runtime).container_images:   # the agent ran on the machine itself
        return res.fingerprint.hostname or None
    return None


def _most_common(values: list[str]) -> str | None:
    return Counter(values).most_common(1)[0][0] if values else None


def same_machine(a: Mapping[str, Result], b: Mapping[str, Result]) -> bool:
    """Both result sets ran on one machine (as far as they recorded)."""
    ma = _most_common([m for r in a.values() if (m := machine_of(r))])
    mb = _most_common([m for r in b.values() if (m := machine_of(r))])
    return ma is not None and ma == mb


def side_names(a: Mapping[str, Result], b: Mapping[str, Result], fallback: tuple[str, str]
               ) -> tuple[str, str]:
    """Names for two result sets: GPU model, else `hosts:` label, else `fallback`."""
    def describe(results: Mapping[str, Result]) -> tuple[str | None, str | None]:
        gpus = [" + ".join(gpu_names(r)) for r in results.values() if gpu_names(r)]
        labels = [h for r in results.values() if (h := host_label(r))]
        return _most_common(gpus), _most_common(labels)

    (ga, la), (gb, lb) = describe(a), describe(b)
    labels_differ = bool(la and lb and la != lb)
    if ga and gb and ga != gb:
        return ((f"{ga} on {la}", f"{gb} on {lb}") if labels_differ else (ga, gb))
    names = []
    for gpu, label, fb in ((ga, la, fallback[0]), (gb, lb, fallback[1])):
        name = label if labels_differ and label else fb
        names.append(f"{gpu} on {name}" if gpu else name)
    return names[0], names[1]


@dataclass(frozen=True)
class Pair:
    key: tuple[str, ...]
    a: Result | None
    b: Result | None

    @property
    def bad_a(self) -> bool:
        return self.a is not None and self.a.verdict in BAD

    @property
    def bad_b(self) -> bool:
        return self.b is not None and self.b.verdict in BAD

    @property
    def differs(self) -> bool:
        """The sides differ in verdict or in what grew; never on a `one_run` slowdown."""
        return (self.a is not None and self.b is not None and not self.one_run
                and (self.a.verdict != self.b.verdict or self.grew_apart))

    @property
    def one_run(self) -> list[int]:
        """The sides whose verdict is a one-run slowdown: a suspicion, not a difference."""
        return [i for i, r in enumerate((self.a, self.b))
                if r is not None and r.rule == ONE_RUN]

    @property
    def grew_apart(self) -> bool:
        """The same bad memory verdict on both sides, carried by different memory."""
        a, b = self.a, self.b
        return (a is not None and b is not None and a.verdict == b.verdict
                and a.verdict in BAD and kind(a.verdict).figure == "memory"
                and a.deciding_carrier is not None and b.deciding_carrier is not None
                and a.deciding_carrier != b.deciding_carrier)


def key_changes(pairs: Sequence[Pair]) -> str:
    """What the sides ran differently (by run key); "" where alike: then it may be noise."""
    said: list[str] = []
    for p in pairs:
        if p.a is None or p.b is None or p.a.key is None or p.b.key is None:
            continue
        why = why_changed(p.a.key, p.b.key)
        if why is not None:
            text = why.replace(" changed since it ran", " changed")
            if text not in said:
                said.append(text)
    return "; ".join(said)


def same_run(p: Pair) -> bool:
    """Both sides are one run (a re-decided copy): same run key and identical timings."""
    return (p.a is not None and p.b is not None and p.a.key is not None
            and p.a.key == p.b.key and p.a.timings == p.b.timings)


@dataclass
class Comparison:
    mode: str                       # "hosts" or "images"
    a_name: str
    b_name: str
    key_names: tuple[str, ...]
    pairs: list[Pair] = field(default_factory=list)
    same_host: bool = False         # hosts mode: two runs on one machine
    # Each side's cells with no answer (id -> why) and the rerun commands.
    gaps: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    fixes: list[str] = field(default_factory=list)

    @property
    def joined(self) -> list[Pair]:
        return [p for p in self.pairs if p.a is not None and p.b is not None]

    @property
    def any_bad(self) -> bool:
        """A cell is bad on either side: joined or held by one side only."""
        return any(p.bad_a or p.bad_b for p in self.pairs)

    @property
    def incomplete(self) -> bool:
        """A side has a cell that gives no answer (unreadable, stale, not run)."""
        return bool(self.gaps[0] or self.gaps[1])

    @property
    def undecided(self) -> bool:
        """A side has a cell that ran and could not tell (`ambiguous`): no answer either."""
        return any(r is not None and r.verdict in UNDECIDED
                   for p in self.pairs for r in (p.a, p.b))

    def _side(self, p: Pair, side: int) -> str:
        """A side's cell in words, else why it has none."""
        res = p.a if side == 0 else p.b
        if res is not None:
            return cell_text(res)
        other = p.b if side == 0 else p.a
        return self.gaps[side].get(other.id, "not in this run") if other else "-"

    def sentences(self) -> list[str]:
        """Where the two sides differ, one sentence per scenario, side and verdict."""
        groups: dict[tuple[str, str, str], list[Pair]] = {}
        other: list[str] = []
        for p in self.joined:
            if p.one_run and p.a is not None and p.b is not None and (
                    p.a.verdict != p.b.verdict or p.a.rule != p.b.rule):
                names = (self.a_name, self.b_name)
                other.append(f"{p.a.scenario.id} {self._where_pair(p)}: host busy, not "
                             "compared: a slowdown seen in one run on "
                             f"{_join_words([names[i] for i in p.one_run])}, not "
                             "replicated (a run again that reads it too would tell)")
            if not p.differs:
                continue
            assert p.a is not None and p.b is not None
            va, vb = str(p.a.verdict), str(p.b.verdict)
            scenario = p.a.scenario.id
            if p.grew_apart:
                other.append(f"{scenario} {self._where_pair(p)}: {va} on both, by "
                             f"{carrier_words(p.a)} on {self.a_name}, by "
                             f"{carrier_words(p.b)} on {self.b_name}")
            elif p.bad_a != p.bad_b and (va in GOOD or vb in GOOD):
                side, verdict = ("a", va) if p.bad_a else ("b", vb)
                groups.setdefault((scenario, side, verdict), []).append(p)
            else:
                where = self._where_pair(p)
                other.append(f"{scenario} {where}: {va} on {self.a_name}, {vb} on "
                             f"{self.b_name}")
        out = []
        for (scenario, side, verdict), pairs in groups.items():
            bad_name = self.a_name if side == "a" else self.b_name
            good_name = self.b_name if side == "a" else self.a_name
            verb = kind(verdict).verb
            if self.mode == "hosts" and self.same_host:
                images = _join_words(sorted({p.key[0] for p in pairs}, key=_index(pairs)))
                edits = key_changes(pairs)
                out.append(f"{scenario} {verb} with {images} in {bad_name}, not in "
                           f"{good_name}: " + (
                               f"the runs differ in what they ran ({edits})" if edits else
                               "one run decided twice (a `report --reanalyze` copy: other "
                               "analysis settings or rules), not a difference between runs"
                               if all(same_run(p) for p in pairs) else
                               "differs between runs on the same host (noise or a changed "
                               "environment; re-run to confirm)"))
            elif self.mode == "hosts":
                images = _join_words(sorted({p.key[0] for p in pairs}, key=_index(pairs)))
                out.append(f"{scenario} {verb} only on {bad_name} with {images} "
                           f"(not on {good_name})")
            else:
                cells = [c for p in pairs if (c := p.a if side == "a" else p.b) is not None]
                gpus = sorted({" + ".join(gpu_names(c)) or c.gpu.label for c in cells})
                out.append(f"{scenario} {verb} only with {bad_name} (not with {good_name}) "
                           f"on {_join_words(gpus)}")
        return out + other

    def _where_pair(self, p: Pair) -> str:
        return f"with {p.key[0]}" if self.mode == "hosts" else f"on {p.key[0]}"

    def render(self, out: TextIO, width: int | None = None) -> None:
        """The joined cells' table (`*` where they differ), wrapped to `width`; sentences."""
        body = []
        ratios: list[float] = []
        for p in self.pairs:
            ratio = ""
            if p.a is not None and p.b is not None:
                sa, sb = p.a.summary.median_step_s, p.b.summary.median_step_s
                if sa and sb:
                    ratios.append(sb / sa)
                    ratio = f"{sb / sa:.2f}x"
            body.append(["*" if p.differs else "", *p.key, self._side(p, 0),
                          self._side(p, 1), ratio])
        header = ["", *self.key_names, self.a_name, self.b_name, STEP_HEADER]
        sides = (len(header) - 3, len(header) - 2)     # A's and B's verdict columns
        cells, heads = (column_limits(header, body, width, sides) if width is not None
                        else (None, None))
        out.write(tabulate(body, headers=header, tablefmt="simple", disable_numparse=True,
                           maxcolwidths=cells, maxheadercolwidths=heads) + "\n")
        one_sided = len(self.joined) < len(self.pairs)
        said = self.sentences() or [
            f"no differences in verdict between {self.a_name} and {self.b_name}"
            + (f" in the {len(self.joined)} cells both hold" if one_sided else "")]
        for name, only in ((self.a_name, [p for p in self.pairs if p.b is None]),
                           (self.b_name, [p for p in self.pairs if p.a is None])):
            if only:
                said.append(f"only on {name}: " + ", ".join(
                    f"{'/'.join(p.key)} ({cell_text(r)})" for p in only
                    if (r := p.a or p.b) is not None))
        held = {r.id for p in self.pairs for r in (p.a, p.b) if r is not None}
        for name, gaps in zip((self.a_name, self.b_name), self.gaps, strict=True):
            lost = [f"{cid} ({why})" for cid, why in sorted(gaps.items()) if cid not in held]
            if lost:
                said.append(f"no answer on {name}: {', '.join(lost)}")
        if ratios:
            said.append(single_runs(ratios))
        said.extend(f"fix: {line}" for line in self.fixes)
        lines = said
        if width is not None:
            lines = [textwrap.fill(x, width, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False) for x in lines]
        out.write("\n" + "\n".join(lines) + "\n")


# One run a side, at different times: labelled so it is not read as a change.
STEP_HEADER = "step B/A (1 run each)"


def single_runs(ratios: Sequence[float]) -> str:
    """What the table's step ratios are, with their spread."""
    lo, hi = min(ratios), max(ratios)
    spread = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x-{hi:.2f}x"
    return (f"step B/A ({spread}): the median step of one run on each side, on the wall "
            "clock at different times, its waits for a CPU in it: single runs, not a "
            "measured change; a change in time is one that interleaved rounds confirm "
            "(\"time ... baseline\" in a cell)")


GAP = 2          # tabulate's "simple" format: two spaces between columns
PAD = 2          # and a header two wider than its words (tabulate's MIN_PADDING)
NARROWEST = 8    # a wrapped column is never made narrower


def column_limits(header: list[str], body: list[list[str]], width: int,
                  first: Sequence[int] = ()) -> tuple[list[int | None], list[int]]:
    """Column widths that fit `width`, narrowing the widest (of `first`, then all)."""
    def widest_line(text: str) -> int:
        return max((len(line) for line in text.splitlines()), default=0)

    sizes = [max([widest_line(h) + PAD, *(widest_line(str(r[i])) for r in body)])
             for i, h in enumerate(header)]
    room = width - GAP * (len(sizes) - 1)
    for pick in (list(first), list(range(len(sizes)))):
        while sum(sizes) > room and pick:
            widest = max(pick, key=sizes.__getitem__)
            if sizes[widest] <= NARROWEST:
                break
            sizes[widest] -= 1
    return ([n if n > 0 else None for n in sizes],
            [max(1, n - PAD) for n in sizes])


def _index(pairs: list[Pair]) -> Callable[[str], int]:
    order = {p.key[0]: r.image.index for p in pairs if (r := p.a or p.b) is not None}
    return lambda label: order.get(label, 0)


def _join_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _join(a: Mapping[str, Result], b: Mapping[str, Result],
          key: Callable[[Result], tuple[str, ...]]) -> list[Pair]:
    ka = {key(r): r for r in a.values()}
    kb = {key(r): r for r in b.values()}
    order = {k: (r.image.index, k) for k, r in {**kb, **ka}.items()}
    return [Pair(k, ka.get(k), kb.get(k)) for k in sorted(order, key=order.__getitem__)]


def compare_hosts(a: Mapping[str, Result], b: Mapping[str, Result],
                  fallback: tuple[str, str] = ("A", "B")) -> Comparison:
    """Join two hosts' results on (image, scenario); GPU label too if a host has several."""
    def count(results: Mapping[str, Result]) -> int:
        keys = [(r.image.label, r.scenario.id) for r in results.values()]
        return max(Counter(keys).values(), default=0)

    several = count(a) > 1 or count(b) > 1
    names = ("image", "scenario", "gpu") if several else ("image", "scenario")

    def key(r: Result) -> tuple[str, ...]:
        base = (r.image.label, r.scenario.id)
        return (*base, r.gpu.label) if several else base

    an, bn = side_names(a, b, fallback)

    def gpu(results: Mapping[str, Result]) -> str | None:
        return _most_common([" + ".join(gpu_names(r)) for r in results.values()
                             if gpu_names(r)])

    same = same_machine(a, b) and gpu(a) == gpu(b)
    return Comparison("hosts", an, bn, names, _join(a, b, key), same)


def compare_images(a: Mapping[str, Result], b: Mapping[str, Result], image_a: str,
                   image_b: str) -> Comparison:
    """Join image `image_a`'s cells in `a` with `image_b`'s in `b` on (GPU, scenario)."""
    def only(results: Mapping[str, Result], image: str) -> dict[str, Result]:
        return {k: r for k, r in results.items() if r.image.label == image}

    def key(r: Result) -> tuple[str, ...]:
        return (r.gpu.label, r.scenario.id)

    return Comparison("images", image_a, image_b, ("gpu", "scenario"),
                      _join(only(a, image_a), only(b, image_b), key))


# Two `harness fit` directories: both sides' boundaries, side by side
Row = dict[str, Any]


def fit_rows(path: Path) -> list[Row] | None:
    """The rows of a fit directory's fit.json; None when it is not a fit directory.

    Raises:
        InputError: a fit.json that cannot be read.
    """
    file = path / "fit.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        rows = data["rows"]
        assert isinstance(rows, list)
    except (OSError, ValueError, KeyError, AssertionError, TypeError) as exc:
        raise InputError(f"{file}: not a fit.json harness wrote ({exc}); run `harness fit` "
                         "again") from exc
    return [r for r in rows if isinstance(r, dict)]


def per_unit(row: Row, param: str) -> str:
    """The memory line that predicts the boundary ("rss_anon 47.4 MiB per batch")."""
    pred = row.get("prediction") or {}
    source = pred.get("source") if isinstance(pred, dict) else None
    line = (row.get("memory") or {}).get(source) if source else None
    if not isinstance(line, dict):
        return "-"
    value = line.get("per_unit")
    return f"{source} {value / 2**20:.1f} MiB per {param}" if isinstance(value, int | float) \
        else "-"


@dataclass(frozen=True)
class FitComparison:
    """Two sides' boundaries joined on (image, scenario, GPU), for table, words and JSON."""

    names: tuple[str, str]
    param: str
    table: list[list[object]]
    said: list[str]
    rows: list[dict[str, object]]
    worse: bool

    @property
    def exit_code(self) -> int:
        """1 when B fits less than A beyond one step."""
        return EXIT_REGRESSION if self.worse else EXIT_OK

    def to_json(self) -> dict[str, object]:
        return {"a": self.names[0], "b": self.names[1], "param": self.param,
                "rows": self.rows, "differences": self.said}

    def text(self) -> str:
        a, b = self.names
        return (tabulate(self.table, headers=["", "image", "scenario", "gpu", f"{a} fits",
                                              f"{b} fits", f"{a} memory", f"{b} memory"],
                         tablefmt="simple") + "\n\n"
                + ("\n".join(self.said) if self.said else
                   "the same boundary on both sides (within one step)") + "\n")


def compare_fits(a: list[Row], b: list[Row], names: tuple[str, str],
                 param: str) -> FitComparison:
    """The two sides' boundaries side by side.

    Raises:
        InputError: the two share no (image, scenario, GPU).
    """
    def key(r: Row) -> tuple[str, str, str]:
        return (str(r.get("image")), str(r.get("scenario")), str(r.get("gpu")))

    left, right = {key(r): r for r in a}, {key(r): r for r in b}
    joined = [k for k in left if k in right]
    if not joined:
        raise InputError(f"{names[0]} and {names[1]} share no (image, scenario, GPU): "
                         "nothing to compare\n  fix: fit the same matrix on both hosts")
    table: list[list[object]] = []
    said: list[str] = []
    rows: list[dict[str, object]] = []
    worse = False
    for k in sorted(joined):
        fa, fb = left[k].get("max_fit"), right[k].get("max_fit")
        smaller = isinstance(fa, int) and (not isinstance(fb, int) or fb < fa - 1)
        larger = isinstance(fb, int) and (not isinstance(fa, int) or fa < fb - 1)
        worse = worse or smaller
        mark = "*" if smaller or larger else ""
        rows.append({"image": k[0], "scenario": k[1], "gpu": k[2], "a_fits": fa, "b_fits": fb,
                     "differs": bool(mark), "smaller": smaller})
        table.append([mark, k[0], k[1], k[2], fa if fa is not None else "none fits",
                      fb if fb is not None else "none fits",
                      per_unit(left[k], param), per_unit(right[k], param)])
        if smaller or larger:
            said.append(f"{k[1]} with {k[0]} on {k[2]}: fits {param}={fa} on {names[0]}, "
                        f"{fb} on {names[1]}")
    return FitComparison(names, param, table, said, rows, worse)


def param_of(path: Path) -> str:
    try:
        data = json.loads((path / "fit.json").read_text(encoding="utf-8"))
        return str(data.get("param") or "value")
    except (OSError, ValueError):
        return "value"


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
