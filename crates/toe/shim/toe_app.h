/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * toe_app.h: the application interface of Steer's userspace TCP data path
 * (crate `toe`, docs/toe.md "Application interface"), shared by the data
 * path's service (Rust, `toe::app`), the Rust client API and the LD_PRELOAD
 * shim (toe_preload.c). Defined once here; the Rust side pins every size and
 * offset against these numbers at compile time (src/app/layout.rs).
 *
 * An application context connects to the service's UNIX socket
 * (SOCK_SEQPACKET, path in $STEER_TOE_SOCKET) and says TOE_OP_HELLO; the
 * reply carries, over SCM_RIGHTS, a memfd holding the context's shared
 * memory and an eventfd the application writes to wake the service (its
 * doorbell). The memfd holds:
 *
 *   [0, TOE_SLOTS_OFF)       struct toe_header
 *   [TOE_SLOTS_OFF, ...)     TOE_SLOTS x struct toe_slot (one per connection)
 *   [TOE_RINGS_OFF, ...)     per slot i: RX ring at TOE_RINGS_OFF + 2*i*RING,
 *                            TX ring right after it (TOE_RING_SIZE each)
 *
 * Each ring is mapped twice, back to back (thesis Fig. 5.7), so bytes that
 * wrap around the end are one contiguous run and every copy is one memcpy.
 * Positions are free-running 32-bit byte counters; the index is pos modulo
 * TOE_RING_SIZE. Single producer, single consumer per ring:
 *   RX: the service writes bytes, then rx_head (release); the application
 *       reads them, then rx_tail (release).
 *   TX: the application writes bytes, then tx_head; the service sends them
 *       and advances tx_tail.
 *
 * Every listener has a pipe whose read end the application gets and the
 * service makes readable while a connection waits to be accepted (a pipe's
 * read end, as the kernel's listening socket, never polls writable). Every connection has a UNIX stream socket pair
 * whose one end the application gets (the shim hands it to the program as
 * the socket's descriptor) and whose other end the service keeps, so the
 * kernel's poll, select and epoll report a connection's readiness as they
 * report a TCP socket's (tcp_poll):
 *   POLLIN   the service wrote a byte to its end (bytes or EOF to read, or
 *            the open completed), setting rx_armed; the application clears
 *            rx_armed before it reads those bytes away once the RX ring is
 *            empty, and rings the doorbell: the service writes again while
 *            the ring holds bytes and rx_armed is 0, so no wake-up is lost.
 *   POLLOUT  the application's end has send-buffer room. When the TX ring is
 *            full the application fills that buffer ("plugs" its end), then
 *            sets TOE_APP_WANT_TX; once the ring has room again (the data
 *            path took bytes the peer acknowledged) the service clears the
 *            flag and reads the plug away, which wakes the writer.
 *   POLLIN|POLLRDHUP  the peer's FIN: the service shuts its end for writing.
 *   POLLHUP  both directions shut (the peer's FIN and the application's
 *            shutdown(SHUT_WR), which the shim also applies to its end).
 *   POLLERR|POLLHUP  a reset: the service queues a byte on its own end and
 *            closes it, and the kernel gives the application's end
 *            ECONNRESET as an unread-data close does.
 */
#ifndef TOE_APP_H
#define TOE_APP_H

#include <stdint.h>

#define TOE_SOCKET_ENV "STEER_TOE_SOCKET"
/* STEER_TOE_DEBUG=1: the shim logs each decision to stderr. */
#define TOE_DEBUG_ENV "STEER_TOE_DEBUG"

#define TOE_MAGIC 0x31656f74u /* "toe1" */
#define TOE_VERSION 4
#define TOE_SLOTS 64
#define TOE_PROCS 48 /* processes of one context whose descriptors a slot counts (toe_slot.holds) */
#define TOE_RING_SIZE 262144 /* bytes per ring and direction: a power of two, whole pages */
#define TOE_HEADER_SIZE 64
#define TOE_SLOT_SIZE 192
#define TOE_SLOTS_OFF 64
#define TOE_RINGS_OFF 16384 /* TOE_SLOTS_OFF + TOE_SLOTS * TOE_SLOT_SIZE, page aligned */
#define TOE_SHM_SIZE 33570816 /* TOE_RINGS_OFF + 2 * TOE_SLOTS * TOE_RING_SIZE */

/* struct toe_slot.state (written by the service) */
#define TOE_ST_FREE 0
#define TOE_ST_CONNECTING 1
#define TOE_ST_ESTABLISHED 2
#define TOE_ST_FAILED 3

/* struct toe_slot.events (written by the service, bits only ever set) */
#define TOE_EV_EOF 1      /* the peer's FIN: every byte before it is in the RX ring */
#define TOE_EV_RESET 2    /* the peer reset the connection */
#define TOE_EV_REFUSED 4  /* the active open was refused (RST) */
#define TOE_EV_TIMEDOUT 8 /* the active open timed out */

/* struct toe_slot.app_flags (written by the application) */
#define TOE_APP_SHUT_WR 1 /* FIN after the bytes in the TX ring */
#define TOE_APP_WANT_TX 2 /* the descriptor is plugged: read the plug away when TX room frees up */

struct toe_header {
    uint32_t magic;
    uint32_t version;
    uint32_t slots;
    uint32_t ring_size;
    uint8_t reserved[48];
};

/* A connection's two ends: addresses in network order, ports in host
 * order, a family of 4 or 6 (the slot's and the reply's). */
struct toe_addrs {
    uint16_t family;
    uint16_t local_port;
    uint16_t remote_port;
    uint16_t pad;
    uint8_t local_addr[16];
    uint8_t remote_addr[16];
};

/* One connection. The TCP_INFO fields are the data path's state (the
 * protocol stage's, or Laminar's transmit side's) and the control plane's
 * counts, copied by the service each time it serves the connection. The
 * loss counts are segments, as Linux's struct tcp_info has them. */
struct toe_slot {
    uint32_t rx_head;   /* service */
    uint32_t rx_tail;   /* application */
    uint32_t tx_head;   /* application */
    uint32_t tx_tail;   /* service */
    uint32_t state;     /* service: TOE_ST_* */
    uint32_t events;    /* service: TOE_EV_* */
    uint32_t app_flags; /* application: TOE_APP_* */
    uint32_t snd_una;   /* service: oldest unacknowledged sequence number */
    uint32_t snd_nxt;   /* service: next sequence number to send */
    uint32_t rcv_nxt;   /* service: next sequence number expected */
    uint32_t rcv_wnd;   /* service: receive window offered (bytes) */
    uint32_t snd_mss;   /* service: payload bytes per segment */
    struct toe_addrs addrs; /* service */
    uint32_t refs; /* application: descriptors open on it, across forks */
    uint32_t snd_cwnd;   /* service: congestion window (bytes) */
    uint32_t srtt_us;    /* service: smoothed RTT (microseconds), 0 before a sample */
    uint32_t congestion; /* service: TOE_CC_* */
    uint32_t rx_armed;   /* both: 1 while the service's readable byte is unread */
    uint32_t total_retrans; /* service: data segments sent again, over the connection's life */
    uint32_t backoffs;      /* service: retransmission timeouts since new data was last acked */
    uint32_t retrans;    /* service: segments sent again and still in flight (Linux's retrans_out) */
    uint32_t lost;       /* service: segments marked lost, those sent again included (lost_out) */
    uint32_t sacked;     /* service: segments SACKed above snd_una (sacked_out) */
    uint32_t reordering; /* service: the duplicate-ACK threshold, segments (tp->reordering) */
    /* application: descriptors each process of the context has open on it
     * (index: the process's number, from HELLO or JOIN), so that the
     * service can drop a process's share of `refs` when it ends without
     * closing them (killed, or exited): TOE_HOLDS_UNCOUNTED once a process
     * has more than that many (its share is then never dropped). */
    uint8_t holds[TOE_PROCS];
    uint8_t reserved[12];
};

#define TOE_OFF_RX_HEAD 0
#define TOE_OFF_RX_TAIL 4
#define TOE_OFF_TX_HEAD 8
#define TOE_OFF_TX_TAIL 12
#define TOE_OFF_STATE 16
#define TOE_OFF_EVENTS 20
#define TOE_OFF_APP_FLAGS 24
#define TOE_OFF_SND_UNA 28
#define TOE_OFF_SND_NXT 32
#define TOE_OFF_RCV_NXT 36
#define TOE_OFF_RCV_WND 40
#define TOE_OFF_SND_MSS 44
#define TOE_OFF_FAMILY 48
#define TOE_OFF_LOCAL_PORT 50
#define TOE_OFF_REMOTE_PORT 52
#define TOE_OFF_LOCAL_ADDR 56
#define TOE_OFF_REMOTE_ADDR 72
#define TOE_OFF_REFS 88
#define TOE_OFF_SND_CWND 92
#define TOE_OFF_SRTT_US 96
#define TOE_OFF_CONGESTION 100
#define TOE_OFF_RX_ARMED 104
#define TOE_OFF_TOTAL_RETRANS 108
#define TOE_OFF_BACKOFFS 112
#define TOE_OFF_RETRANS 116
#define TOE_OFF_LOST 120
#define TOE_OFF_SACKED 124
#define TOE_OFF_REORDERING 128
#define TOE_OFF_HOLDS 132
#define TOE_HOLDS_UNCOUNTED 255

/* struct toe_slot.congestion: the policy behind the window (toe::cc),
 * named as TCP_CONGESTION names it. */
#define TOE_CC_NONE 0
#define TOE_CC_RENO 1
#define TOE_CC_DCTCP 2

/* Control requests (struct toe_req.op) and their replies. */
#define TOE_OP_HELLO 1   /* -> memfd + doorbell eventfd; reply's local_addr is the data path's address */
#define TOE_OP_LISTEN 2  /* port -> id (listener) + its pipe's read end */
#define TOE_OP_ACCEPT 3  /* id (listener) -> id (slot) + socket, or err EAGAIN */
#define TOE_OP_CONNECT 4 /* addr, port[, local_port] -> id (slot, TOE_ST_CONNECTING) + socket,
                           or err EADDRINUSE (local_port held) */
#define TOE_OP_CLOSE 5   /* id (slot): the application is done with it */
#define TOE_OP_UNLISTEN 6 /* id (listener) */
#define TOE_OP_JOIN 7    /* id (context): a forked child's control connection joins its parent's
                           context -> id (the child's process number, TOE_PROCS: none free, its
                           descriptors are not counted in holds). HELLO's caller is process 0. */

#define TOE_REQ_SIZE 32
#define TOE_RESP_SIZE 48

struct toe_req {
    uint32_t op;
    uint32_t id;
    uint16_t port;
    uint16_t family;
    uint8_t addr[16];
    uint16_t local_port; /* CONNECT: the port the socket was bound to, or 0 (any) */
    uint16_t pad;
};

/* err: 0 or a positive errno value. */
struct toe_resp {
    int32_t err;
    uint32_t id;
    struct toe_addrs addrs;
};

#endif
