"""The scenario's output (fds 1 and 2: print and C writes), capped on its way to agent.log.

Kept: the first half of `CAP_BYTES` and each fd's last quarter (a traceback is never lost);
the middle counted, dropped, noted. Pipes end when empty for `SETTLE_S`, not at EOF (a child
left running may hold them). Stdlib only, Python 3.6+."""
import os
import select
import sys
import threading
from time import monotonic    # bound here: a scenario may patch time

CAP_BYTES = 4 * 1024 * 1024
CHUNK = 65536
SETTLE_S = 0.05     # the end: a pipe empty this long is drained


def _write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


class CappedOutput(object):
    """fds 1 and 2, each through its own pipe while the scenario runs (`start`, `stop`);
    one cap for both."""

    def __init__(self, cap=CAP_BYTES):
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._noted = False     # the note where output starts being dropped
        self._fds = []      # (fd, its saved copy, the pipe's read end, the copy thread)
        self._tails = {}    # saved fd -> the last bytes past the head, written at the end
        self._wake = None   # a pipe: a byte written to it tells the copy threads to drain
        self._over = False  # past the end's wait: a copy thread still running drops all

    def start(self):
        """Send fds 1 and 2 through capping pipes; on an OSError leave the rest as they are
        (uncapped, never lost)."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if hasattr(select, "poll"):     # else the copy threads wait for EOF, as before
            try:
                self._wake = os.pipe()
            except OSError:
                pass
        for fd in (1, 2):
            try:
                saved = os.dup(fd)
                r, w = os.pipe()
                os.dup2(w, fd)
                os.close(w)
            except OSError:
                return
            # Made before the scenario is imported (gevent's patches remove select.poll).
            thread = threading.Thread(target=self._copy, args=(r, saved, self._poller(r)),
                                      name="harness-output-%d" % fd)
            thread.daemon = True
            thread.start()
            self._fds.append((fd, saved, r, thread))

    def _poller(self, read):
        """(a poll object on the pipe and the wake pipe, the wake pipe's read end), or
        None: reads then block until EOF."""
        if self._wake is None:
            return None
        try:
            poller = select.poll()
            poller.register(read, select.POLLIN)
            poller.register(self._wake[0], select.POLLIN)
            return poller, self._wake[0]
        except (AttributeError, OSError, ValueError):
            return None

    def _copy(self, read, target, polling):
        poller, wake = polling or (None, None)
        timeout = None      # ms: None until woken to drain, then the settle
        while True:
            if poller is not None:
                try:
                    ready = [fd for fd, _ in poller.poll(timeout)]
                except (OSError, ValueError):
                    poller = None       # read as before: until EOF
                    ready = [read]
                if read not in ready:
                    if timeout is not None:
                        break           # woken, and the pipe stayed empty: drained
                    poller.unregister(wake)
                    timeout = int(SETTLE_S * 1000)
                    continue
            try:
                data = os.read(read, CHUNK)
            except OSError:
                break
            if not data:
                break
            with self._lock:
                if self._over:
                    break
                room = max(0, self.cap // 2 - self.kept)
                keep = data[:room]
                self.kept += len(keep)
                tail = self._tails.setdefault(target, bytearray())
                tail += data[room:]
                over = max(0, len(tail) - self.cap // 4)
                del tail[:over]
                self.dropped += over
                first_drop = over > 0 and not self._noted
                self._noted = self._noted or first_drop
            try:
                if keep:
                    _write_all(target, keep)
                if first_drop:
                    _write_all(target, ("\n[harness: the scenario's output is capped at "
                                        "%d MiB: what follows is dropped but its last part, "
                                        "its size said at the end]\n" % (self.cap >> 20)
                                        ).encode())
            except OSError:
                pass

    def stop(self, wait_s=5.0):
        """Give fds 1 and 2 back, drain the pipes, note what was dropped (on stderr).
        Returns the bytes dropped."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        for fd, saved, _, _ in self._fds:
            os.dup2(saved, fd)
        # A child the scenario left running may hold the pipes open: drain them
        # (a child that keeps writing keeps one going for up to `wait_s`).
        if self._wake is not None:
            try:
                os.write(self._wake[1], b"x")
            except OSError:
                pass
        deadline = monotonic() + wait_s
        for _, _, _, thread in self._fds:
            thread.join(max(0.0, deadline - monotonic()))
        alive = [saved for _, saved, _, thread in self._fds if thread.is_alive()]
        with self._lock:
            self._over = True   # a thread still copying a child's output drops it
            tails = [(saved, bytes(self._tails.pop(saved, b""))) for _, saved, _, _ in self._fds]
            self.kept += sum(len(t) for _, t in tails)
        if self.dropped:    # before the tails: a traceback stays the log's last lines
            note = ("harness: %d bytes of the scenario's output dropped past the %d MiB cap "
                    "(%d bytes kept, its last part below)\n"
                    % (self.dropped, self.cap >> 20, self.kept))
            try:
                _write_all(2, note.encode())
            except OSError:
                pass
        for saved, tail in tails:
            try:
                _write_all(saved, tail)
            except OSError:
                pass
        for _, saved, read, _ in self._fds:
            if saved not in alive:  # a thread still running may yet use its fds
                os.close(read)
                os.close(saved)
        if self._wake is not None and not alive:
            for fd in self._wake:
                os.close(fd)
        self._wake = None
        self._fds = []
        return self.dropped
