"""Control: import-time growth: each of the first calls imports one more stdlib module
(about 60 modules, one a call, each kept in sys.modules), later calls find all imported
and do a small json round-trip. Memory grows at the start and stops. Truth "no leak".
"""

CASE = {
    "title": "control: import-time growth (one more stdlib module a call, then none)",
    "kind": "control",
    "link": "https://docs.python.org/3/reference/import.html#the-module-cache",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 7.48},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_import_growth --warmup 1200: a plain "
        "loop in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}

MODULES = (
    "json", "csv", "decimal", "fractions", "statistics", "difflib", "textwrap",
    "html.parser", "xml.dom.minidom", "xml.etree.ElementTree", "email.message",
    "email.parser", "http.client", "http.cookies", "urllib.request", "urllib.parse",
    "ftplib", "smtplib", "imaplib", "poplib", "mailbox", "mimetypes", "calendar",
    "zipfile", "tarfile", "gzip", "bz2", "lzma", "configparser", "plistlib",
    "sqlite3", "uuid", "ipaddress", "secrets", "hmac", "hashlib", "pprint", "reprlib",
    "enum", "graphlib", "dataclasses", "contextvars", "asyncio", "concurrent.futures",
    "selectors", "socketserver", "xmlrpc.client", "wave", "colorsys", "shlex",
    "cmd", "code", "codeop", "pdb", "timeit", "trace", "tracemalloc", "pickletools",
    "doctest", "unittest", "argparse", "getopt", "logging.handlers", "gettext",
)


def setup(params):
    import importlib
    return {"imp": importlib.import_module, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    if n < len(MODULES):
        state["imp"](MODULES[n])
    else:
        json = state["imp"]("json")
        json.loads(json.dumps({"k": list(range(20))}))
