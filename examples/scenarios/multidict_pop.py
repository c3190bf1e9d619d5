"""A real leak: multidict's C extension, releases 6.5.x-6.6.3, leaks the storage of
entries removed with MultiDict.pop() (aio-libs/multidict#1232, fixed in 6.6.4).

Each step builds a MultiDict of 100 fresh keys and pops them all: about 6 KB per step
stays allocated in the leaking releases, 0 in 6.4.4 and 6.6.4.
Params: keys (default 100).
"""


def setup(params):
    from multidict import MultiDict, __version__
    n = int(params.get("keys", 100))
    return {"cls": MultiDict, "keys": ["X-Any-%d" % i for i in range(n)], "version": __version__}


def step(state):
    md = state["cls"](dict((k, "v") for k in state["keys"]))
    for k in state["keys"]:
        md.pop(k)


def info(state):
    return {"multidict": state["version"]}
