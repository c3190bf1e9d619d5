"""scenarios/_tf.py, the TF scenarios' shared plumbing, against hand-built stand-ins for
TF's APIs: the branches a CPU-only machine never reaches (TF1's contrib allocator ops on
a GPU) and the fallbacks between the two allocator APIs."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from loadfile import load_file

PATH = Path(__file__).resolve().parents[2] / "scenarios" / "_tf.py"


def load() -> ModuleType:
    return load_file(PATH, "scenario_tf")


_tf = load()


def fake_tf(memory_info: Any = None) -> SimpleNamespace:
    """A TF whose get_memory_info answers `memory_info` (a dict, or an exception to
    raise); None: a TF without that API (TF < 2.5)."""
    experimental = SimpleNamespace()
    if memory_info is not None:
        def get_memory_info(device: str) -> dict[str, int]:
            if isinstance(memory_info, Exception):
                raise memory_info
            return dict(memory_info, device=device)
        experimental.get_memory_info = get_memory_info
    return SimpleNamespace(__version__="1.15.5", config=SimpleNamespace(experimental=experimental))


class Session:
    def __init__(self, values: dict[str, int]) -> None:
        self.values = values

    def run(self, op: str) -> int:
        return self.values[op]


def state(tf: SimpleNamespace, device: str = "gpu",
          session: Session | None = None) -> dict[str, Any]:
    extra = {"bytes_in_use": "B", "max_bytes_in_use": "M"} if session else {}
    return {"tf": tf, "device": device, "session": session, "extra": extra, "fw_api": None}


def test_tf1_gpu_reads_the_contrib_ops_and_keeps_that_api() -> None:
    s = state(fake_tf(), session=Session({"B": 100, "M": 300}))
    assert _tf.fw_bytes(s) == 100 and s["fw_api"] == "contrib"
    assert _tf.contrib_stat(s, "max_bytes_in_use") == 300
    s["session"].values["B"] = 150
    assert _tf.fw_bytes(s) == 150


def test_a_failing_memory_info_falls_back_to_contrib() -> None:
    s = state(fake_tf(RuntimeError("no stats")), session=Session({"B": 7, "M": 9}))
    assert _tf.fw_bytes(s) == 7 and s["fw_api"] == "contrib"


def test_no_api_at_all_is_none_and_is_not_asked_again() -> None:
    s = state(fake_tf())
    assert _tf.fw_bytes(s) is None and s["fw_api"] == "none"
    s["extra"] = {"bytes_in_use": "B"}
    s["session"] = Session({"B": 1})
    assert _tf.fw_bytes(s) is None


def test_memory_info_names_the_device_it_reads() -> None:
    s = state(fake_tf({"current": 5, "peak": 8}))
    assert _tf.fw_bytes(s) == 5 and s["fw_api"] == "memory_info"
    assert _tf.memory_info(s["tf"], "gpu")["device"] == "GPU:0"
    assert _tf.memory_info(s["tf"], "cpu")["device"] == "CPU:0"


@pytest.mark.parametrize(("zero_is_unknown", "peak", "value", "api"), [
    (True, 0, None, None), (True, 4, 0, "memory_info"), (False, 0, 0, "memory_info")])
def test_cpu_zero_stats(zero_is_unknown: bool, peak: int, value: int | None,
                        api: str | None) -> None:
    # CPU allocator stats of 0 current and 0 peak mean "not tracked" where asked
    s = state(fake_tf({"current": 0, "peak": peak}), device="cpu")
    assert _tf.fw_bytes(s, cpu_zero_is_unknown=zero_is_unknown) == value
    assert s["fw_api"] == api


def test_pick_device() -> None:
    tf = fake_tf()
    assert _tf.pick_device("x", tf, "auto", False) == ("cpu", "/device:CPU:0")
    assert _tf.pick_device("x", tf, "auto", True) == ("gpu", "/device:GPU:0")
    with pytest.raises(RuntimeError, match=r"^x: device=gpu requested but TF 1.15.5 sees no GPU$"):
        _tf.pick_device("x", tf, "gpu", False)


def test_versions_and_session_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVIDIA_TENSORFLOW_VERSION", "22.12-tf1")
    tf = fake_tf()
    tf.version = SimpleNamespace(GIT_VERSION="v1.15.4-39")
    assert _tf.versions(tf) == {"tf_version": "1.15.5", "tf_git_version": "v1.15.4-39",
                                "nvidia_tensorflow_version": "22.12-tf1"}
    assert list(_tf.versions(tf, nvidia=False)) == ["tf_version", "tf_git_version"]
    closed = []
    s = {"session": SimpleNamespace(close=lambda: closed.append(1))}
    _tf.close_session(s)
    _tf.close_session(s)
    assert s["session"] is None and closed == [1]
