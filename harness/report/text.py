"""Small text helpers the renderers share: Markdown table cells, signed KiB, a ratio
against the baseline with what it rests on."""

from __future__ import annotations

import re

from harness.analysis.records import VsBaseline

# A name Python gives code in angle brackets (`step.<locals>.<genexpr>`, `<module>`):
# shown as code in report.md, as the traceback and the console say it, never `&lt;locals>`.
PY_ANGLED = re.compile(r"[^\s`|<>]*(?:<(?:locals|genexpr|lambda|module|listcomp|dictcomp|"
                       r"setcomp|string|stdin)>[^\s`|<>]*)+")
TRAILING = ",;:.)]"


def _code(m: re.Match[str]) -> str:
    token = m.group(0)
    kept = token.rstrip(TRAILING)
    lead = "(" if kept.startswith("(") else ""
    return f"{lead}`{kept[len(lead):]}`{token[len(kept):]}"


def md(text: object) -> str:
    """`text` safe inside a Markdown table cell (no pipes, newlines or raw HTML); a
    Python name in angle brackets is a code span, read the same on GitHub and on a
    terminal (`harness report DIR --format md`)."""
    said = str(text).replace("|", "\\|").replace("\n", " ")
    if "<" not in said:     # no raw HTML and no angled name (10,000 cells' words: 40,000)
        return said
    parts = PY_ANGLED.split(said)
    names = [_code(m) for m in PY_ANGLED.finditer(said)]
    out = parts[0].replace("<", "&lt;")
    for name, rest in zip(names, parts[1:], strict=True):
        out += name + rest.replace("<", "&lt;")
    return out


def steps_vs_baseline(vs: VsBaseline) -> str:
    """The step-time ratio against the baseline as far as it is known: the interleaved
    rounds' ratio with its interval, confirmed or not, and what they cost; else the pooled
    ratio marked unconfirmed (two runs one after the other: host drift is in it).

    "1.52x (CI 1.31..1.76) in 3 interleaved rounds (8.2 s), confirmed slower" or
    "1.69x pooled (p=1e-30), suspected slower, unconfirmed: no interleaved rounds"."""
    conf, steps = vs.confirmation, vs.steps
    if conf is not None:
        n = len(conf.rounds)
        cost = f"{n} interleaved round{'s' if n != 1 else ''}" + (
            f" ({conf.seconds:.1f} s)" if conf.seconds else "")
        if conf.confirmed:
            said = f"confirmed {conf.direction}"
        elif conf.direction != "~":
            said = f"{conf.direction}, not the {conf.suspected} suspected"
        elif conf.suspected != "~":
            said = f"{conf.suspected} not confirmed"
        else:
            said = "no change"
        return f"{conf.interval()} in {cost}, {said}"
    if steps is None:
        return "-"
    pooled = f"{steps.ratio:.2f}x pooled (p={steps.p_value:.2g})"
    if steps.direction == "~":
        # Which threshold held it back (the ratio, the p-value or the step floor) is the
        # matrix's analysis block's to say; the words do not guess.
        return f"{pooled}, not a change by the pooled test's thresholds"
    return f"{pooled}, suspected {steps.direction}, unconfirmed: no interleaved rounds"
