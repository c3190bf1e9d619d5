"""Print the apt mirror URI that serves SUITE's main component, read from this machine's
apt sources (deb822 *.sources and one-line *.list), so no host name lives in the repo.

`mirror.py SUITE --via OTHER`: when no source lists SUITE, print the mirror that serves
OTHER's main component instead (the Debian archive that serves bookworm also serves
bullseye; used by images/ngc/py37.sh)."""
import glob
import sys

args = sys.argv[1:]
via = None
if "--via" in args:
    at = args.index("--via")
    via = args[at + 1] if at + 1 < len(args) else None
    del args[at:at + 2]
suite = args[0] if args else "bookworm"


def mirrors(suite):
    found = []
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in open(path).read().split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith("#"):
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.split()
            if suite in fields.get("suites", []) and "main" in fields.get("components", []):
                found.extend(fields.get("uris", []))
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split("#")[0].split()
            parts = [p for p in parts if not p.startswith("[")]
            if len(parts) >= 4 and parts[0] == "deb" and parts[2] == suite and "main" in parts[3:]:
                found.append(parts[1])
    return found


found = mirrors(suite)
if not found and via:
    found = mirrors(via)
if not found:
    sys.exit("no apt source serves %s main" % suite)
print(found[0])
