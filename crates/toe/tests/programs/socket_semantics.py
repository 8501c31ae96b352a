"""Socket semantics an unmodified program relies on, run under the toe shim
(crates/toe/tests/shim_sockets.rs). argv: ECHO_HOST ECHO_PORT LISTEN_PORT.
ECHO_HOST:ECHO_PORT is a Linux TCP echo server; LISTEN_PORT is where this
script listens on the data path for the test's Linux client, which sends
"ping" and expects "pong". Exits non-zero with a message on the first
difference from what the kernel would do."""

import errno
import os
import select
import signal
import socket
import struct
import sys

host, port, listen_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# A call that blocks where the kernel's would not (an accept on a
# non-blocking listener) ends the script instead of hanging the test.
signal.alarm(120)


def expect_errno(code, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == code, f"{fn.__name__}{args}: errno {e.errno}, expected {code}"
        return
    raise AssertionError(f"{fn.__name__}{args} succeeded, expected errno {code}")


def recv_exactly(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "EOF before all bytes came back"
        out += chunk
    return bytes(out)


# Connect (the option set before connect() is the kernel's, kept after).
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.connect((host, port))
local, peer = s.getsockname(), s.getpeername()
assert peer == (host, port), peer
assert local[1] != 0, local
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1

# Options the data path honours, and those it refuses as the kernel would.
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) > 0
expect_errno(errno.ENOPROTOOPT, s.setsockopt, socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
expect_errno(errno.ENOPROTOOPT, s.setsockopt, socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
# The data path's congestion control is its own: named as the kernel names
# it, asking for it succeeds, asking for another is "no such algorithm".
assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") == b"reno"
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
expect_errno(errno.ENOENT, s.setsockopt, socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")

# TCP_INFO: the data path's state.
info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
state = info[0]
snd_mss, rcv_mss = struct.unpack_from("II", info, 16)
assert state == 1, f"tcpi_state {state}, expected TCP_ESTABLISHED"
assert 0 < snd_mss <= 1460, snd_mss

# Non-blocking: nothing to read yet.
s.setblocking(False)
expect_errno(errno.EAGAIN, s.recv, 10)

# select, poll and epoll over a mixed set: a pipe and the socket.
r, w = os.pipe()
os.write(w, b"x")
readable, _, _ = select.select([s, r], [], [], 0.5)
assert readable == [r], readable
os.read(r, 1)
s.send(b"hello")
readable, _, _ = select.select([s, r], [], [], 5)
assert readable == [s], readable
assert recv_exactly(s, 5) == b"hello"
readable, _, _ = select.select([s], [], [], 0.1)
assert readable == [], "still readable after everything was read"

p = select.poll()
p.register(s, select.POLLIN)
p.register(r, select.POLLIN)
s.send(b"again")
events = p.poll(5000)
assert [fd for fd, _ in events] == [s.fileno()], events
assert recv_exactly(s, 5) == b"again"

ep = select.epoll()
ep.register(s.fileno(), select.EPOLLIN)
ep.register(r, select.EPOLLIN)
os.write(w, b"y")
events = ep.poll(1)
assert [fd for fd, _ in events] == [r], events
os.read(r, 1)
s.send(b"epoll")
events = ep.poll(5)
assert [fd for fd, _ in events] == [s.fileno()], events
assert recv_exactly(s, 5) == b"epoll"

# A bulk echo with non-blocking sends and a select loop, byte for byte.
payload = os.urandom(1 << 20)
sent, back = 0, bytearray()
while len(back) < len(payload):
    want_write = [s] if sent < len(payload) else []
    rd, wr, _ = select.select([s], want_write, [], 10)
    assert rd or wr, "stalled"
    if wr:
        try:
            sent += s.send(payload[sent : sent + 65536])
        except BlockingIOError:
            pass
    if rd:
        try:
            back += s.recv(1 << 16)
        except BlockingIOError:
            pass
assert bytes(back) == payload, "the echo differs"
# After a megabyte each way the window and the RTT are the data path's own.
info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
rtt_us, = struct.unpack_from("I", info, 68)
snd_cwnd, = struct.unpack_from("I", info, 80)
assert 0 < rtt_us < 1_000_000, f"tcpi_rtt {rtt_us}"
assert snd_cwnd >= 2, f"tcpi_snd_cwnd {snd_cwnd}"
s.setblocking(True)

# Fork: the child uses the connection and exits; the parent's copy stays.
pid = os.fork()
if pid == 0:
    try:
        s.sendall(b"child")
        ok = recv_exactly(s, 5) == b"child"
        s.close()
    except Exception as e:  # noqa: BLE001 - report anything to the parent
        print(f"child: {e}", file=sys.stderr)
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the child failed"
s.sendall(b"parent")
assert recv_exactly(s, 6) == b"parent"

# A duplicate descriptor is the same socket; closing one leaves the other.
d = s.dup()
d.sendall(b"dup")
assert recv_exactly(s, 3) == b"dup"
s.close()
s = d

# FIONREAD and shutdown: bytes queued to read, then the peer's EOF.
import fcntl
import termios
s.sendall(b"12345")
select.select([s], [], [], 5)
n = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0]
assert 1 <= n <= 5, n
assert recv_exactly(s, 5) == b"12345"
s.shutdown(socket.SHUT_WR)
assert s.recv(10) == b"", "the echo server closes after our FIN"
expect_errno(errno.EPIPE, s.send, b"late")
s.close()

# A listener on the data path: non-blocking accept, then select, accept.
# Made non-blocking before listen() (FIONBIO, as nginx does): it stays so on
# the data path. Listening again only changes the backlog (nginx does that
# too): it succeeds, as the kernel's does.
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", listen_port))
srv.setblocking(False)
srv.listen(8)
srv.listen(511)
assert srv.getsockname() == ("0.0.0.0", listen_port), srv.getsockname()
assert srv.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
expect_errno(errno.EAGAIN, srv.accept)
# A listening socket is never writable (the kernel's never is): waiting for
# it to be readable or writable wakes only when a connection waits.
_, writable, _ = select.select([], [srv], [], 0)
assert writable == [], "an idle listener polls writable"
print("listening", flush=True)
readable, writable, _ = select.select([srv], [srv], [], 20)
assert readable == [srv], "no connection to accept"
assert writable == [], "a listener with a connection waiting polls writable"
c, addr = srv.accept()
c.setblocking(True)
assert c.getpeername() == addr
assert c.getsockname()[1] == listen_port
# A forking server: the parent closes its copy at once, the child serves.
pid = os.fork()
if pid == 0:
    try:
        ok = recv_exactly(c, 4) == b"ping"
        c.sendall(b"pong")
        c.close()
    except Exception as e:  # noqa: BLE001 - report anything to the parent
        print(f"child: {e}", file=sys.stderr)
        ok = False
    os._exit(0 if ok else 1)
c.close()
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the serving child failed"
srv.close()

# Sockets the data path does not own stay the kernel's: UDP, UNIX, loopback.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
u.sendto(b"udp", u.getsockname())
assert u.recvfrom(10)[0] == b"udp"
a, b = socket.socketpair()
a.sendall(b"unix")
assert b.recv(10) == b"unix"
lo = socket.socket()
lo.bind(("127.0.0.1", 0))
lo.listen(1)
lc = socket.create_connection(lo.getsockname())
la, _ = lo.accept()
lc.sendall(b"loopback")
assert la.recv(10) == b"loopback"
print("OK", flush=True)
