"""What pip or uv said when it would not install a venv's requirements, in one line
(`short_pip_error`): the local runtime's reason for an image it cannot build, and
doctor's for pins that do not resolve."""

from __future__ import annotations


def short_pip_error(lines: list[str]) -> str:
    """The line of pip's output that says why, without the list of every version:
    "No matching distribution found for multidict==9.9 (versions: 1.0 .. 6.7.0, 95)"."""
    errors = [t.strip()[len("ERROR:"):].strip() for t in lines if t.startswith("ERROR")]
    if not errors and (said := _uv_said(lines)):
        return said[-1]
    versions = next((e for e in errors if "(from versions:" in e), None)
    last = next((e for e in reversed(errors) if "(from versions:" not in e),
                errors[-1] if errors else (lines[-1].strip() if lines else "no output"))
    if versions is not None:
        listed = versions.split("(from versions:", 1)[1].rstrip(")").split(",")
        listed = [v.strip() for v in listed if v.strip() and v.strip() != "none"]
        if listed:
            last += f" (versions: {listed[0]} .. {listed[-1]}, {len(listed)} in all)"
        else:
            last += " (no versions at all: is the package name right?)"
    return last


def _uv_said(lines: list[str]) -> list[str]:
    """uv's `error: ...` and `  cause: ...` messages, each whole (the last cause says
    why): uv wraps one to the terminal's width (`COLUMNS`) on indented lines that follow
    it, joined again here (issue 79 item 7: "...we can conclude that your requirements"
    was all that was said). The input uv echoes under a cause, marked by a `^^^` line,
    is left out."""
    said: list[list[str]] = []
    for text in lines:
        words = text.strip()
        if words.startswith(("error:", "cause:")):
            said.append([words.split(":", 1)[1].strip()])
        elif said and words and text[:1].isspace():
            if set(words) <= {"^"}:      # the line above is the input uv echoes
                said[-1][1:] = said[-1][1:-1]
            else:
                said[-1].append(words)
    return [" ".join(parts) for parts in said]
