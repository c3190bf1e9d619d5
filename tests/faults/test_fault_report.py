"""Markup from a cell (scenario params, exception messages, tracebacks, log lines, env)
reaches the HTML and Markdown reports escaped: a <script> never runs."""

from __future__ import annotations

import re
from pathlib import Path

from faultkit import run_dirs, run_sweep, scenario, write_matrix

from harness.cli import main

RAW = re.compile(r"<script>alert|<img src=x", re.IGNORECASE)  # unescaped tags


def test_script_in_cell_output_is_escaped_in_every_report(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, [
        f"{{script: {scenario('hostile.py')}, params: {{flood: 100, big_mb: 2, "
        f"note: \"<script>alert('param')</script>\"}}, "
        f"env: {{CUDA_VERSION: \"<script>alert('env')</script>\"}}}}"],
        runtime="local")
    code, err = run_sweep(m, tmp_path / "out", "-q")
    assert code == 1 and "Traceback" not in err, err
    [root] = run_dirs(tmp_path / "out")
    for _ in range(2):  # as the sweep wrote them, then re-rendered by `harness report`
        page = (root / "report.html").read_text()
        assert "alert(&#39;pwned&#39;)" in page or "alert('pwned')" in page  # shown, inert
        assert not RAW.search(page), RAW.search(page)
        assert "&lt;script&gt;" in page or "&#60;script&#62;" in page
        md = (root / "report.md").read_text()
        assert not RAW.search(md), RAW.search(md)
        assert main(["report", str(root)]) == 1
