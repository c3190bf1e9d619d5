"""Screenshots of what a person sees at scale: `harness report DIR` in a terminal of a
given width (run in a pty, drawn by the pyte terminal emulator, colours kept, rendered by
headless Chromium) and report.html itself. Writes PNGs; prints how long Chromium took to
load and shoot the page.

    python docs/screenshots/shoot.py DIR OUTDIR [--cols 80 160] [--name NAME]
"""

from __future__ import annotations

import argparse
import fcntl
import html
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PALETTE = {"red": "#cd3131", "green": "#0dbc79", "yellow": "#b5a000", "magenta": "#bc3fbc",
           "cyan": "#11a8cd", "brightblack": "#767676", "default": "#e5e5e5"}


def in_pty(argv: list[str], cols: int, rows: int = 60) -> bytes:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color")
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait()
    return b"".join(chunks)


def terminal_html(raw: bytes, cols: int) -> str:
    """The pty's bytes as a terminal draws them, as an HTML page (one <pre>)."""
    import pyte

    screen = pyte.Screen(cols, 400)
    pyte.ByteStream(screen).feed(raw.replace(b"\n", b"\r\n").replace(b"\r\r\n", b"\r\n"))
    used = max((y for y in range(screen.lines)
                if any(ch.data.strip() for ch in screen.buffer[y].values())), default=0)
    lines = []
    for y in range(used + 1):
        row = screen.buffer[y]
        out = []
        for x in range(cols):
            ch = row[x]
            colour = PALETTE.get(ch.fg, PALETTE["default"])
            out.append(f'<span style="color:{colour}">{html.escape(ch.data)}</span>'
                       if ch.fg != "default" else html.escape(ch.data))
        lines.append("".join(out).rstrip())
    return ("<!DOCTYPE html><meta charset='utf-8'><body style='margin:0;background:#1e1e1e'>"
            "<pre style='margin:8px;font:13px/1.25 \"DejaVu Sans Mono\",monospace;"
            f"color:{PALETTE['default']}'>" + "\n".join(lines) + "</pre>")


def shoot(page: Path, png: Path, width: int, height: int) -> float:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        t0 = time.monotonic()
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", f"--user-data-dir={profile}",
                        f"--screenshot={png}", f"--window-size={width},{height}",
                        "--hide-scrollbars", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
        return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="a results directory (harness report reads it)")
    p.add_argument("out", type=Path, help="where the PNGs go")
    p.add_argument("--cols", type=int, nargs="*", default=[80, 160])
    p.add_argument("--name", default="scale")
    p.add_argument("--page-height", type=int, default=2200)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for cols in a.cols:
        raw = in_pty([sys.executable, "-m", "harness", "report", str(a.dir)], cols)
        with tempfile.TemporaryDirectory() as d:
            page = Path(d) / "term.html"
            page.write_text(terminal_html(raw, cols), encoding="utf-8")
            lines = raw.decode("utf-8", "replace").count("\n")
            png = a.out / f"{a.name}-terminal-{cols}.png"
            shoot(page, png, cols * 8 + 24, min(4000, lines * 17 + 24))
            print(f"{png}: {cols} columns, {lines} lines")
    png = a.out / f"{a.name}-report-html.png"
    took = shoot(a.dir / "report.html", png, 1400, a.page_height)
    size = (a.dir / "report.html").stat().st_size
    print(f"{png}: report.html {size / 2**20:.2f} MiB, Chromium started, loaded and "
          f"shot it in {took:.1f} s")


if __name__ == "__main__":
    main()
