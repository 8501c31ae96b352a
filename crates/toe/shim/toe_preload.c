// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * toe_preload.c: the POSIX sockets shim of Steer's userspace TCP data path
 * (docs/toe.md, "Application interface"; the thesis's libTOE, chapter 3).
 * Loaded with LD_PRELOAD by `steer toe run`, it moves an unmodified
 * program's TCP sockets onto the data path served at $STEER_TOE_SOCKET; the
 * shared-memory layout and control messages are in toe_app.h.
 *
 * Which sockets: socket() always makes a kernel socket, so options set and
 * addresses bound before listen() or connect() are the kernel's. listen() on
 * a TCP socket bound to the wildcard or the data path's address, and
 * connect() of a TCP socket to a non-loopback address of the data path's
 * family (or a v4-mapped one), move the socket to the data path; everything
 * else (UNIX, UDP, loopback, other families) stays with the kernel. With no
 * service (no $STEER_TOE_SOCKET, or it does not answer) nothing moves.
 *
 * The descriptor: when a socket moves, the descriptor the service gives
 * (a listener's pipe read end, a connection's end of a UNIX socket pair) is
 * dup3()ed over the program's descriptor number, so poll, select and epoll
 * work unchanged on mixed descriptor sets and report what the kernel would
 * for a TCP socket (toe_app.h): a connection is readable while bytes or EOF
 * wait, writable only while its TX ring has room (a writer that fills it
 * plugs the descriptor; the service unplugs it when the data path frees
 * space), POLLRDHUP at the peer's FIN, POLLHUP when both directions are
 * shut, POLLERR|POLLHUP at a reset. connect() completes before it returns,
 * also for a non-blocking socket (POSIX allows that).
 *
 * Bytes: each connection has an RX and a TX ring in shared memory, each
 * mapped twice back to back, so every copy in or out is one memcpy.
 *
 * Fork: the child gets its own control connection to the same context
 * (TOE_OP_JOIN, in a pthread_atfork handler), and every connection's
 * reference count (toe_slot.refs) counts the child's descriptors too (taken
 * before the fork): the connection is closed when the last descriptor on it
 * is, in any process. Each process also counts its own share
 * (toe_slot.holds, by the process number HELLO or JOIN gave it), so that
 * when a process ends without closing its descriptors (a worker killed or
 * exiting) the service drops its share and closes what no other process
 * holds, as the kernel closes a dead process's sockets. (If fork fails,
 * or the child dies before it joined, those references stay: the
 * connections then close when the context's last process exits.)
 *
 * listen() on a socket that already listens on the data path returns 0, as
 * the kernel's does for a backlog change (nginx listens twice); the
 * backlog itself is the service's, whose pending queue has no such bound.
 * A socket's O_NONBLOCK, however set before it moved (SOCK_NONBLOCK,
 * fcntl, FIONBIO), stays its own after.
 *
 * Socket options on a moved socket behave as the kernel's where the data
 * path does what they ask (TCP_NODELAY on: it never delays; SO_RCVBUF and
 * SO_SNDBUF: the rings' size, as the kernel reports a clamped value;
 * SO_ERROR, SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN; SO_RCVTIMEO and
 * SO_SNDTIMEO; TCP_MAXSEG and TCP_INFO from the protocol stage's state;
 * TCP_CONGESTION names the data path's policy), and fail with the kernel's
 * error where it cannot (ENOPROTOOPT for keepalive, Nagle and lingering,
 * ENOENT for another congestion control algorithm), never silently.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "toe_app.h"

_Static_assert(sizeof(struct toe_header) == TOE_HEADER_SIZE, "toe_header");
_Static_assert(sizeof(struct toe_slot) == TOE_SLOT_SIZE, "toe_slot");
_Static_assert(sizeof(struct toe_req) == TOE_REQ_SIZE, "toe_req");
_Static_assert(sizeof(struct toe_resp) == TOE_RESP_SIZE, "toe_resp");
_Static_assert(offsetof(struct toe_slot, rx_head) == TOE_OFF_RX_HEAD, "rx_head");
_Static_assert(offsetof(struct toe_slot, rx_tail) == TOE_OFF_RX_TAIL, "rx_tail");
_Static_assert(offsetof(struct toe_slot, tx_head) == TOE_OFF_TX_HEAD, "tx_head");
_Static_assert(offsetof(struct toe_slot, tx_tail) == TOE_OFF_TX_TAIL, "tx_tail");
_Static_assert(offsetof(struct toe_slot, state) == TOE_OFF_STATE, "state");
_Static_assert(offsetof(struct toe_slot, events) == TOE_OFF_EVENTS, "events");
_Static_assert(offsetof(struct toe_slot, app_flags) == TOE_OFF_APP_FLAGS, "app_flags");
_Static_assert(offsetof(struct toe_slot, snd_una) == TOE_OFF_SND_UNA, "snd_una");
_Static_assert(offsetof(struct toe_slot, snd_nxt) == TOE_OFF_SND_NXT, "snd_nxt");
_Static_assert(offsetof(struct toe_slot, rcv_nxt) == TOE_OFF_RCV_NXT, "rcv_nxt");
_Static_assert(offsetof(struct toe_slot, rcv_wnd) == TOE_OFF_RCV_WND, "rcv_wnd");
_Static_assert(offsetof(struct toe_slot, snd_mss) == TOE_OFF_SND_MSS, "snd_mss");
_Static_assert(offsetof(struct toe_slot, addrs.family) == TOE_OFF_FAMILY, "family");
_Static_assert(offsetof(struct toe_slot, addrs.local_port) == TOE_OFF_LOCAL_PORT, "local_port");
_Static_assert(offsetof(struct toe_slot, addrs.remote_port) == TOE_OFF_REMOTE_PORT, "remote_port");
_Static_assert(offsetof(struct toe_slot, addrs.local_addr) == TOE_OFF_LOCAL_ADDR, "local_addr");
_Static_assert(offsetof(struct toe_slot, addrs.remote_addr) == TOE_OFF_REMOTE_ADDR, "remote_addr");
_Static_assert(offsetof(struct toe_slot, refs) == TOE_OFF_REFS, "refs");
_Static_assert(offsetof(struct toe_slot, snd_cwnd) == TOE_OFF_SND_CWND, "snd_cwnd");
_Static_assert(offsetof(struct toe_slot, srtt_us) == TOE_OFF_SRTT_US, "srtt_us");
_Static_assert(offsetof(struct toe_slot, congestion) == TOE_OFF_CONGESTION, "congestion");
_Static_assert(offsetof(struct toe_slot, rx_armed) == TOE_OFF_RX_ARMED, "rx_armed");
_Static_assert(offsetof(struct toe_slot, total_retrans) == TOE_OFF_TOTAL_RETRANS, "total_retrans");
_Static_assert(offsetof(struct toe_slot, backoffs) == TOE_OFF_BACKOFFS, "backoffs");
_Static_assert(offsetof(struct toe_slot, retrans) == TOE_OFF_RETRANS, "retrans");
_Static_assert(offsetof(struct toe_slot, lost) == TOE_OFF_LOST, "lost");
_Static_assert(offsetof(struct toe_slot, sacked) == TOE_OFF_SACKED, "sacked");
_Static_assert(offsetof(struct toe_slot, reordering) == TOE_OFF_REORDERING, "reordering");
_Static_assert(offsetof(struct toe_slot, holds) == TOE_OFF_HOLDS, "holds");

#define EXPORT __attribute__((visibility("default")))
/* The prologue of a wrapper: `s` is the data-path socket behind `fd`; a
 * descriptor that is none goes to libc's own call, `real_call`. */
#define OURS_OR_REAL(fd, real_call) \
    struct tsock *s = ours(fd);     \
    if (!s) {                       \
        return real_call;           \
    }                               \
    (void)0
/* The same for a call only a connection takes: on a listener it fails
 * with ENOTCONN, as the kernel's does on a stream socket not connected. */
#define CONN_OR_REAL(fd, real_call) \
    OURS_OR_REAL(fd, real_call);    \
    if (s->kind != K_CONN) {        \
        errno = ENOTCONN;           \
        return -1;                  \
    }                               \
    (void)0
#define RING_MASK (TOE_RING_SIZE - 1u)
/* Descriptors the shim tracks; a socket on a higher number stays the kernel's. */
#define MAX_FD 65536

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* ---- the real functions ---- */

static int (*real_socket)(int, int, int);
static int (*real_bind)(int, const struct sockaddr *, socklen_t);
static int (*real_listen)(int, int);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static int (*real_close)(int);
static int (*real_shutdown)(int, int);
static int (*real_getsockopt)(int, int, int, void *, socklen_t *);
static int (*real_setsockopt)(int, int, int, const void *, socklen_t);
static int (*real_getsockname)(int, struct sockaddr *, socklen_t *);
static int (*real_getpeername)(int, struct sockaddr *, socklen_t *);
static int (*real_fcntl)(int, int, ...);
static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_dup)(int);
static int (*real_dup3)(int, int, int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);

static void *next(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "steer toe shim: no %s to wrap\n", name);
        abort();
    }
    return f;
}

static int debug;

#define LOG(...)                                                                                   \
    do {                                                                                           \
        if (debug) {                                                                               \
            fprintf(stderr, "steer toe shim[%d]: ", (int)getpid());                               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* ---- descriptors ---- */

enum kind {
    K_KERNEL = 0, /* not ours (or not a TCP socket) */
    K_TCP,        /* a kernel TCP socket that may move at listen() or connect() */
    K_LISTENER,
    K_CONN,
};

struct tsock {
    uint8_t kind;
    uint8_t nonblock;
    uint8_t shut_rd;
    uint8_t shut_wr;
    int family; /* the program's: AF_INET or AF_INET6 */
    uint32_t id;
    pid_t owner; /* the process that made a listener (it alone unlistens) */
    int so_error;
    int reuseaddr;
    int reuseport;
    int v6only;
    int rcvtimeo_ms; /* -1: none */
    int sndtimeo_ms;
    struct sockaddr_storage bound; /* a listener's address, as bound */
    socklen_t bound_len;
};

static struct tsock socks[MAX_FD];
/* Descriptors of this process on each listener (dup). A listener stops
 * when the last one in the process that made it closes. */
#define MAX_LISTENERS 1024
static uint32_t listener_refs[MAX_LISTENERS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct tsock *ours(int fd) {
    if (fd < 0 || fd >= MAX_FD) {
        return NULL;
    }
    struct tsock *s = &socks[fd];
    return (s->kind == K_LISTENER || s->kind == K_CONN) ? s : NULL;
}

/* ---- the context ---- */

static int ctx_state;  /* 0: not tried, 1: up, -1: unavailable */
static int ctl = -1;
static uint32_t ctx_id;
static int proc_no = -1; /* this process's number in the context (toe_slot.holds), -1: none */
static int doorbell = -1;
static int dp_family; /* 4 or 6 */
static uint8_t dp_addr[16];
static struct toe_slot *slots;
static uint8_t *rx_ring[TOE_SLOTS];
static uint8_t *tx_ring[TOE_SLOTS];

static int ctl_connect(void) {
    const char *path = getenv(TOE_SOCKET_ENV);
    if (!path || !*path) {
        return -1;
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path)) {
        return -1;
    }
    strcpy(a.sun_path, path);
    int fd = real_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    if (real_connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        real_close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* One request and its reply, with up to two descriptors. -1 with errno on
 * failure (the service's errno, or the channel's). Under `lock`. */
static int call(const struct toe_req *req, struct toe_resp *resp, int *fds, int nfds) {
    if (real_sendto(ctl, req, sizeof(*req), MSG_NOSIGNAL, NULL, 0) != (ssize_t)sizeof(*req)) {
        return -1;
    }
    struct iovec iov = {.iov_base = resp, .iov_len = sizeof(*resp)};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
                        .msg_controllen = sizeof(cbuf.buf)};
    ssize_t n;
    do {
        n = real_recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(*resp)) {
        errno = n < 0 ? errno : EPROTO;
        return -1;
    }
    int got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < count; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (got < nfds) {
                    fds[got++] = fd;
                } else {
                    real_close(fd);
                }
            }
        }
    }
    if (resp->err != 0) {
        for (int i = 0; i < got; i++) {
            real_close(fds[i]);
        }
        errno = resp->err;
        return -1;
    }
    if (got < nfds) {
        for (int i = 0; i < got; i++) {
            real_close(fds[i]);
        }
        errno = EPROTO;
        return -1;
    }
    return 0;
}

/* Maps `len` bytes of `fd` at `off` twice, back to back (thesis Fig. 5.7). */
static uint8_t *map_twice(int fd, off_t off, size_t len) {
    uint8_t *p = mmap(NULL, 2 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    if (mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off) == MAP_FAILED ||
        mmap(p + len, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off) == MAP_FAILED) {
        munmap(p, 2 * len);
        return NULL;
    }
    return p;
}

/* Connects to the service once; whether the data path is there. Under `lock`. */
static int context(void) {
    if (ctx_state != 0) {
        return ctx_state > 0;
    }
    ctx_state = -1;
    ctl = ctl_connect();
    if (ctl < 0) {
        LOG("no data path service (%s): sockets stay the kernel's", strerror(errno));
        return 0;
    }
    struct toe_req req = {.op = TOE_OP_HELLO};
    struct toe_resp resp;
    int fds[2];
    if (call(&req, &resp, fds, 2) < 0) {
        LOG("HELLO failed: %s", strerror(errno));
        real_close(ctl);
        ctl = -1;
        return 0;
    }
    uint8_t *head = mmap(NULL, TOE_RINGS_OFF, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    const struct toe_header *h = (const struct toe_header *)head;
    if (head == MAP_FAILED || h->magic != TOE_MAGIC || h->version != TOE_VERSION ||
        h->slots != TOE_SLOTS || h->ring_size != TOE_RING_SIZE) {
        fprintf(stderr, "steer toe shim: the service's shared memory is not this shim's layout\n");
        abort();
    }
    slots = (struct toe_slot *)(head + TOE_SLOTS_OFF);
    for (int i = 0; i < TOE_SLOTS; i++) {
        off_t rx = TOE_RINGS_OFF + (off_t)2 * i * TOE_RING_SIZE;
        rx_ring[i] = map_twice(fds[0], rx, TOE_RING_SIZE);
        tx_ring[i] = map_twice(fds[0], rx + TOE_RING_SIZE, TOE_RING_SIZE);
        if (!rx_ring[i] || !tx_ring[i]) {
            fprintf(stderr, "steer toe shim: cannot map the payload rings: %s\n", strerror(errno));
            abort();
        }
    }
    real_close(fds[0]);
    doorbell = fds[1];
    ctx_id = resp.id;
    proc_no = 0;
    dp_family = resp.addrs.family;
    memcpy(dp_addr, resp.addrs.local_addr, 16);
    ctx_state = 1;
    LOG("context %u on the data path", ctx_id);
    return 1;
}

static void ring_doorbell(void) {
    uint64_t one = 1;
    if (real_write(doorbell, &one, 8) < 0) {
        /* Only at counter overflow: the service is awake anyway. */
    }
}

/* This process's count of descriptors on connection `id` moves by `delta`
 * (toe_slot.holds; only this process writes its entry while it lives).
 * Taken after refs grows and dropped before it shrinks: a process that
 * dies between the two leaves one reference too many (the connection stays
 * open until the context ends), never one too few. Under `lock`. */
static void hold(uint32_t id, int delta) {
    if (proc_no < 0) {
        return;
    }
    uint8_t *h = &slots[id].holds[proc_no];
    int n = LOAD(h);
    if (n == TOE_HOLDS_UNCOUNTED) {
        return;
    }
    n += delta;
    STORE(h, (uint8_t)(n < 0 ? 0 : n > TOE_HOLDS_UNCOUNTED ? TOE_HOLDS_UNCOUNTED : n));
}

/* ---- addresses ---- */

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The IPv4 address of an AF_INET or v4-mapped AF_INET6 address, else 0. */
static int v4_of(const struct sockaddr *a, socklen_t len, uint8_t out[4], uint16_t *port) {
    if (a->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)a;
        memcpy(out, &s->sin_addr, 4);
        *port = ntohs(s->sin_port);
        return 1;
    }
    if (a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;
        if (memcmp(s->sin6_addr.s6_addr, mapped_prefix, 12) == 0) {
            memcpy(out, s->sin6_addr.s6_addr + 12, 4);
            *port = ntohs(s->sin6_port);
            return 1;
        }
    }
    return 0;
}

/* Writes a toe address (family 4 or 6) as the program's `family` sees it. */
static void to_sockaddr(int family, int toe_family, const uint8_t addr[16], uint16_t port,
                        struct sockaddr *out, socklen_t *len) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t n;
    if (family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        memcpy(&s->sin_addr, addr, 4);
        n = sizeof(*s);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        if (toe_family == 4) {
            memcpy(s->sin6_addr.s6_addr, mapped_prefix, 12);
            memcpy(s->sin6_addr.s6_addr + 12, addr, 4);
        } else {
            memcpy(s->sin6_addr.s6_addr, addr, 16);
        }
        n = sizeof(*s);
    }
    if (out && len) {
        memcpy(out, &ss, *len < n ? *len : n);
        *len = n;
    }
}

/* Whether a bound address is the wildcard or the data path's. */
static int listens_on_data_path(const struct tsock *s, const struct sockaddr *a, socklen_t len) {
    uint8_t v4[4];
    uint16_t port;
    if (dp_family == 4) {
        if (v4_of(a, len, v4, &port)) {
            return memcmp(v4, "\0\0\0\0", 4) == 0 || memcmp(v4, dp_addr, 4) == 0;
        }
        /* :: takes IPv4 connections too unless IPV6_V6ONLY. */
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
        return a->sa_family == AF_INET6 && !s->v6only &&
               memcmp(&s6->sin6_addr, &in6addr_any, 16) == 0;
    }
    if (a->sa_family != AF_INET6) {
        return 0;
    }
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
    return memcmp(&s6->sin6_addr, &in6addr_any, 16) == 0 || memcmp(&s6->sin6_addr, dp_addr, 16) == 0;
}

/* Whether a destination is one the data path reaches: of its family (or
 * v4-mapped for IPv4), not loopback, not unspecified. Fills the request. */
static int connects_on_data_path(const struct sockaddr *a, socklen_t len, struct toe_req *req) {
    uint8_t v4[4];
    uint16_t port;
    if (dp_family == 4 && v4_of(a, len, v4, &port)) {
        if (v4[0] == 127 || v4[0] == 0) {
            return 0;
        }
        req->family = 4;
        req->port = port;
        memcpy(req->addr, v4, 4);
        return 1;
    }
    if (dp_family == 6 && a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
        if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr) ||
            IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            return 0;
        }
        req->family = 6;
        req->port = ntohs(s6->sin6_port);
        memcpy(req->addr, &s6->sin6_addr, 16);
        return 1;
    }
    return 0;
}

/* ---- readiness ---- */

static int readable(const struct toe_slot *sl) {
    uint32_t ev = LOAD(&sl->events);
    return LOAD(&sl->rx_head) != sl->rx_tail || (ev & (TOE_EV_EOF | TOE_EV_RESET)) != 0;
}

/* Reads away the service's readable bytes on a connection's descriptor:
 * exactly those queued, for a read of an empty socket would take its
 * pending error (a reset's ECONNRESET, which must go on polling POLLERR). */
static void drain_notice(int fd) {
    char buf[256];
    int queued = 0;
    while (real_ioctl(fd, FIONREAD, &queued) == 0 && queued > 0) {
        size_t n = (size_t)queued < sizeof(buf) ? (size_t)queued : sizeof(buf);
        if (real_recvfrom(fd, buf, n, MSG_DONTWAIT, NULL, NULL) <= 0) {
            return;
        }
    }
}

/* After a read: the descriptor stays readable while bytes or EOF wait (the
 * service's byte stays unread) and is emptied once they are gone. If bytes
 * came meanwhile, rx_armed = 0 and the doorbell make the service write its
 * byte again: a wake-up may be early, never lost (toe_app.h).
 *
 * After a `short` read (it took every byte it saw), bytes in the ring came
 * after it looked: new to the program, which may wait for an edge (epoll's
 * EPOLLET: nginx takes a short read for "drained"). The byte already
 * queued raises none, so it is read away and the service writes it again,
 * a new edge, as data arriving on a kernel socket raises one. */
static void settle(int fd, struct toe_slot *sl, int short_read) {
    int fresh = short_read && LOAD(&sl->rx_head) != sl->rx_tail;
    if (readable(sl) && !fresh) {
        return;
    }
    __atomic_store_n(&sl->rx_armed, 0, __ATOMIC_SEQ_CST);
    drain_notice(fd);
    if (readable(sl)) {
        __atomic_store_n(&sl->rx_armed, 0, __ATOMIC_SEQ_CST);
        ring_doorbell();
    }
}

/* Fills the descriptor's send buffer, so that it polls not writable until
 * the service reads the plug away (toe_app.h). */
static void plug(int fd) {
    static const char zeros[16384];
    while (real_sendto(fd, zeros, sizeof(zeros), MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) > 0) {
    }
}

/* Waits for `events` on the descriptor; 0, or -1 with EINTR or EAGAIN
 * (timeout). */
static int wait_fd(int fd, short events, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0) {
        return -1;
    }
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

/* ---- the data path's byte moves ---- */

static ssize_t dp_recv(int fd, struct tsock *s, void *buf, size_t len, int flags) {
    struct toe_slot *sl = &slots[s->id];
    int nonblock = s->nonblock || (flags & MSG_DONTWAIT);
    size_t done = 0;
    for (;;) {
        uint32_t ev = LOAD(&sl->events);
        uint32_t tail = sl->rx_tail;
        uint32_t ready = LOAD(&sl->rx_head) - tail;
        if (ready > 0 && !s->shut_rd && len > done) {
            size_t n = len - done < ready ? len - done : ready;
            memcpy((uint8_t *)buf + done, rx_ring[s->id] + (tail & RING_MASK), n);
            if (flags & MSG_PEEK) {
                return (ssize_t)n;
            }
            STORE(&sl->rx_tail, tail + (uint32_t)n);
            ring_doorbell();
            done += n;
            if (!(flags & MSG_WAITALL) || done == len) {
                settle(fd, sl, done < len);
                return (ssize_t)done;
            }
            continue;
        }
        if (done > 0 || len == 0 || s->shut_rd) {
            settle(fd, sl, done < len);
            return (ssize_t)done;
        }
        if (ev & TOE_EV_RESET) {
            errno = ECONNRESET;
            return -1;
        }
        if (ev & TOE_EV_EOF) {
            return 0;
        }
        settle(fd, sl, 0);
        if (readable(sl)) {
            continue;
        }
        if (nonblock) {
            errno = EAGAIN;
            return -1;
        }
        if (wait_fd(fd, POLLIN, s->rcvtimeo_ms) < 0) {
            return -1;
        }
    }
}

static ssize_t dp_send(int fd, struct tsock *s, const void *buf, size_t len, int flags) {
    struct toe_slot *sl = &slots[s->id];
    int nonblock = s->nonblock || (flags & MSG_DONTWAIT);
    size_t done = 0;
    for (;;) {
        if (LOAD(&sl->events) & TOE_EV_RESET) {
            if (done > 0) {
                return (ssize_t)done;
            }
            errno = ECONNRESET;
            return -1;
        }
        if (s->shut_wr) {
            if (done > 0) {
                return (ssize_t)done;
            }
            if (!(flags & MSG_NOSIGNAL)) {
                raise(SIGPIPE);
            }
            errno = EPIPE;
            return -1;
        }
        uint32_t head = sl->tx_head;
        uint32_t room = TOE_RING_SIZE - (head - LOAD(&sl->tx_tail));
        if (room > 0 && done < len) {
            size_t n = len - done < room ? len - done : room;
            memcpy(tx_ring[s->id] + (head & RING_MASK), (const uint8_t *)buf + done, n);
            STORE(&sl->tx_head, head + (uint32_t)n);
            ring_doorbell();
            done += n;
            continue;
        }
        if (done == len || (nonblock && done > 0)) {
            return (ssize_t)done;
        }
        /* The ring is full: the descriptor stops polling writable until the
         * service has room again (plug first, then the flag, so that the
         * service never reads away a plug that is still being written). */
        plug(fd);
        __atomic_fetch_or(&sl->app_flags, TOE_APP_WANT_TX, __ATOMIC_SEQ_CST);
        ring_doorbell();
        if (LOAD(&sl->tx_tail) != head - TOE_RING_SIZE) {
            continue;
        }
        if (nonblock) {
            errno = EAGAIN;
            return -1;
        }
        if (wait_fd(fd, POLLOUT, s->sndtimeo_ms) < 0) {
            return done > 0 ? (ssize_t)done : -1;
        }
    }
}

/* ---- moving a socket to the data path ---- */

/* Puts `efd` in place of the kernel socket `fd` (keeping its close-on-exec). */
static int replace(int fd, int efd) {
    int fdflags = real_fcntl(fd, F_GETFD);
    int r = real_dup3(efd, fd, (fdflags >= 0 && (fdflags & FD_CLOEXEC)) ? O_CLOEXEC : 0);
    real_close(efd);
    return r < 0 ? -1 : 0;
}

static int kernel_int_opt(int fd, int level, int name) {
    int v = 0;
    socklen_t l = sizeof(v);
    if (real_getsockopt(fd, level, name, &v, &l) < 0) {
        return 0;
    }
    return v;
}

static void note_options(int fd, struct tsock *s) {
    int fl = real_fcntl(fd, F_GETFL);
    if (fl >= 0) {
        s->nonblock = (fl & O_NONBLOCK) != 0;
    }
    s->reuseaddr = kernel_int_opt(fd, SOL_SOCKET, SO_REUSEADDR);
    s->reuseport = kernel_int_opt(fd, SOL_SOCKET, SO_REUSEPORT);
    s->rcvtimeo_ms = -1;
    s->sndtimeo_ms = -1;
}

/* ---- the wrapped calls ---- */

__attribute__((constructor)) static void init(void) {
    real_socket = next("socket");
    real_bind = next("bind");
    real_listen = next("listen");
    real_accept4 = next("accept4");
    real_connect = next("connect");
    real_read = next("read");
    real_write = next("write");
    real_readv = next("readv");
    real_writev = next("writev");
    real_recvfrom = next("recvfrom");
    real_sendto = next("sendto");
    real_recvmsg = next("recvmsg");
    real_sendmsg = next("sendmsg");
    real_close = next("close");
    real_shutdown = next("shutdown");
    real_getsockopt = next("getsockopt");
    real_setsockopt = next("setsockopt");
    real_getsockname = next("getsockname");
    real_getpeername = next("getpeername");
    real_fcntl = next("fcntl");
    real_ioctl = next("ioctl");
    real_dup = next("dup");
    real_dup3 = next("dup3");
    real_sendfile = next("sendfile");
    real_splice = next("splice");
    const char *d = getenv(TOE_DEBUG_ENV);
    debug = d && *d == '1';
}

EXPORT int socket(int domain, int type, int protocol) {
    int fd = real_socket(domain, type, protocol);
    if (fd >= 0 && fd < MAX_FD) {
        int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct tsock *s = &socks[fd];
        memset(s, 0, sizeof(*s));
        if ((domain == AF_INET || domain == AF_INET6) && base == SOCK_STREAM &&
            (protocol == 0 || protocol == IPPROTO_TCP)) {
            s->kind = K_TCP;
            s->family = domain;
            s->nonblock = (type & SOCK_NONBLOCK) != 0;
        }
    }
    return fd;
}

EXPORT int listen(int fd, int backlog) {
    struct tsock *moved = ours(fd);
    if (moved) {
        /* Listening again changes only the backlog (0, as the kernel's); a
         * connected socket cannot listen (the kernel's EINVAL). */
        if (moved->kind == K_CONN) {
            errno = EINVAL;
            return -1;
        }
        LOG("fd %d listens again (backlog %d): it already listens on the data path", fd, backlog);
        return 0;
    }
    if (fd < 0 || fd >= MAX_FD || socks[fd].kind != K_TCP) {
        return real_listen(fd, backlog);
    }
    pthread_mutex_lock(&lock);
    struct tsock *s = &socks[fd];
    s->v6only = s->family == AF_INET6 && kernel_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY);
    struct sockaddr_storage a;
    socklen_t alen = sizeof(a);
    if (!context() || real_getsockname(fd, (struct sockaddr *)&a, &alen) < 0 ||
        !listens_on_data_path(s, (struct sockaddr *)&a, alen)) {
        s->kind = K_KERNEL;
        pthread_mutex_unlock(&lock);
        return real_listen(fd, backlog);
    }
    uint16_t port = ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (port == 0) {
        /* An unbound socket listens on a port the kernel picks, as listen() does. */
        struct sockaddr_storage any;
        memset(&any, 0, sizeof(any));
        any.ss_family = (sa_family_t)s->family;
        socklen_t l = s->family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        if (real_bind(fd, (struct sockaddr *)&any, l) < 0 ||
            real_getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        port = ntohs(((struct sockaddr_in *)&a)->sin_port);
    }
    struct toe_req req = {.op = TOE_OP_LISTEN, .port = port};
    struct toe_resp resp;
    int efd;
    if (call(&req, &resp, &efd, 1) < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    note_options(fd, s);
    s->bound = a;
    s->bound_len = alen;
    if (replace(fd, efd) < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    s->kind = K_LISTENER;
    s->id = resp.id;
    s->owner = getpid();
    if (resp.id < MAX_LISTENERS) {
        listener_refs[resp.id] = 1;
    }
    LOG("fd %d listens on the data path, port %u (listener %u)", fd, port, resp.id);
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    OURS_OR_REAL(fd, real_accept4(fd, addr, len, flags));
    /* The kernel's answers: flags other than these, or a socket that does
     * not listen. */
    if (s->kind != K_LISTENER || (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != 0) {
        errno = EINVAL;
        return -1;
    }
    for (;;) {
        pthread_mutex_lock(&lock);
        struct toe_req req = {.op = TOE_OP_ACCEPT, .id = s->id};
        struct toe_resp resp;
        int efd;
        int r = call(&req, &resp, &efd, 1);
        if (r == 0) {
            if (!(flags & SOCK_CLOEXEC)) {
                real_fcntl(efd, F_SETFD, 0);
            }
            if (efd >= MAX_FD) {
                /* Too high to track: refuse rather than hand out a broken socket. */
                struct toe_req close_req = {.op = TOE_OP_CLOSE, .id = resp.id};
                struct toe_resp ignored;
                call(&close_req, &ignored, NULL, 0);
                real_close(efd);
                pthread_mutex_unlock(&lock);
                errno = EMFILE;
                return -1;
            }
            struct tsock *c = &socks[efd];
            memset(c, 0, sizeof(*c));
            c->kind = K_CONN;
            c->family = s->family;
            c->id = resp.id;
            c->nonblock = (flags & SOCK_NONBLOCK) != 0;
            c->rcvtimeo_ms = -1;
            c->sndtimeo_ms = -1;
            __atomic_store_n(&slots[resp.id].refs, 1, __ATOMIC_RELEASE);
            hold(resp.id, 1);
            pthread_mutex_unlock(&lock);
            to_sockaddr(s->family, resp.addrs.family, resp.addrs.remote_addr, resp.addrs.remote_port, addr, len);
            LOG("fd %d accepted connection %u as fd %d", fd, resp.id, efd);
            return efd;
        }
        pthread_mutex_unlock(&lock);
        if (errno != EAGAIN || s->nonblock) {
            return -1;
        }
        if (wait_fd(fd, POLLIN, -1) < 0) {
            return -1;
        }
    }
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, 0);
}

/* The port a socket was bound to before connect(), for the data path to use
 * as the kernel would: 1 (req->local_port set, 0 if unbound), or 0 when it
 * is bound to an address that is not the data path's (the kernel's then). */
static int bound_port(int fd, const struct tsock *s, struct toe_req *req) {
    struct sockaddr_storage a;
    socklen_t alen = sizeof(a);
    if (real_getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        return 1;
    }
    uint16_t port = a.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                                           : ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    if (port == 0) {
        return 1;
    }
    if (!listens_on_data_path(s, (struct sockaddr *)&a, alen)) {
        return 0;
    }
    req->local_port = port;
    return 1;
}

/* An active open on the data path: 1 done (0 returned to the program), 0 not
 * ours (the kernel's connect follows), -1 failed with errno. */
static int dp_connect(int fd, struct tsock *s, const struct sockaddr *addr, socklen_t len) {
    struct toe_req req = {.op = TOE_OP_CONNECT};
    pthread_mutex_lock(&lock);
    if (!context() || !connects_on_data_path(addr, len, &req) || !bound_port(fd, s, &req)) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    struct toe_resp resp;
    int efd;
    if (call(&req, &resp, &efd, 1) < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    pthread_mutex_unlock(&lock);
    struct toe_slot *sl = &slots[resp.id];
    /* The open completes here, for a non-blocking socket too. */
    while (LOAD(&sl->state) == TOE_ST_CONNECTING) {
        struct pollfd p = {.fd = efd, .events = POLLIN};
        poll(&p, 1, -1);
        drain_notice(efd);
    }
    if (LOAD(&sl->state) != TOE_ST_ESTABLISHED) {
        int e = (LOAD(&sl->events) & TOE_EV_REFUSED) ? ECONNREFUSED : ETIMEDOUT;
        pthread_mutex_lock(&lock);
        struct toe_req close_req = {.op = TOE_OP_CLOSE, .id = resp.id};
        struct toe_resp ignored;
        call(&close_req, &ignored, NULL, 0);
        pthread_mutex_unlock(&lock);
        real_close(efd);
        LOG("fd %d: connect on the data path failed: %s", fd, strerror(e));
        errno = e;
        return -1;
    }
    pthread_mutex_lock(&lock);
    note_options(fd, s);
    if (replace(fd, efd) < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    s->kind = K_CONN;
    s->id = resp.id;
    __atomic_store_n(&sl->refs, 1, __ATOMIC_RELEASE);
    hold(resp.id, 1);
    settle(fd, sl, 0);
    pthread_mutex_unlock(&lock);
    LOG("fd %d connected on the data path (connection %u, local port %u)", fd, resp.id,
        sl->addrs.local_port);
    return 1;
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    if (fd >= 0 && fd < MAX_FD && socks[fd].kind == K_TCP && addr) {
        int r = dp_connect(fd, &socks[fd], addr, len);
        if (r != 0) {
            return r > 0 ? 0 : -1;
        }
        socks[fd].kind = K_KERNEL;
    } else if (ours(fd)) {
        errno = EISCONN;
        return -1;
    }
    return real_connect(fd, addr, len);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *src,
                        socklen_t *alen) {
    CONN_OR_REAL(fd, real_recvfrom(fd, buf, len, flags, src, alen));
    /* A connected stream socket reports no source address. */
    if (alen) {
        *alen = 0;
    }
    return dp_recv(fd, s, buf, len, flags);
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags) {
    return recvfrom(fd, buf, len, flags, NULL, NULL);
}

EXPORT ssize_t read(int fd, void *buf, size_t len) {
    OURS_OR_REAL(fd, real_read(fd, buf, len));
    return recvfrom(fd, buf, len, 0, NULL, NULL);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen) {
    if (len > buflen) {
        abort();
    }
    return read(fd, buf, len);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags) {
    if (len > buflen) {
        abort();
    }
    return recv(fd, buf, len, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                              struct sockaddr *src, socklen_t *alen) {
    if (len > buflen) {
        abort();
    }
    return recvfrom(fd, buf, len, flags, src, alen);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *dst,
                      socklen_t alen) {
    CONN_OR_REAL(fd, real_sendto(fd, buf, len, flags, dst, alen));
    return dp_send(fd, s, buf, len, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags) {
    return sendto(fd, buf, len, flags, NULL, 0);
}

EXPORT ssize_t write(int fd, const void *buf, size_t len) {
    OURS_OR_REAL(fd, real_write(fd, buf, len));
    return sendto(fd, buf, len, 0, NULL, 0);
}

/* Scatter (`rx`) and gather: one iovec at a time, stopping at a short
 * transfer. */
static ssize_t dp_iov(int fd, struct tsock *s, const struct iovec *iov, int n, int flags, int rx) {
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len == 0) {
            continue;
        }
        /* Only the first receive may block: later iovecs take what is there. */
        ssize_t r = rx ? dp_recv(fd, s, iov[i].iov_base, iov[i].iov_len, total ? flags | MSG_DONTWAIT : flags)
                       : dp_send(fd, s, iov[i].iov_base, iov[i].iov_len, flags);
        if (r < 0) {
            return total ? total : -1;
        }
        total += r;
        if ((size_t)r < iov[i].iov_len) {
            break;
        }
    }
    return total;
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int n) {
    CONN_OR_REAL(fd, real_readv(fd, iov, n));
    return dp_iov(fd, s, iov, n, 0, 1);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int n) {
    CONN_OR_REAL(fd, real_writev(fd, iov, n));
    return dp_iov(fd, s, iov, n, 0, 0);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *mh, int flags) {
    CONN_OR_REAL(fd, real_recvmsg(fd, mh, flags));
    mh->msg_namelen = 0;
    mh->msg_controllen = 0;
    mh->msg_flags = 0;
    return dp_iov(fd, s, mh->msg_iov, (int)mh->msg_iovlen, flags, 1);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *mh, int flags) {
    CONN_OR_REAL(fd, real_sendmsg(fd, mh, flags));
    return dp_iov(fd, s, mh->msg_iov, (int)mh->msg_iovlen, flags, 0);
}

/* sendfile to a data-path socket: the file's bytes through the TX ring
 * (read at the file's position, which advances only by what was sent, as
 * the kernel's does). Without this the kernel would write them into the
 * descriptor's socket pair, where the data path never sees them. */
static ssize_t dp_sendfile(int out, struct tsock *s, int in, off_t *offset, size_t count) {
    off_t pos = offset ? *offset : lseek(in, 0, SEEK_CUR);
    if (pos < 0) {
        return -1;
    }
    char buf[65536];
    size_t total = 0;
    while (total < count) {
        size_t want = count - total < sizeof(buf) ? count - total : sizeof(buf);
        ssize_t n = pread(in, buf, want, pos + (off_t)total);
        if (n <= 0) {
            if (n < 0 && total == 0) {
                return -1;
            }
            break;
        }
        /* After the first chunk, take only what fits without waiting. */
        ssize_t sent = dp_send(out, s, buf, (size_t)n, total ? MSG_DONTWAIT | MSG_NOSIGNAL : 0);
        if (sent < 0) {
            if (total == 0) {
                return -1;
            }
            break;
        }
        total += (size_t)sent;
        if (sent < n) {
            break;
        }
    }
    if (offset) {
        *offset = pos + (off_t)total;
    } else {
        lseek(in, pos + (off_t)total, SEEK_SET);
    }
    return (ssize_t)total;
}

EXPORT ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
    struct tsock *s = ours(out);
    if (!s && !ours(in)) {
        return real_sendfile(out, in, offset, count);
    }
    /* A socket is no file to send from (the kernel says EINVAL). */
    if (ours(in)) {
        errno = EINVAL;
        return -1;
    }
    if (s->kind != K_CONN) {
        errno = ENOTCONN;
        return -1;
    }
    return dp_sendfile(out, s, in, offset, count);
}

EXPORT ssize_t sendfile64(int out, int in, off_t *offset, size_t count) {
    return sendfile(out, in, offset, count);
}

/* splice moves pages between a pipe and a descriptor inside the kernel,
 * which never reaches the data path's rings: refused with the kernel's
 * answer for a descriptor that cannot splice. */
EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
                      unsigned int flags) {
    if (ours(in) || ours(out)) {
        errno = EINVAL;
        return -1;
    }
    return real_splice(in, off_in, out, off_out, len, flags);
}

EXPORT int shutdown(int fd, int how) {
    CONN_OR_REAL(fd, real_shutdown(fd, how));
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
        errno = EINVAL;
        return -1;
    }
    if (how == SHUT_RD || how == SHUT_RDWR) {
        s->shut_rd = 1;
    }
    if (how == SHUT_WR || how == SHUT_RDWR) {
        s->shut_wr = 1;
        __atomic_fetch_or(&slots[s->id].app_flags, TOE_APP_SHUT_WR, __ATOMIC_RELEASE);
        ring_doorbell();
    }
    /* The descriptor polls as the kernel's socket would: POLLIN|POLLRDHUP
     * after SHUT_RD, POLLHUP once the peer's FIN came too. */
    real_shutdown(fd, how);
    return 0;
}

/* Drops this descriptor's reference: the last one closes the connection
 * (or stops the listener). Under `lock`. */
static void release(int fd, struct tsock *s) {
    struct toe_req req = {.id = s->id};
    if (s->kind == K_CONN) {
        hold(s->id, -1);
        /* The last descriptor on the connection, in any process, closes it. */
        if (__atomic_sub_fetch(&slots[s->id].refs, 1, __ATOMIC_ACQ_REL) == 0) {
            req.op = TOE_OP_CLOSE;
        }
    } else if (s->owner == getpid() &&
               (s->id >= MAX_LISTENERS || --listener_refs[s->id] == 0)) {
        req.op = TOE_OP_UNLISTEN;
    }
    if (req.op) {
        struct toe_resp ignored;
        call(&req, &ignored, NULL, 0);
        ring_doorbell();
        LOG("fd %d closed (%s %u)", fd, s->kind == K_CONN ? "connection" : "listener", s->id);
    }
    s->kind = K_KERNEL;
}

EXPORT int close(int fd) {
    struct tsock *s = ours(fd);
    if (!s) {
        if (fd >= 0 && fd < MAX_FD) {
            socks[fd].kind = K_KERNEL;
        }
        return real_close(fd);
    }
    pthread_mutex_lock(&lock);
    release(fd, s);
    pthread_mutex_unlock(&lock);
    return real_close(fd);
}

/* A second descriptor on a data-path socket: the same table entry, one
 * more reference. Under `lock`. */
static int duplicated(int oldfd, int newfd) {
    if (newfd < 0) {
        return newfd;
    }
    if (newfd >= MAX_FD) {
        real_close(newfd);
        errno = EMFILE;
        return -1;
    }
    struct tsock *s = &socks[oldfd];
    socks[newfd] = *s;
    if (s->kind == K_CONN) {
        __atomic_add_fetch(&slots[s->id].refs, 1, __ATOMIC_ACQ_REL);
        hold(s->id, 1);
    } else if (s->id < MAX_LISTENERS) {
        listener_refs[s->id]++;
    }
    return newfd;
}

EXPORT int dup(int oldfd) {
    if (!ours(oldfd)) {
        return real_dup(oldfd);
    }
    pthread_mutex_lock(&lock);
    int r = duplicated(oldfd, real_dup(oldfd));
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT int dup3(int oldfd, int newfd, int flags) {
    if (oldfd == newfd) {
        return real_dup3(oldfd, newfd, flags);
    }
    pthread_mutex_lock(&lock);
    /* dup3 closes what newfd was: a data-path socket there is released. */
    struct tsock *target = ours(newfd);
    if (target) {
        release(newfd, target);
    } else if (newfd >= 0 && newfd < MAX_FD) {
        socks[newfd].kind = K_KERNEL;
    }
    int r = real_dup3(oldfd, newfd, flags);
    if (r >= 0 && ours(oldfd)) {
        r = duplicated(oldfd, r);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT int dup2(int oldfd, int newfd) {
    if (oldfd == newfd) {
        /* dup2 of a descriptor onto itself checks that it is open. */
        return real_fcntl(oldfd, F_GETFD) < 0 ? -1 : newfd;
    }
    return dup3(oldfd, newfd, 0);
}

/* ---- options ---- */

static int put_int(void *val, socklen_t *len, int v) {
    if (!val || !len || *len < sizeof(int)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(val, &v, sizeof(int));
    *len = sizeof(int);
    return 0;
}

static int get_int(const void *val, socklen_t len, int *v) {
    if (!val || len < sizeof(int)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(v, val, sizeof(int));
    return 0;
}

static int put_timeout(void *val, socklen_t *len, int ms) {
    struct timeval tv = {0, 0};
    if (ms >= 0) {
        tv.tv_sec = ms / 1000;
        tv.tv_usec = (ms % 1000) * 1000;
    }
    if (!val || !len || *len < sizeof(tv)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(val, &tv, sizeof(tv));
    *len = sizeof(tv);
    return 0;
}

/* The name TCP_CONGESTION gives a connection's policy; NULL before the
 * service has set one (a listener, an open in progress). */
static const char *congestion_name(const struct tsock *s) {
    if (s->kind != K_CONN) {
        return NULL;
    }
    switch (LOAD(&slots[s->id].congestion)) {
    case TOE_CC_RENO:
        return "reno";
    case TOE_CC_DCTCP:
        return "dctcp";
    }
    return NULL;
}

/* TCP_CONGESTION as the kernel answers it: the name, NUL-padded, cut to
 * the caller's length. */
static int put_congestion(const struct tsock *s, void *val, socklen_t *len) {
    const char *cc = congestion_name(s);
    if (!cc) {
        errno = ENOPROTOOPT;
        return -1;
    }
    if (!val || !len) {
        errno = EFAULT;
        return -1;
    }
    char name[16] = {0}; /* TCP_CA_NAME_MAX */
    strncpy(name, cc, sizeof(name) - 1);
    socklen_t n = *len < sizeof(name) ? *len : (socklen_t)sizeof(name);
    memcpy(val, name, n);
    *len = n;
    return 0;
}

/* TCP_INFO from the protocol stage's state, as the service last copied it. */
static int tcp_info(const struct tsock *s, void *val, socklen_t *len) {
    struct tcp_info ti;
    memset(&ti, 0, sizeof(ti));
    if (s->kind == K_LISTENER) {
        ti.tcpi_state = TCP_LISTEN;
    } else {
        const struct toe_slot *sl = &slots[s->id];
        uint32_t ev = LOAD(&sl->events);
        int fin_in = (ev & TOE_EV_EOF) != 0;
        int fin_out = (LOAD(&sl->app_flags) & TOE_APP_SHUT_WR) != 0;
        ti.tcpi_state = (ev & TOE_EV_RESET)  ? TCP_CLOSE
                        : fin_in && fin_out ? TCP_LAST_ACK
                        : fin_in            ? TCP_CLOSE_WAIT
                        : fin_out           ? TCP_FIN_WAIT1
                                            : TCP_ESTABLISHED;
        uint32_t mss = LOAD(&sl->snd_mss);
        uint32_t una = LOAD(&sl->snd_una), nxt = LOAD(&sl->snd_nxt);
        ti.tcpi_snd_mss = mss;
        ti.tcpi_rcv_mss = mss;
        ti.tcpi_unacked = mss ? (nxt - una + mss - 1) / mss : 0;
        ti.tcpi_rcv_space = LOAD(&sl->rcv_wnd);
        ti.tcpi_snd_cwnd = mss ? LOAD(&sl->snd_cwnd) / mss : 0; /* segments, as Linux counts */
        ti.tcpi_rtt = LOAD(&sl->srtt_us);
        /* The data path's own counts (Linux: icsk_retransmits, icsk_backoff,
         * total_retrans; retrans_out, lost_out, sacked_out, reordering, in
         * segments: tcpi_unacked - tcpi_sacked - tcpi_lost + tcpi_retrans is
         * what the data path holds in flight, as with Linux). Fields it does
         * not keep (the timestamps, byte counters, ...) stay 0: see
         * docs/toe.md. */
        uint32_t backoffs = LOAD(&sl->backoffs);
        ti.tcpi_retransmits = backoffs > 255 ? 255 : (uint8_t)backoffs;
        ti.tcpi_backoff = ti.tcpi_retransmits;
        ti.tcpi_total_retrans = LOAD(&sl->total_retrans);
        ti.tcpi_retrans = LOAD(&sl->retrans);
        ti.tcpi_lost = LOAD(&sl->lost);
        ti.tcpi_sacked = LOAD(&sl->sacked);
        ti.tcpi_reordering = LOAD(&sl->reordering);
    }
    socklen_t n = *len < sizeof(ti) ? *len : (socklen_t)sizeof(ti);
    memcpy(val, &ti, n);
    *len = n;
    return 0;
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len) {
    OURS_OR_REAL(fd, real_getsockopt(fd, level, name, val, len));
    if (level == SOL_SOCKET) {
        switch (name) {
        case SO_TYPE:
            return put_int(val, len, SOCK_STREAM);
        case SO_DOMAIN:
            return put_int(val, len, s->family);
        case SO_PROTOCOL:
            return put_int(val, len, IPPROTO_TCP);
        case SO_ACCEPTCONN:
            return put_int(val, len, s->kind == K_LISTENER);
        case SO_ERROR: {
            int e = s->so_error;
            s->so_error = 0;
            return put_int(val, len, e);
        }
        case SO_REUSEADDR:
            return put_int(val, len, s->reuseaddr);
        case SO_REUSEPORT:
            return put_int(val, len, s->reuseport);
        case SO_KEEPALIVE:
            return put_int(val, len, 0);
        case SO_RCVBUF:
        case SO_SNDBUF:
            return put_int(val, len, TOE_RING_SIZE);
        case SO_RCVTIMEO:
            return put_timeout(val, len, s->rcvtimeo_ms);
        case SO_SNDTIMEO:
            return put_timeout(val, len, s->sndtimeo_ms);
        }
    } else if (level == IPPROTO_TCP) {
        switch (name) {
        case TCP_NODELAY:
            return put_int(val, len, 1);
        case TCP_MAXSEG:
            return put_int(val, len, s->kind == K_CONN ? (int)LOAD(&slots[s->id].snd_mss) : 536);
        case TCP_INFO:
            if (!val || !len) {
                errno = EFAULT;
                return -1;
            }
            return tcp_info(s, val, len);
        case TCP_CONGESTION:
            return put_congestion(s, val, len);
        }
    } else if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY && s->family == AF_INET6) {
        return put_int(val, len, s->v6only);
    }
    LOG("fd %d: getsockopt(%d, %d) not on the data path", fd, level, name);
    errno = ENOPROTOOPT;
    return -1;
}

static int timeout_ms(const void *val, socklen_t len, int *ms) {
    struct timeval tv;
    if (!val || len < sizeof(tv)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(&tv, val, sizeof(tv));
    if (tv.tv_usec < 0 || tv.tv_usec >= 1000000) {
        errno = EDOM;
        return -1;
    }
    *ms = (tv.tv_sec == 0 && tv.tv_usec == 0) ? -1 : (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
    return 0;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
    OURS_OR_REAL(fd, real_setsockopt(fd, level, name, val, len));
    int v = 0;
    if (level == SOL_SOCKET) {
        switch (name) {
        case SO_REUSEADDR:
            return get_int(val, len, &v) < 0 ? -1 : (s->reuseaddr = v != 0, 0);
        case SO_REUSEPORT:
            return get_int(val, len, &v) < 0 ? -1 : (s->reuseport = v != 0, 0);
        /* The kernel clamps these silently too; getsockopt reports the rings' size. */
        case SO_RCVBUF:
        case SO_SNDBUF:
            return get_int(val, len, &v);
        case SO_KEEPALIVE:
            if (get_int(val, len, &v) < 0) {
                return -1;
            }
            if (v == 0) {
                return 0;
            }
            break; /* no keepalive probes on the data path */
        case SO_LINGER: {
            struct linger l;
            if (!val || len < sizeof(l)) {
                errno = EINVAL;
                return -1;
            }
            memcpy(&l, val, sizeof(l));
            if (!l.l_onoff) {
                return 0;
            }
            break;
        }
        case SO_RCVTIMEO:
            return timeout_ms(val, len, &s->rcvtimeo_ms);
        case SO_SNDTIMEO:
            return timeout_ms(val, len, &s->sndtimeo_ms);
        }
    } else if (level == IPPROTO_TCP && name == TCP_CONGESTION) {
        /* The policy is the data path's, per endpoint: asking for the one
         * in force succeeds; any other is one this host does not offer
         * (the kernel's ENOENT for an unknown algorithm). */
        const char *cc = congestion_name(s);
        char want[16] = {0};
        if (!val) {
            errno = EFAULT;
            return -1;
        }
        memcpy(want, val, len < sizeof(want) - 1 ? len : sizeof(want) - 1);
        if (cc && strcmp(want, cc) == 0) {
            return 0;
        }
        LOG("fd %d: TCP_CONGESTION %s: the data path runs %s", fd, want, cc ? cc : "none yet");
        errno = ENOENT;
        return -1;
    } else if (level == IPPROTO_TCP && name == TCP_NODELAY) {
        if (get_int(val, len, &v) < 0) {
            return -1;
        }
        if (v != 0) {
            return 0; /* the data path never delays a segment */
        }
    }
    LOG("fd %d: setsockopt(%d, %d) cannot be honoured on the data path", fd, level, name);
    errno = ENOPROTOOPT;
    return -1;
}

EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len) {
    OURS_OR_REAL(fd, real_getsockname(fd, addr, len));
    if (s->kind == K_LISTENER) {
        socklen_t n = *len < s->bound_len ? *len : s->bound_len;
        memcpy(addr, &s->bound, n);
        *len = s->bound_len;
        return 0;
    }
    const struct toe_slot *sl = &slots[s->id];
    to_sockaddr(s->family, sl->addrs.family, sl->addrs.local_addr, sl->addrs.local_port, addr, len);
    return 0;
}

EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len) {
    CONN_OR_REAL(fd, real_getpeername(fd, addr, len));
    const struct toe_slot *sl = &slots[s->id];
    to_sockaddr(s->family, sl->addrs.family, sl->addrs.remote_addr, sl->addrs.remote_port, addr, len);
    return 0;
}

/* The status flags are the socket's (kept here): the descriptor under it
 * stays non-blocking, as the shim's own reads of it need. */
static int dp_fcntl(int fd, struct tsock *s, int cmd, long arg) {
    switch (cmd) {
    case F_GETFL:
        return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
    case F_SETFL:
        s->nonblock = (arg & O_NONBLOCK) != 0;
        return 0;
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
        pthread_mutex_lock(&lock);
        int r = duplicated(fd, real_fcntl(fd, cmd, arg));
        pthread_mutex_unlock(&lock);
        return r;
    }
    default:
        return real_fcntl(fd, cmd, arg);
    }
}

EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    OURS_OR_REAL(fd, real_fcntl(fd, cmd, arg));
    return dp_fcntl(fd, s, cmd, arg);
}

/* With 64-bit file offsets fcntl64 is fcntl (as in glibc on LP64). */
EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

EXPORT int ioctl(int fd, unsigned long req, ...) {
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    OURS_OR_REAL(fd, real_ioctl(fd, req, arg));
    if (req == FIONBIO) {
        int v;
        memcpy(&v, arg, sizeof(v));
        s->nonblock = v != 0;
        return 0;
    }
    if (req == FIONREAD && s->kind == K_CONN) {
        const struct toe_slot *sl = &slots[s->id];
        int v = (int)(LOAD(&sl->rx_head) - sl->rx_tail);
        memcpy(arg, &v, sizeof(v));
        return 0;
    }
    errno = ENOTTY;
    return -1;
}

/* ---- fork ---- */

/* Before fork: the table stays still, and every connection this process
 * holds gets the child's reference now (in the child, after fork, the
 * parent could close its copy first and close the connection under it). */
static void before_fork(void) {
    pthread_mutex_lock(&lock);
    if (ctx_state <= 0) {
        return;
    }
    for (int fd = 0; fd < MAX_FD; fd++) {
        if (socks[fd].kind == K_CONN) {
            __atomic_add_fetch(&slots[socks[fd].id].refs, 1, __ATOMIC_ACQ_REL);
        }
    }
}

static void after_fork_parent(void) {
    pthread_mutex_unlock(&lock);
}

/* The child joins its parent's context on a control connection of its own,
 * and counts the descriptors it inherited as its own share (holds). */
static void after_fork_child(void) {
    pthread_mutex_init(&lock, NULL);
    proc_no = -1;
    if (ctx_state <= 0) {
        return;
    }
    real_close(ctl);
    ctl = ctl_connect();
    if (ctl < 0) {
        ctx_state = -1;
        return;
    }
    struct toe_req req = {.op = TOE_OP_JOIN, .id = ctx_id};
    struct toe_resp resp;
    if (call(&req, &resp, NULL, 0) < 0) {
        real_close(ctl);
        ctl = -1;
        ctx_state = -1;
        return;
    }
    proc_no = resp.id < TOE_PROCS ? (int)resp.id : -1;
    for (int fd = 0; fd < MAX_FD; fd++) {
        if (socks[fd].kind == K_CONN) {
            hold(socks[fd].id, 1);
        }
    }
}

__attribute__((constructor)) static void fork_hooks(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
