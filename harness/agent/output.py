"""The scenario's output, capped: stdout and stderr (Python's print and a library's C
writes alike, file descriptors 1 and 2) go through one pipe to where they went before
(agent.log): its first half of `CAP_BYTES` as it comes, and the last quarter of the cap
of each fd kept back and written when the scenario ends, so a traceback or the last
lines before a crash are never the part dropped; what lies between is counted and
dropped, and a note says how much. A scenario printing 200 KB per call for 1,000 calls
leaves 4 MiB, not 200 MB. Stdlib only, Python 3.6+."""
import os
import sys
import threading

CAP_BYTES = 4 * 1024 * 1024
CHUNK = 65536


def _write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


class CappedOutput(object):
    """fds 1 and 2, each through a pipe of its own while the scenario runs (`start`,
    `stop`), to where they went before; one cap for both."""

    def __init__(self, cap=CAP_BYTES):
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._noted = False     # the note where output starts being dropped
        self._fds = []      # (fd, its saved copy, the pipe's read end, the copy thread)
        self._tails = {}    # saved fd -> the last bytes past the head, written at the end

    def start(self):
        """Send fds 1 and 2 through capping pipes; on an OSError leave the rest as they
        are (that output is then not capped, never lost)."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        for fd in (1, 2):
            try:
                saved = os.dup(fd)
                r, w = os.pipe()
                os.dup2(w, fd)
                os.close(w)
            except OSError:
                return
            thread = threading.Thread(target=self._copy, args=(r, saved),
                                      name="harness-output-%d" % fd)
            thread.daemon = True
            thread.start()
            self._fds.append((fd, saved, r, thread))

    def _copy(self, read, target):
        while True:
            try:
                data = os.read(read, CHUNK)
            except OSError:
                break
            if not data:
                break
            with self._lock:
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
        """Give fds 1 and 2 back, let the pipes drain, say what was dropped (on stderr,
        into agent.log). Returns the bytes dropped."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        for fd, saved, _, _ in self._fds:
            os.dup2(saved, fd)
        # A child process the scenario left running may hold a pipe open: its copy
        # thread then stops with the agent, its tail not drained.
        for _, saved, read, thread in self._fds:
            thread.join(wait_s)
            if not thread.is_alive():
                os.close(read)
        with self._lock:
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
            os.close(saved)
        self._fds = []
        return self.dropped
