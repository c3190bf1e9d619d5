"""Hybrid container images for `harness culprit`: an image built offline from a base image
with some packages' installed files replaced by another image's.

Each package's files are the ones its `*.dist-info/RECORD` lists (and the dist-info
itself): removed from the base, copied from the other image in a build stage of its
own, so no index and no network is needed (the build runs with `network_mode=none`).
The image is tagged `harness-culprit/<base label>:<key>`, the key a hash of the recipe
(both images' ids, what is taken and dropped, this module's script), labelled with what
was swapped, and kept: the same recipe is built once, and a user can `docker run` it.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.errors import ImageUnavailable
from harness.matrixfile.model import ImageSpec
from harness.runtimes.base import Progress
from harness.runtimes.dockerimage import build, image_labels

REPO = "harness-culprit"
SWAP = "/harness-swap"

# Run by the images' own interpreters (Python 3.6 and later): stdlib only.
SCRIPT = r'''"""harness culprit: a package's installed files, as its RECORD lists them."""
import csv
import os
import shutil
import sys


def norm(name):
    return name.lower().replace("_", "-").replace(".", "-")


def dists(names):
    want = set(norm(n) for n in names)
    found = {}
    for entry in sys.path:
        if not os.path.isdir(entry or "."):
            continue
        for d in sorted(os.listdir(entry or ".")):
            if d.endswith(".dist-info"):
                key = norm(d[:-len(".dist-info")].partition("-")[0])
                if key in want and key not in found:
                    found[key] = os.path.join(entry, d)
    missing = sorted(want - set(found))
    if missing:
        sys.exit("harness culprit: no *.dist-info (RECORD) for " + ", ".join(missing))
    return found


def files(info):
    base = os.path.dirname(info)
    out = [info]
    record = os.path.join(info, "RECORD")
    if not os.path.isfile(record):
        sys.exit("harness culprit: %s has no RECORD: its files are not known" % info)
    with open(record) as f:
        for row in csv.reader(f):
            if row and row[0]:
                out.append(os.path.normpath(os.path.join(base, row[0])))
    return out


def main(argv):
    what, names = argv[0], argv[1:]
    for info in dists(names).values():
        for path in files(info):
            if what == "remove":
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                elif os.path.lexists(path):
                    os.remove(path)
            elif os.path.lexists(path):
                dest = "%s%s" % (os.environ["SWAP"], path)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.copytree(path, dest, symlinks=True)
                else:
                    if not os.path.isdir(os.path.dirname(dest)):
                        os.makedirs(os.path.dirname(dest))
                    shutil.copy2(path, dest, follow_symlinks=False)


main(sys.argv[1:])
'''


def dockerfile(base: ImageSpec, other: ImageSpec, take: Sequence[str], drop: Sequence[str]
               ) -> str:
    """The recipe: `other`'s files of `take` collected in a stage of their own; `base`
    with `drop`'s files removed and the collected files copied in."""
    def py(image: ImageSpec) -> str:
        return image.python or "python3"

    lines = []
    if take:
        lines += [f"FROM {other.ref} AS other", "COPY swap.py /harness-swap.py",
                  f"RUN mkdir -p {SWAP} && SWAP={SWAP} {py(other)} /harness-swap.py collect "
                  + " ".join(take)]
    lines += [f"FROM {base.ref}", "COPY swap.py /harness-swap.py"]
    if drop:
        lines.append(f"RUN {py(base)} /harness-swap.py remove " + " ".join(drop))
    if take:
        lines.append(f"COPY --from=other {SWAP}/ /")
    lines.append("RUN rm -f /harness-swap.py")
    return "\n".join(lines) + "\n"


def tag_of(client: Any, base: ImageSpec, other: ImageSpec, take: Sequence[str],
           drop: Sequence[str]) -> str:
    """`harness-culprit/<base label>:<key of the recipe>`.

    Raises:
        ImageUnavailable: the engine lacks one of the two images.
    """
    ids = []
    for image in (base, other):
        try:
            ids.append(str(client.images.get(image.ref).id))
        except Exception as exc:   # docker's errors, not imported here
            raise ImageUnavailable(f"{image.ref}: not on the engine ({exc}); fix: docker "
                                   f"pull {image.ref}, or run the sweep again") from exc
    recipe = "\n".join([*ids, "take", *sorted(take), "drop", *sorted(drop), SCRIPT])
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", base.label.lower()).strip("-.") or "image"
    return f"{REPO}/{name}:{key}"


def hybrid(client: Any, base: ImageSpec, other: ImageSpec, take: Sequence[str],
           drop: Sequence[str], swapped: str, progress: Progress) -> str:
    """The hybrid's tag, built now unless the engine has it already.

    Args:
        take: Packages whose files come from `other` (at other's version).
        drop: Packages whose files are removed from `base` first.
        swapped: What was swapped, in words, for the image's label.

    Raises:
        ImageUnavailable: a package has no RECORD, or the build failed otherwise.
    """
    tag = tag_of(client, base, other, take, drop)
    if image_labels(client, tag) is not None:
        progress(f"{tag}: cached hybrid ({swapped})")
        return tag
    with tempfile.TemporaryDirectory(prefix="harness-culprit-") as tmp:
        ctx = Path(tmp)
        (ctx / "swap.py").write_text(SCRIPT, encoding="utf-8")
        (ctx / "Dockerfile").write_text(dockerfile(base, other, take, drop), encoding="utf-8")
        progress(f"{tag}: building {base.label} with {swapped}")
        build(client, ctx, tag, {"harness.culprit.base": base.ref,
                                 "harness.culprit.other": other.ref,
                                 "harness.culprit.swapped": swapped}, progress)
    return tag
