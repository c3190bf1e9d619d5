"""The pytest plugin's names, which the plugin (`harness/pytest_plugin.py`, loaded in
every pytest session) and a marked test's run (`harness.api.marked`, loaded once one
runs) share: the markers, the report's key and the saved runs' folder. Below both, and
importing nothing, so the plugin loads no more of harness than this."""

LEAKS, TIME = "harness_leaks", "harness_time"
PROPERTY = "harness"        # the user_properties key (junit-xml), the report section
SAVED_DIR = ".harness"      # saved runs (--harness-save), under the rootdir
RAN_ON = "harness_ran_on"   # user_properties: "decided|undecided SECONDS" of a test run on
TOOK = "harness_took"       # user_properties: "WALL OWN" seconds of its calls (a busy host)
OVERRUN, ALLOWANCE = 16, "5m"   # --harness-overrun, --harness-allowance: their defaults
