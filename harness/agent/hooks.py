"""The attribution hooks of `--attribute KINDS`: the sibling module `attribution` says
where memory and time go in the measured phase, as one "where" record.

    att = attribution.make(kinds, scenario_path)
    att.measure_start(count, progress, budget, least)   # before the first measured step
    att.at_sample(done)                  # at every sample point of the measured phase
    rec = att.measure_end(done)          # right after the measured loop

Class Attribution calls these and makes sure attribution never fails a run: the first
exception (an import that fails, a hook that raises) ends attribution for the run, and
the where record then says why in errors["all"]. Stdlib only, Python 3.6+.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ERROR = 2000


# attribution.py; its name leaves sys.modules once imported, as the agent's own do
# (agent.py), so a scenario's module of the same name is its own.
ATTRIBUTION_MODULES = ("attribution",)


def _import_attribution():
    sys.path.insert(0, _HERE)
    try:
        import attribution  # noqa: F401  (the agent's own sibling module)
    finally:
        sys.path.pop(0)
        for name in ATTRIBUTION_MODULES:
            sys.modules.pop(name, None)
    return attribution


def describe(exc):
    """'ExceptionType: message', as the where record's errors name an exception."""
    return ("%s: %s" % (type(exc).__name__, exc))[:MAX_ERROR]


class Attribution(object):
    """The attribution module's object for one run, or why there is none.

    `passthrough`: exception types a hook must not swallow (the agent's SIGTERM)."""

    def __init__(self, kinds, passthrough=()):
        self.kinds = list(kinds)
        self.passthrough = tuple(passthrough)
        self.att = None
        self.error = None
        self.record = None
        self.progress = None

    def make(self, scenario_path):
        """Import the attribution module and make its object for this scenario."""
        try:
            self.att = _import_attribution().make(self.kinds, scenario_path)
        except self.passthrough:
            raise
        except Exception as exc:
            self.error = describe(exc)

    def _call(self, name, *args):
        """The hook's result, or None once attribution failed (now or before)."""
        if self.att is None:
            return None
        try:
            return getattr(self.att, name)(*args)
        except self.passthrough:
            raise
        except Exception as exc:
            self.error = describe(exc)
            self.att = None
            return None

    def measure_start(self, count, progress, budget=0.0, least=0):
        """`budget`: the measured phase's time budget in seconds (0: `count` steps),
        `least`: the steps it makes at least."""
        self.progress = progress
        self._call("measure_start", count, progress, budget, least)

    def at_sample(self, done):
        self._call("at_sample", done)

    def measure_end(self, done):
        """Once, after the measured loop (also one that stopped early or raised)."""
        if self.progress is None or self.record is not None:
            return
        rec = self._call("measure_end", done)
        self.att = None
        if isinstance(rec, dict):
            self.record = rec
        elif self.error is None:
            self.error = "TypeError: measure_end returned %s, not a dict" % type(rec).__name__

    def finish(self):
        """measure_end for a measured phase that raised before its end. Called while
        the run ends: nothing is passed through any more."""
        self.passthrough = ()
        if self.progress is not None and self.record is None and self.att is not None:
            self.measure_end(self.progress())

    def where(self, why="the run ended before its measured phase"):
        """The where record to write before the end record; `why` there is none, where
        attribution did not fail."""
        if self.error is None and self.record is not None:
            rec = {"type": "where", "kinds": self.kinds}
            rec.update(self.record)
            rec["type"] = "where"
            return rec
        why = self.error or why
        return {"type": "where", "kinds": self.kinds, "errors": {"all": why}}
