"""lizard 1.16.1: analyze_source_code() ~3x slower per file than 1.15.7.

lizard 1.16.1 and 1.16.2 made every call of
``lizard.analyze_file.analyze_source_code(filename, code)`` markedly slower (the reporter
measured 2.5 min -> 25 min over 3,910 files); the maintainer reverted the change and
1.16.3 is back at 1.15.7's speed.

The step is the report's call: analyze one in-memory C++ source of 20 small functions
(loops, ifs, a switch), built once in setup.

Truth, by hand: median CPU time per call (time.process_time) of 7 blocks of 20 calls
after one warm-up call; 1.15.7, 1.16.1 and 1.16.3 run in turn, three rounds within two
minutes (the machine's load average was 10+ on 2 cores, so CPU time, not wall time).
"""

CASE = {
    "title": "lizard: analyze_source_code() ~3x slower in 1.16.1-1.16.2",
    "kind": "slowdown",
    "link": "https://github.com/terryyin/lizard/issues/253",
    "package": "lizard",
    "versions": {"good": "1.15.7", "bad": "1.16.1", "fixed": "1.16.3"},
    "extra": [],
    "params": {},
    "truth": {
        "1.15.7": {"us_per_call": 7274},
        "1.16.1": {"us_per_call": 21542},
        "1.16.3": {"us_per_call": 6107},
    },
    "measured": (
        "analyze_source_code('sample.cpp', code) once, then 7 blocks of 20 calls, median "
        "CPU us/call; three rounds: 1.15.7 7274/7435/5901, 1.16.1 22971/21042/21542, "
        "1.16.2 21451/20965 (two rounds), 1.16.3 8753/6107/5936; bad/good 2.9x, "
        "fixed/good 0.84x (medians of the rounds)."
    ),
}

_FUNC = """int func{i}(int a, int b) {{
  int s = 0;
  for (int i = 0; i < a; i++) {{
    if (i % 2 == 0 && b > i) {{ s += i * b; }} else {{ s -= a; }}
  }}
  switch (a) {{ case 1: s++; break; case 2: s--; break; default: break; }}
  return s;
}}
"""


def setup(params):
    from lizard import analyze_file

    code = "#include <stdio.h>\n\n" + "\n".join(_FUNC.format(i=i) for i in range(20))
    return {"analyze": analyze_file.analyze_source_code, "code": code}


def step(state):
    state["analyze"]("sample.cpp", state["code"])
