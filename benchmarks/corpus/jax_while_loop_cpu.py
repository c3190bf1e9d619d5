"""JAX on CPU: a jitted lax.while_loop with a tiny body got ~40x slower in 0.4.32.

jaxlib 0.4.32 switched XLA:CPU to its new "thunk" runtime, which pays a dispatch cost per
loop iteration and per small op instead of running one compiled loop. A while_loop whose
body is a gather and a max (the report's ``_episode``) runs tens of times slower per
call: the report measured 2 s on 0.4.31 and 42 s on 0.4.33 (4,194,304 steps on 96
pmapped CPU devices). 0.5.3 (jaxlib 0.5.3) is back at 0.4.31's time; 0.5.0 and 0.5.1
are still slow. The first slow release is 0.4.32, but it is yanked on the index and
jax==0.4.32 names its jaxlib by a range, which harness's installer will not fill with a
yanked release; the case's bad release is therefore 0.4.33, the report's own.

The step is the report's episode on one device: a jitted while_loop that walks a
16,384-element array until it reaches its maximum, called once and waited for
(``block_until_ready``).

Truth, by hand: median CPU time per call (time.process_time) and wall time of 5 blocks
of 10 calls after one compiling call; 0.4.31, 0.4.32, 0.4.33, 0.5.x and 0.10.2 run in
turn, two rounds (0.5.3 in three).
"""

CASE = {
    "title": "jax CPU: jitted lax.while_loop with a small body ~40x slower from 0.4.32",
    "kind": "slowdown",
    "link": "https://github.com/jax-ml/jax/issues/25190",
    "package": "jax",
    "versions": {"good": "0.4.31", "bad": "0.4.33", "fixed": "0.5.3"},
    "extra": ["numpy==2.2.6"],
    "params": {"steps": 16384},
    "truth": {
        "0.4.31": {"us_per_call": 24},
        "0.4.33": {"us_per_call": 920},
        "0.5.3": {"us_per_call": 24},
    },
    "measured": (
        "episode(0).block_until_ready() once to compile, then 5 blocks of 10 calls; "
        "median CPU us/call, two rounds: 0.4.31 23/25, 0.4.32 934/1051, 0.4.33 "
        "1020/1369, 0.10.2 54/29 (wall: 0.4.31 23/25, 0.4.32 3488/4112, 0.4.33 "
        "4241/4012, 0.10.2 60/29); bad/good ~40x CPU, ~150x wall. Re-run with numpy "
        "2.2.6 (the case's extra): 0.4.31 24, 0.4.32 937, 0.10.2 29 us/call CPU. "
        "Bisecting the fix (numpy 2.2.6): 0.5.0 942/1032, 0.5.1 840/1341, 0.5.3 24/24/25, "
        "0.6.0 24, 0.6.2 25 (0.5.2 has no jaxlib of its own). Each jax release pins its "
        "jaxlib (0.4.32 requires jaxlib 0.4.32, yanked on the index but the only match, "
        "so pip installs it by hand; harness's venv build refuses it). 0.4.33 with "
        "numpy 2.2.6: 928/913 us/call CPU, the truth used."
    ),
}


def setup(params):
    import jax
    import jax.numpy as jnp
    from jax import lax

    foo = jnp.arange(int(params.get("steps", 16384)))
    stop = jnp.max(foo)

    def body(u):
        return jnp.maximum(u[0], foo[u[1]]), u[1] + 1

    @jax.jit
    def episode(x):
        return lax.while_loop(lambda u: u[0] < stop, body, (x, 0))[1]

    episode(0).block_until_ready()
    return {"episode": episode}


def step(state):
    state["episode"](0).block_until_ready()
