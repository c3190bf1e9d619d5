"""A bad row's `--find-cause` journey (`days.journey` runs it), as data and in words.
What each step found (`Journey`) becomes the one summary a user acts on ("went
bad at image B (last good G): multidict 6.4.4 -> 6.6.3; with multidict 6.4.4: ok; with
multidict 6.6.3: leak: ...; at multidict_pop.py:17 ...; fixed from image C (multidict
6.6.4). Workaround: multidict<6.6.3 or >=6.6.4") and its parts as results.json keeps
them (`facts`): pure, every figure the run's own, read from the results and the answers
the steps left. Stored as one `cause/<row>.json` per bad row, read back for the report
model and every renderer by `answers.causes`, below them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.analysis.codediff import NOT_FETCHED, CodeAnswer
from harness.analysis.kinds import BAD, GOOD, kind
from harness.answers.explained import Explanation
from harness.answers.pairs import Pair
from harness.answers.search import RowAnswer
from harness.result.codec import JSON
from harness.result.model import CellResult

NOT_A_DATE_AXIS = "not a date axis"
IMAGE, HOST, UNTOLD = "the image", "the host", "cannot tell"


@dataclass(frozen=True)
class DayAnswer:
    """The date axis's answer for a row: the last good day, the first bad day and the
    packages whose resolution changed between them, with their upload times."""

    last_good: str
    first_bad: str
    changed: tuple[str, ...]      # "multidict 6.4.3 -> 6.6.3 (uploaded 2025-06-30 14:02)"
    # (package, last good day's version, first bad day's version), None: not installed
    moved: tuple[tuple[str, str | None, str | None], ...] = ()


@dataclass(frozen=True)
class HostAnswer:
    """The row's first bad image on another host of a `hosts:` sweep."""

    host: str
    cell: str
    verdict: str
    text: str                     # the cell in words (`cell_text`), or why it did not run
    how: str                      # "the sweep's cell", "run", "reused"

    @property
    def changed_by(self) -> str:
        """Bad there too: the image changed the verdict; good there: the host did."""
        return IMAGE if self.verdict in BAD else HOST if self.verdict in GOOD else UNTOLD

    def words(self, image: str, here: str) -> str:
        if self.changed_by == IMAGE:
            return (f"on {self.host} too, {image} is bad ({self.text}): the image changed "
                    "the verdict, not the host")
        if self.changed_by == HOST:
            return (f"on {self.host}, {image} is good ({self.text}): the host changed the "
                    f"verdict ({here} against {self.host})")
        return (f"on {self.host}, {image} is {self.verdict} ({self.text}): cannot tell the "
                "host from the image there")


@dataclass
class Journey:
    """One row's journey, as its steps find it."""

    pair: Pair
    row: RowAnswer
    day: DayAnswer | None = None
    where: Explanation | None = None
    culprit: Mapping[str, object] | None = None   # culprit.json as written
    fixed: tuple[str, str] | None = None            # (image label, cell id)
    code: tuple[CodeAnswer, ...] = ()               # the proved change's code, read
    hosts: list[HostAnswer] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def call_site(where: Explanation | None) -> str | None:
    """The site that grew most in the first bad cell against the last good one."""
    if where is None or not where.table:
        return None
    return where.table[0][1]


def _changes(culprit: Mapping[str, object] | None) -> list[dict[str, str | None]]:
    """The proved set, each {name, good, bad}; empty unless culprit found one."""
    if culprit is None or culprit.get("status") != "found":
        return []
    answer = culprit.get("answer")
    return [{k: (None if c.get(k) is None else str(c.get(k))) for k in ("name", "good", "bad")}
            for c in (answer if isinstance(answer, list) else []) if isinstance(c, dict)]


def _probe(culprit: Mapping[str, object], side: str, names: set[str]) -> Mapping[str, object]:
    probes = culprit.get("probes")
    for p in probes if isinstance(probes, list) else []:
        if isinstance(p, dict) and p.get("side") == side and isinstance(
                p.get("changes"), list) and set(map(str, p["changes"])) == names:
            return p
    return {}


def _version(c: Mapping[str, str | None], side: str) -> str:
    v = c.get(side)
    return f"{c['name']} {v}" if v is not None else f"without {c['name']}"


def fixed_versions(j: Journey, results: Mapping[str, CellResult]) -> dict[str, str]:
    """The culprit's packages as the fixed image has them."""
    if j.fixed is None or j.fixed[1] not in results:
        return {}
    packages = results[j.fixed[1]].fingerprint.packages
    return {str(c["name"]): packages[str(c["name"])] for c in _changes(j.culprit)
            if str(c["name"]) in packages}


def workaround(j: Journey, results: Mapping[str, CellResult]) -> str | None:
    """Pins that keep the row good, naming only versions this run measured: the last
    good one, and the fixed one where a later image fixed it; the releases between the
    last good and the first bad, which nothing here ran, are said to be untested."""
    fixed = fixed_versions(j, results)
    # On a date axis the first bad version is the first bad day's, not the sweep's B's.
    first_bad = {name: bad for name, _, bad in j.day.moved} if j.day is not None else {}
    said = []
    for c in _changes(j.culprit):
        name, good = str(c["name"]), c.get("good")
        bad = first_bad.get(name) or c.get("bad")
        if bad is None:
            said.append(f"{name}=={good}")
        elif good is None:
            said.append(f"without {name}")
        else:
            later = fixed.get(name)
            pins = [f"{name}=={good}"] + (
                [f"{name}=={later}"] if later and later not in (bad, good) else [])
            said.append(" or ".join(pins) + f" ({'both' if len(pins) > 1 else 'the one'} "
                        f"measured good; no release between {good} and {bad} was tested)")
    return ", ".join(said) or None


def _unproved(culprit: Mapping[str, object]) -> str:
    """Culprit's answer where it named no package: outside the packages (with what else
    changed between G and B, as the fingerprints say), or why no set was proved."""
    if culprit.get("status") != "outside":
        return f"no package proved the cause ({culprit.get('status')})"
    diff = culprit.get("difference")
    other = diff.get("other") if isinstance(diff, dict) else None
    said = [f"{o.get('what')} {o.get('good')} -> {o.get('bad')}"
            for o in (other if isinstance(other, list) else []) if isinstance(o, dict)]
    return ("not the packages: B with every package change undone is still bad"
            + (f"; what else changed: {', '.join(said[:4])}" if said else ""))


def _only_memory(cell: str, results: Mapping[str, CellResult]) -> str:
    """", for memory only: it is slower (regression: ...)" where the image that fixed a
    leak is itself a time finding; else ""."""
    res = results.get(cell)
    if res is None or res.verdict in GOOD:
        return ""
    return f" for memory only: it {kind(res.verdict).verb} ({res.reason.split('; ')[0]})"


def summary(j: Journey, results: Mapping[str, CellResult]) -> str:
    """The row's journey in one paragraph."""
    bad = results[j.pair.cell]
    good = results.get(j.pair.good) if j.pair.good else None
    if j.day is not None:
        head = f"went bad between {j.day.last_good} and {j.day.first_bad}"
        head += f": {', '.join(j.day.changed)}" if j.day.changed else ""
    elif good is not None and good.image.index < bad.image.index:
        head = f"went bad at image {bad.image.label} (last good {good.image.label})"
    else:
        head = f"bad from the first image, {bad.image.label}"
    parts = [f"{head}: {bad.verdict}"]
    changes = _changes(j.culprit)
    if changes and j.culprit is not None:
        names = {str(c["name"]) for c in changes}
        undo, apply = _probe(j.culprit, "undo", names), _probe(j.culprit, "apply", names)
        parts.append(", ".join(f"{c['name']} {c['good'] or '-'} -> {c['bad'] or '-'}"
                               for c in changes))
        parts.append(f"with {', '.join(_version(c, 'good') for c in changes)}: "
                     f"{undo.get('verdict') or undo.get('outcome')}")
        parts.append(f"with {', '.join(_version(c, 'bad') for c in changes)}: "
                     f"{apply.get('text') or apply.get('outcome')}")
    elif j.culprit is not None:
        parts.append(_unproved(j.culprit))
    site = call_site(j.where)
    parts.append(f"at {site}" if site else "no call site (see explain's step)")
    parts += [a.words for a in j.code if a.status != NOT_FETCHED]   # not read: a step's line
    if j.fixed is not None:
        versions = fixed_versions(j, results)
        # On a date axis (`NAME@DATE` environments) the fix is a day, as the head is.
        fixed = (f"fixed from {j.fixed[0].rpartition('@')[2]}" if j.day is not None
                 else f"fixed from image {j.fixed[0]}")
        parts.append(fixed + (
            f" ({', '.join(f'{n} {v}' for n, v in versions.items())})" if versions else "")
            + _only_memory(j.fixed[1], results))
    else:
        parts.append("no later good image")
    parts += [h.words(bad.image.label, bad.host.label) for h in j.hosts]
    text = "; ".join(parts)
    fix = workaround(j, results)
    return text + (f". Workaround: {fix}" if fix else "")


def facts(j: Journey, results: Mapping[str, CellResult]) -> dict[str, JSON]:
    """The summary's parts as data (results.json's `causes`)."""
    bad = results[j.pair.cell]
    good = results.get(j.pair.good) if j.pair.good else None
    day: JSON = NOT_A_DATE_AXIS if j.day is None else {
        "last_good": j.day.last_good, "first_bad": j.day.first_bad,
        "changed": list(j.day.changed)}
    cause: JSON = None if j.culprit is None else {
        "status": str(j.culprit.get("status")),
        "changes": [dict(c) for c in _changes(j.culprit)]}
    fixed: JSON = None if j.fixed is None else {
        "image": j.fixed[0], "cell": j.fixed[1],
        "versions": dict(fixed_versions(j, results))}
    return {"first_bad": bad.image.label, "verdict": bad.verdict,
            "first_bad_cell": j.pair.cell, "last_good_cell": j.pair.good,
            "last_good": good.image.label if good is not None else None,
            "day": day, "call_site": call_site(j.where), "cause": cause,
            "code": [a.to_json() for a in j.code], "fixed": fixed,
            "workaround": workaround(j, results),
            "hosts": [{"host": h.host, "cell": h.cell, "verdict": h.verdict, "how": h.how,
                       "changed_by": h.changed_by} for h in j.hosts]}
