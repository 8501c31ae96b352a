"""Readiness as the kernel reports it, under the toe shim
(crates/toe/tests/shim_sockets.rs). argv: HOST PORT TOTAL.

HOST:PORT is a Linux TCP reader that reads slowly, checks the bytes, then
closes; it accepts a second connection and resets it. The first MiB goes
with os.sendfile from a file; then a non-blocking writer of the rest faces a full TX ring: it must wait in poll() for POLLOUT
instead of spinning between poll() and EAGAIN (counted), then see the
peer's FIN as POLLIN|POLLRDHUP, POLLHUP once it shut its own side, and the
reset as POLLERR|POLLHUP. Prints one line of counts; exits non-zero with a
message on the first difference from what the kernel would do."""

import errno
import os
import select
import socket
import sys
import tempfile

host, port, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pattern = bytes((i * 7 + i // 251) & 0xFF for i in range(1 << 16))
data = memoryview(pattern * (total // len(pattern)))
RING = 256 << 10


def wait(p, want):
    events = p.poll(60000)
    assert events, f"no event within 60 s (waiting for {want:#x})"
    return events[0][1]


s = socket.create_connection((host, port))
# sendfile: a file's bytes through the data path (from an offset, in two
# calls: the file position and the offset argument both advance).
with tempfile.TemporaryFile() as f:
    f.write(b"\0" * 100 + data[: 1 << 20])
    f.flush()
    assert os.sendfile(s.fileno(), f.fileno(), 100, 1000) == 1000
    f.seek(1100)
    sent = 1000
    while sent < 1 << 20:
        n = os.sendfile(s.fileno(), f.fileno(), None, (1 << 20) - sent)
        assert n > 0, "sendfile sent nothing"
        sent += n
    assert f.tell() == 100 + (1 << 20), f.tell()
s.setblocking(False)
p = select.poll()
p.register(s, select.POLLOUT)
eagain = polls = spins = 0
woke = False
while sent < total:
    try:
        sent += s.send(data[sent : sent + (1 << 20)])
        woke = False
    except BlockingIOError:
        eagain += 1
        # A wake-up for POLLOUT that finds no room is a spin.
        spins += woke
        ev = wait(p, select.POLLOUT)
        assert ev & select.POLLOUT, f"poll woke without POLLOUT: {ev:#x}"
        polls += 1
        woke = True
print(f"sent {sent} eagain {eagain} polls {polls} spins {spins}", flush=True)
assert eagain > 0, "the TX ring never filled: the reader was not slow enough to test"
# Each wake-up comes with at least a quarter of the ring free, so a
# writer that fills the ring each time sees EAGAIN about once per quarter
# ring; a descriptor that always polls writable gives one per spin.
assert eagain <= total // (RING // 4) + 16, f"{eagain} EAGAINs for {total} bytes: spinning"
assert spins <= polls // 20 + 2, f"{spins} of {polls} POLLOUT wake-ups found the ring full"

# The reader reads everything, then closes: POLLIN|POLLRDHUP, then EOF.
p.modify(s, select.POLLIN | select.POLLRDHUP)
ev = wait(p, select.POLLRDHUP)
assert ev & select.POLLIN and ev & select.POLLRDHUP, f"at the peer's FIN: {ev:#x}"
assert not ev & select.POLLHUP, f"only one direction is shut: {ev:#x}"
assert s.recv(1) == b""
# Our side shut too: both directions are, POLLHUP.
s.shutdown(socket.SHUT_WR)
ev = wait(p, select.POLLHUP)
assert ev & select.POLLHUP, f"after both FINs: {ev:#x}"
s.close()

# A reset: POLLERR|POLLHUP, then ECONNRESET.
r = socket.create_connection((host, port))
r.setblocking(False)
p = select.poll()
p.register(r, select.POLLIN | select.POLLRDHUP)
ev = wait(p, select.POLLERR)
assert ev & select.POLLERR and ev & select.POLLHUP, f"at a reset: {ev:#x}"
try:
    r.recv(1)
    raise AssertionError("recv after a reset succeeded")
except OSError as e:
    assert e.errno == errno.ECONNRESET, e
r.close()
print("OK", flush=True)
