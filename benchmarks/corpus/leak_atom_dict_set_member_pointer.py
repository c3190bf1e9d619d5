"""atom's typed containers leak their C++ back-pointer: `AtomDict_new()` and `AtomSet_new()`
(atom/src/atomdict.cpp, atomset.cpp) each allocate a `CAtomPointer` with `new` (the guarded
pointer from the container to the Atom that owns it, checked before validating keys and
values), but `AtomDict_dealloc()` and `AtomSet_dealloc()` only clear the validators and
never `delete` it. So every `Dict`, `DefaultDict` or `Set` member value that is created
and later dropped leaves its 8-byte pointer object behind (a 32-byte malloc chunk). Issue
202 (nucleic/atom) reported it; PR 203 ("Fix memory leak in dict and set members and add
test") deletes the pointer in both deallocators, first released in 0.10.2, whose release
notes list "fix a memory leak caused by Dict, Defaultdict and Set members #202".

The containers and their leak date from 0.5.0 (2019), so every atom with a CPython 3.11
wheel before 0.10.2 has it and there is no good release on 3.11; the case is bad and
fixed only, as leak_mmh3_hash_from_buffer is, with the bad release the first that
installs as a 3.11 wheel (0.8.2).

The scenario is the one of the upstream test: a model object with a `Dict` and a `Set`
member is made per call (a request's settings), both members are read (which builds the
validated AtomDict and AtomSet from their defaults) and the object is dropped. What leaks
per call is the two `CAtomPointer`s, 2 x 32 bytes.

Truth: benchmarks/corpuskit/truth.py leak_atom_dict_set_member_pointer --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 67.2 B/call in 0.8.2 (67.1 in the second half, RSS +52 B/call) and 0.0 in
0.10.2; 0.10.0, the last release before the fix, measured 67.6 (67.1 in the second
half). The pointers are C++ `new` allocations, which tracemalloc does not see.
"""

CASE = {
    "title": "atom: Dict and Set member values leak their CAtomPointer (<0.10.2)",
    "kind": "leak",
    "link": "https://github.com/nucleic/atom/pull/203",
    "package": "atom",
    "versions": {"good": None, "bad": "0.8.2", "fixed": "0.10.2"},
    "extra": [],
    "params": {},
    "truth": {
        "0.8.2": {"b_per_call": 67.22, "b_per_call_2nd_half": 67.11, "us_per_call": 1.2},
        "0.10.2": {"b_per_call": 0.02, "b_per_call_2nd_half": 0.0, "us_per_call": 2.21},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_atom_dict_set_member_pointer --calls 20000: a "
        "plain loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call. 0.10.0 by the same "
        "command with --releases 0.10.0"
    ),
    "batch": "49c",
}


def setup(params):
    from atom.api import Atom, Dict, Set

    class Settings(Atom):
        headers = Dict(default={"accept": "json"})
        flags = Set(default={1, 2, 3})

    return {"cls": Settings}


def step(state):
    obj = state["cls"]()
    return len(obj.headers) + len(obj.flags)
