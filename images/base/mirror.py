"""Print the apt mirror URI that serves SUITE's main component, read from this machine's
apt sources (deb822 *.sources and one-line *.list), so no host name lives in the repo."""
import glob
import sys

suite = sys.argv[1] if len(sys.argv) > 1 else "bookworm"
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
if not found:
    sys.exit("no apt source serves %s main" % suite)
print(found[0])
