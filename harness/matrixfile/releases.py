"""The order of a matrix's images: release order of tags (or labels), and `as_of:` days.
NGC calendar tags `YY.MM[.P][-suffix]` sort by (YY, MM, P) among tags with the baseline's
suffix, others by digit runs among tags of its shape. `as_of:` (days, or `{from, to,
every}`) makes an image `NAME@DAY` per day; locally `pip:` resolves as of that day.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import Any

from harness.matrixfile.model import ImageSpec
from harness.matrixfile.yamlsrc import PathKey

_CALENDAR = re.compile(r"(\d{2})\.(\d{2})(?:\.(\d+))?(-.+)?")
_DIGITS = re.compile(r"\d+")

TagKey = tuple[int, ...]


def tag_order(baseline: str) -> Callable[[str], TagKey | None]:
    """The sort key of tags comparable with `baseline`; None for the others."""
    cal = _CALENDAR.fullmatch(baseline)
    if cal is not None:
        suffix = cal[4] or ""

        def calendar(tag: str) -> TagKey | None:
            m = _CALENDAR.fullmatch(tag)
            if m is None or (m[4] or "") != suffix:
                return None
            return int(m[1]), int(m[2]), int(m[3] or 0)

        return calendar
    shape = _DIGITS.sub("#", baseline)

    def version(tag: str) -> TagKey | None:
        if _DIGITS.sub("#", tag) != shape:
            return None
        return tuple(int(d) for d in _DIGITS.findall(tag))

    return version


def release_order(runs: Sequence[Sequence[str]]) -> list[str]:
    """Every image of `runs` (newest run first) in release order: the newest run's
    order, with older runs' images slotted by tag (`tag_order`), else beside their
    neighbours in their own run."""
    order: list[str] = list(dict.fromkeys(runs[0])) if runs else []
    for images in runs[1:]:
        for pos, image in enumerate(images):
            if image not in order:
                order.insert(_slot(order, image, images[:pos], images[pos + 1:]), image)
    return order


def _slot(order: list[str], image: str, before: Sequence[str], after: Sequence[str]) -> int:
    key = tag_order(image)
    mine = key(image)
    assert mine is not None        # a tag always compares with itself
    comparable = [(i, k) for i, known in enumerate(order) if (k := key(known)) is not None]
    if comparable:
        later = [i for i, k in comparable if k > mine]
        return later[0] if later else comparable[-1][0] + 1
    for known in reversed(before):
        if known in order:
            return order.index(known) + 1
    for known in after:
        if known in order:
            return order.index(known)
    return len(order)


# `as_of:` days
MAX_DAYS = 120          # an axis longer than this is a typo (`every: 1 day` over years)
UNITS = ("day", "week", "month")
_EVERY = re.compile(r"^\s*(\d+)\s*(day|week|month)s?\s*$")
_FIX_DATE = "write a day as YYYY-MM-DD, e.g. 2025-07-15"


def day_of(value: Any) -> dt.date | None:
    """A YAML date (`2025-07-15` reads as a date) or a `YYYY-MM-DD` string, else None."""
    if isinstance(value, dt.datetime):
        return None
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def step(day: dt.date, n: int, unit: str) -> dt.date:
    """`day` plus n units; a month step keeps the day of the month, or the month's last."""
    if unit == "day":
        return day + dt.timedelta(days=n)
    if unit == "week":
        return day + dt.timedelta(weeks=n)
    months = day.year * 12 + day.month - 1 + n
    year, month = divmod(months, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return dt.date(year, month + 1, min(day.day, last))


def parse_as_of(ctx: Any, value: Any, path: PathKey, today: dt.date | None = None
          ) -> tuple[str, ...]:
    """The days of an `as_of:` value, ascending, as `YYYY-MM-DD`, none after `today` (default:
    today, UTC); `ctx` (`entries.Ctx`) words the errors.

    Raises: SpecError: a bad, repeated or future day, a bad range, too many days.
    """
    today = today or dt.datetime.now(dt.timezone.utc).date()
    if isinstance(value, dict):
        days = _range(ctx, value, path)
    elif isinstance(value, list) and value:
        days = []
        for i, item in enumerate(value):
            day = day_of(item)
            if day is None:
                raise ctx.fail((*path, i), f"bad day {item!r}", _FIX_DATE)
            if day in days:
                raise ctx.fail((*path, i), f"{day} is listed twice", "list each day once")
            days.append(day)
    else:
        raise ctx.fail(path, "as_of is a list of days or {from: DAY, to: DAY, every: "
                       "1 month}", "e.g. as_of: [2025-05-15, 2025-07-15]")
    late = [d for d in days if d > today]
    if late:
        raise ctx.fail(path, f"{late[0]} is after today ({today}): what the index will "
                       "hold that day is not known yet", f"end as_of on {today} or before")
    if len(days) > MAX_DAYS:
        raise ctx.fail(path, f"{len(days)} days; at most {MAX_DAYS}",
                       "take a longer step (`every: 1 month`), then `harness day` finds "
                       "the day between two of them")
    return tuple(d.isoformat() for d in sorted(days))


def _range(ctx: Any, value: dict[str, Any], path: PathKey) -> list[dt.date]:
    ctx.mapping(value, path, ("from", "to", "every"))
    ends: dict[str, dt.date] = {}
    for key in ("from", "to"):
        if key not in value:
            raise ctx.fail(path, f"as_of needs `{key}:`",
                           "write {from: 2025-01-01, to: 2025-06-01, every: 1 month}")
        day = day_of(value[key])
        if day is None:
            raise ctx.fail((*path, key), f"bad day {value[key]!r}", _FIX_DATE)
        ends[key] = day
    if ends["from"] > ends["to"]:
        raise ctx.fail((*path, "from"), f"from ({ends['from']}) is after to ({ends['to']})",
                       "swap them: from is the earlier day")
    every = value.get("every", "1 month")
    m = _EVERY.match(every) if isinstance(every, str) else None
    if m is None or int(m.group(1)) < 1:
        raise ctx.fail((*path, "every"), f"bad step {every!r}: a whole number and a unit "
                       f"({', '.join(UNITS)})", "write e.g. every: 1 month, 2 weeks or 10 days")
    n, unit = int(m.group(1)), m.group(2)
    days, k = [], 0
    while (day := step(ends["from"], n * k, unit)) <= ends["to"]:
        days.append(day)
        k += 1
        if k > MAX_DAYS:
            break
    if days[-1] != ends["to"] and len(days) <= MAX_DAYS:
        days.append(ends["to"])     # the user's last day is always asked
    return days


def dated(image: ImageSpec, days: tuple[str, ...], index: int) -> list[ImageSpec]:
    """One image per day, `NAME@DAY`, indices from `index` on."""
    return [dataclasses.replace(image, label=f"{image.label}@{day}", index=index + i,
                                as_of=day) for i, day in enumerate(days)]
