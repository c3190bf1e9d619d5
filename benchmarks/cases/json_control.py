"""Clean control: stdlib json round-trip of a 20-key dict (0.1 heap B/step measured)."""


def setup(params):
    import json
    return {"json": json}


def step(state):
    j = state["json"]
    j.loads(j.dumps({f"k{i}": [i, str(i)] for i in range(20)}))
