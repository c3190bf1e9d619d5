"""First bad version per row (pure): verdicts in image order in, answer out; and the
(first bad, last good) pairs that explain, culprit and `--find-cause` take on (`pairs`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from harness.analysis.kinds import (
    BAD,
    GOOD,
    KINDS,
    MEMORY,
    NOT_MEASURED,
    NOT_RUN,
    SELF_EXIT,
    STALE,
    UNKNOWN,
    UNREADABLE,
)
from harness.analysis.rules import TIME_UNDECIDED
from harness.matrixfile.model import DEFAULT_BUDGET_S
from harness.result.model import CellResult, Planned, image_places

FRAMEWORKS = ("tensorflow", "nvidia-tensorflow", "torch", "jax", "onnxruntime", "onnx",
              "numpy", "keras", "nvidia-", "scikit-image", "opencv")
# Installers a venv or image brings along: never swapped by culprit, nor pinned in a draft.
TOOLING = frozenset({"pip", "setuptools", "wheel", "distribute"})
# The recorded env vars that name the image's software stack: compared between G and B.
STACK_ENV_KEYS = ("CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_TENSORFLOW_VERSION",
            "TENSORFLOW_VERSION")


@dataclass(frozen=True)
class RowAnswer:
    row: str
    gpu: str
    scenario: str
    cells: list[tuple[str, str, str]]          # (image label, verdict, cell id) in order
    first_bad: str | None
    last_good: str | None
    contiguous: bool
    sentence: str
    diff: list[tuple[str, str, str]] = field(default_factory=list)  # (what, good, bad)
    scenario_error: str | None = None   # the same error on every image: a scenario bug
    # Images that could hold the first bad but told nothing: nothing is named across them.
    gap: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)
        return out


def free_of(result: CellResult, fault: str) -> bool:
    """Whether a cell showed `fault` absent: good, or (for memory) every memory source
    that read enough read stable, in a run that went to its end: undecided by step time
    alone, or decided on time only (a regression or slowdown), since step time says
    nothing of memory and a busy host can stretch it either way. A source with too few
    readings (a USS read rarely on a busy host) says nothing either way; the one an `ok`
    rests on never is (rule `insufficient` would have decided the cell)."""
    if result.verdict in GOOD:
        return True
    if fault not in KINDS or KINDS[fault].attribute != MEMORY:
        return False
    kind = KINDS.get(result.verdict)
    on_time_alone = (result.rule in TIME_UNDECIDED if result.verdict not in BAD else
                     kind is not None and not kind.cut_short and kind.attribute != MEMORY)
    read = [t.kind for t in result.memory.values() if t.kind != "insufficient"]
    return (on_time_alone and bool(read)
            and all(k in ("stable", "plateau") for k in read))


def first_bad(ordered: Sequence[tuple[str, str]]) -> tuple[str | None, str | None, bool]:
    """(first bad, last good before it, bad cells contiguous?) over (label, verdict) pairs.

    The first bad after a good one is where a regression entered; with none, the first bad
    is named alone. Undecided cells are skipped.
    """
    last_good: str | None = None
    first: str | None = None
    good_before: str | None = None
    bad_at: list[int] = []
    for i, (label, verdict) in enumerate(ordered):
        if verdict in GOOD:
            last_good = label
        elif verdict in BAD:
            bad_at.append(i)
            if first is None and last_good is not None:
                first, good_before = label, last_good
    if first is None and bad_at:
        first = ordered[bad_at[0]][0]
    decided = [i for i, (_, v) in enumerate(ordered) if v in GOOD | BAD]
    contiguous = True
    if bad_at:
        span = [i for i in decided if bad_at[0] <= i <= bad_at[-1]]
        contiguous = all(i in bad_at for i in span)
    return first, good_before, contiguous


def gap_before(ordered: Sequence[tuple[str, str]], bad: str | None) -> list[str]:
    """Images with an unknown verdict between the last good before `bad` and `bad`."""
    labels = [label for label, _ in ordered]
    end = labels.index(bad) if bad is not None else len(ordered)
    start = 0
    for i in range(end):
        if ordered[i][1] in GOOD:
            start = i + 1
    return [label for label, v in ordered[start:end] if v in UNKNOWN]


def fingerprint_diff(good: CellResult, bad: CellResult) -> list[tuple[str, str, str]]:
    """What differs between two cells' fingerprints: image, Python, CUDA env, packages, GPU."""
    out: list[tuple[str, str, str]] = []

    def add(what: str, a: object, b: object) -> None:
        if a != b:
            out.append((what, "-" if a is None else str(a), "-" if b is None else str(b)))

    ga, gb = good.fingerprint, bad.fingerprint
    add("image", good.image.ref or None, bad.image.ref or None)
    add("digest", good.image.digest, bad.image.digest)
    add("python", ga.python, gb.python)
    add("os", ga.platform, gb.platform)
    for key in STACK_ENV_KEYS:
        add(key, ga.env.get(key), gb.env.get(key))
    pa, pb = ga.packages, gb.packages
    # Frameworks first: what a reader looks for in a long pip diff.
    def frameworks_first(name: str) -> tuple[bool, str]:
        return not name.startswith(FRAMEWORKS), name

    for name in sorted(set(pa) | set(pb), key=frameworks_first):
        add(f"pip {name}", pa.get(name), pb.get(name))
    add("gpu", ga.gpu_names() if ga.gpu else None, gb.gpu_names() if gb.gpu else None)
    add("driver", ga.gpu_driver, gb.gpu_driver)
    return out


def scenario_fault(items: Sequence[CellResult]) -> str | None:
    """The agent's message where it could not call the scenario as written (any image)."""
    for r in items:
        if r.end.error is not None and r.end.error.fault == "scenario":
            return r.end.error.message
    return None


def enough_ran(ran: Sequence[CellResult], images: int) -> bool:
    """Whether `ran` speaks for the whole row: at least two ran, or its one image did."""
    return len(ran) >= min(2, max(images, 1))


def same_failure(items: Sequence[CellResult], images: int) -> str | None:
    """'Type: message' when every image that ran failed alike: the scenario is broken."""
    ran = [r for r in items if r.verdict not in NOT_MEASURED]
    if not enough_ran(ran, images) or any(r.verdict != "crash" for r in ran):
        return None
    if all(r.end.error is None and SELF_EXIT in r.reason for r in ran):
        # The step ends the process on every image: the scenario's doing.
        return f"exit code 0 without an end record: {SELF_EXIT}"
    said = set()
    for r in ran:
        err = r.end.error
        if err is None or not err.type:
            return None
        said.add(f"{err.type}: {err.message}".strip())
    return said.pop() if len(said) == 1 else None


def leaked_before_timeout(items: Sequence[CellResult]) -> bool:
    """Whether every image that ran (two or more) timed out and some leaked before it."""
    ran = [r for r in items if r.verdict not in NOT_MEASURED]
    timed = [r for r in ran if r.outcome.timed_out]
    return (len(ran) >= 2 and len(timed) == len(ran)
            and any(r.verdict == "leak" for r in timed))


def all_timed_out(items: Sequence[CellResult], images: int) -> str | None:
    """The fix when every image that ran timed out (the run is too short), else None."""
    ran = [r for r in items if r.verdict not in NOT_MEASURED]
    if not enough_ran(ran, images) or any(r.verdict != "timeout" for r in ran):
        return None
    stuck = sorted({r.reason.split(" (")[0] for r in ran if "did not return" in r.reason})
    if stuck:
        return (f"a call did not return on every image ({'; '.join(stuck)[:300]}): the "
                "scenario waits for something that never comes, on any image; fix the "
                "scenario (its reason names where it waits)")
    limits = sorted({float(v) for r in ran
                     if isinstance(v := r.settings.get("timeout"), int | float)})
    now_limit = f" (now {'/'.join(f'{v:g}s' for v in limits)})" if limits else ""
    return (f"killed at its timeout on every image: the run is too short for the "
            f"scenario; raise `timeout:`{now_limit} or lower {_length_set(ran)}")


def _length_set(ran: Sequence[CellResult]) -> str:
    """The key and value that set the runs' length (`iterations:` or `budget:`)."""
    budgeted = [r.settings for r in ran if r.settings.get("max_iterations") is not None]
    if not budgeted:
        calls = sorted({v for r in ran if isinstance(v := r.settings.get("iterations"), int)})
        return "`iterations:`" + (f" (now {'/'.join(map(str, calls))})" if calls else "")
    said = sorted({f"{v:g}s" if isinstance(v := s.get("budget"), int | float)
                   else f"{DEFAULT_BUDGET_S:g}s, the default" for s in budgeted})
    return f"`budget:` (now {'/'.join(said)})"


def gap_sentence(ordered: Sequence[tuple[str, str]], gap: Sequence[str], bad: str | None,
                 cells: Mapping[str, CellResult]) -> str:
    """A row's headline where images before its first bad told nothing: it is the first
    of them or later (none claimed where only unavailable images follow the last good)."""
    verdicts = dict(ordered)
    unmeasured = [label for label in gap if verdicts[label] in NOT_MEASURED]
    said = [f"{label} {verdicts[label]}" for label in gap if label not in unmeasured]
    if unmeasured:
        said.append("nothing measured for " + ", ".join(
            f"{label} ({cells[label].reason.splitlines()[0].split(': ')[0]})"
            if label in cells and cells[label].reason else label for label in unmeasured))
    unknown = ", ".join(said)
    if bad is None and len(unmeasured) == len(gap):
        return ("no bad image among those measured; " if any(
            v in GOOD for _, v in ordered) else "") + unknown
    return (f"{unknown}: first bad is {gap[0]} or later"
            + (f", up to {bad}" if bad is not None else ", if any"))


def answer_rows(results: Mapping[str, CellResult], planned: Sequence[Planned] = (),
                unreadable: Collection[str] = (), stale: Collection[str] = ()
                ) -> list[RowAnswer]:
    """Group cell results by row, order by image index, name the first bad.

    Args:
        planned: The cells the sweep planned; those without a result count as gaps.
    """
    rows: dict[str, list[CellResult]] = {}
    for res in results.values():
        rows.setdefault(res.row, []).append(res)
    # (a reused cell may carry the index of an older matrix: place by the plan)
    place = image_places(results, planned)

    def index(res: CellResult) -> int:
        return place[res.image.label]
    absent: dict[str, list[tuple[int, str, str, str]]] = {}
    for p in planned:
        if p.id not in results:
            absent.setdefault(p.row, []).append(
                (p.index, p.image, STALE if p.id in stale else
                 UNREADABLE if p.id in unreadable else NOT_RUN, p.id))
    answers: list[RowAnswer] = []
    for row in sorted(set(rows) | set(absent)):
        items = sorted(rows.get(row, []), key=index)
        line = sorted([(index(r), r.image.label, str(r.verdict), r.id) for r in items]
                      + absent.get(row, []))
        ordered = [(label, verdict) for _, label, verdict, _ in line]
        leaked = leaked_before_timeout(items)
        if leaked:
            # Leaks before a row-wide timeout are findings; a bare timeout is not.
            ordered = [(label, "ok" if verdict == "timeout" else verdict)
                       for label, verdict in ordered]
        bad, good, contiguous = first_bad(ordered)
        fault = scenario_fault(items)
        images = len(line)      # the row's images, run or planned
        broken = fault or same_failure(items, images)
        too_short = all_timed_out(items, images) if broken is None and not leaked else None
        gap = gap_before(ordered, bad)
        if fault is not None:
            bad, good, contiguous, gap = None, None, True, []
            sentence = (f"the scenario's fault, not the image's ({fault}); fix the "
                        "scenario, no image is to blame")
        elif broken is not None:
            bad, good, contiguous, gap = None, None, True, []
            sentence = (f"the scenario fails on every image ({broken}); fix the scenario, "
                        "these are not findings about the images")
        elif too_short is not None:
            # Like a crash on every image: the matrix's input to fix, not a finding.
            bad, good, contiguous, gap, broken = None, None, True, [], too_short
            sentence = f"{too_short}; these are not findings about the images"
        elif gap:
            sentence = gap_sentence(ordered, gap, bad, {r.image.label: r for r in items})
            bad, good = None, None
        elif bad is None:
            sentence = "no bad image"
        elif good is None:
            sentence = f"bad from the first image ({bad}); no good image before it"
        else:
            sentence = f"first bad: {bad} (last good: {good})"
        if bad is not None and not contiguous:
            sentence += "; bad cells are not contiguous (flaky, or fixed then broken again)"
        diff: list[tuple[str, str, str]] = []
        if bad is not None and good is not None:
            by_label = {r.image.label: r for r in items}
            diff = fingerprint_diff(by_label[good], by_label[bad])
        gpu, scenario = ((items[0].gpu.label, items[0].scenario.id) if items
                         else tuple(row.split(".", 1)) if "." in row else ("", row))
        answers.append(RowAnswer(row, gpu, scenario,
                                 [(label, verdict, cid) for _, label, verdict, cid in line],
                                 bad, good, contiguous, sentence, diff, broken, gap))
    return answers


# ---------------------------------------------------------------- bisect planner
@dataclass(frozen=True)
class BisectStep:
    """The next bisect step over images in order (0 = oldest): "probe" image `index`,
    "found" (first bad `hi`, last good `lo`), or "stop" (`why`)."""

    action: str
    index: int | None
    lo: int | None
    hi: int | None
    why: str = ""
    skipped: tuple[int, ...] = ()


def decided(verdicts: Sequence[str]) -> str | None:
    """"good", "bad", or None: the first decided verdict among a probe's repeats."""
    for v in verdicts:
        if v in GOOD:
            return "good"
        if v in BAD:
            return "bad"
    return None


def plan_bisect(n: int, observed: Mapping[int, Sequence[str]], repeats: int = 1) -> BisectStep:
    """The next bisect step over `n` images (version order) from every verdict seen so far
    (`observed`: index -> verdicts, oldest first); pure, call it in a loop. An image still
    undecided after `repeats` more probes is skipped (`git bisect skip`).

    Raises: ValueError: fewer than two images, or an observed index out of range.
    """
    if n < 2:
        raise ValueError(f"bisect needs at least two images, got {n}")
    if any(not 0 <= i < n for i in observed):
        raise ValueError(f"observed index out of range 0..{n - 1}: {sorted(observed)}")

    def state(i: int) -> str:
        seen = observed.get(i, ())
        got = decided(seen)
        if got is not None:
            return got
        if not seen:
            return "unknown"
        if "not-applicable" in seen or len(seen) > repeats:
            return "skip"
        return "retry"

    for end, want in ((0, "good"), (n - 1, "bad")):
        s = state(end)
        if s in ("unknown", "retry"):
            return BisectStep("probe", end, None, None, f"endpoint must be {want}")
        if s == "skip":
            return BisectStep("stop", end, None, None,
                              f"endpoint stayed undecided ({', '.join(observed[end])})")
        if s != want:
            return BisectStep("stop", end, None, None, f"endpoint is {s}, must be {want}")
    hi = min(i for i in range(n) if state(i) == "bad")
    lo = max(i for i in range(hi) if state(i) == "good")
    skipped = tuple(i for i in range(lo + 1, hi) if state(i) == "skip")
    retry = [i for i in range(lo + 1, hi) if state(i) == "retry"]
    if retry:
        return BisectStep("probe", retry[0], lo, hi, "undecided, probing again", skipped)
    todo = [i for i in range(lo + 1, hi) if state(i) == "unknown"]
    if not todo:
        return BisectStep("found", None, lo, hi, "", skipped)
    mid = (lo + hi) // 2

    def nearest(i: int) -> tuple[int, int]:
        return abs(i - mid), i

    return BisectStep("probe", min(todo, key=nearest), lo, hi, "", skipped)


# The pairs a row's first bad and last good cell make
@dataclass(frozen=True)
class Pair:
    """A cell to explain and the cell it is matched with (its row's last good one)."""

    cell: str
    good: str | None
    row: str


def pairs(results: Mapping[str, CellResult], only: str | None = None,
          planned: Sequence[Planned] = (), unreadable: Collection[str] = ()) -> list[Pair]:
    """Each row's (first bad, last good), never across a gap; or only the cell `only`."""
    out: list[Pair] = []
    for row in answer_rows(results, planned, unreadable):
        ids = {label: cid for label, _, cid in row.cells}
        bad = ids.get(row.first_bad) if row.first_bad else None
        good = ids.get(row.last_good) if row.last_good else None
        if bad is not None and good is None:
            # Bad from the first image: paired with the first image free of its fault.
            fault = results[bad].verdict
            after = [cid for _, _, cid in row.cells
                     if cid in results and free_of(results[cid], fault)]
            good = next((cid for cid in after if image_after(results, cid, bad)), None)
        if only is not None:
            if only in ids.values():
                return [Pair(only, good if only == bad else None, row.row)]
            continue
        if bad is not None:
            out.append(Pair(bad, good, row.row))
    return out


def unpaired(results: Mapping[str, CellResult], planned: Sequence[Planned] = (),
             unreadable: Collection[str] = ()) -> list[str]:
    """Rows with a bad cell that `pairs` leaves out (a gap before it), with why."""
    return [f"{row.row}: {row.sentence}; not explained (name a CELL to explain it alone)"
            for row in answer_rows(results, planned, unreadable)
            if row.gap and any(verdict in BAD for _, verdict, _ in row.cells)]


def image_after(results: Mapping[str, CellResult], cid: str, other: str) -> bool:
    return cid in results and other in results and (
        results[cid].image.index > results[other].image.index)
