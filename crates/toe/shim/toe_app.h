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
 * Every connection and every listener has an eventfd the service writes to
 * when something the application waits for happened (bytes or EOF to read,
 * a connection to accept, the open completed or failed, and, when the
 * application set TOE_APP_WANT_TX, room to write). The shim hands that
 * eventfd to the program as the socket's descriptor, so poll, select and
 * epoll see a real kernel descriptor: it is readable exactly when the socket
 * is (the shim re-arms it after every read that leaves bytes or EOF behind).
 */
#ifndef TOE_APP_H
#define TOE_APP_H

#include <stdint.h>

#define TOE_SOCKET_ENV "STEER_TOE_SOCKET"
/* STEER_TOE_DEBUG=1: the shim logs each decision to stderr. */
#define TOE_DEBUG_ENV "STEER_TOE_DEBUG"

#define TOE_MAGIC 0x31656f74u /* "toe1" */
#define TOE_VERSION 1
#define TOE_SLOTS 64
#define TOE_RING_SIZE 262144 /* bytes per ring and direction: a power of two, whole pages */
#define TOE_HEADER_SIZE 64
#define TOE_SLOT_SIZE 128
#define TOE_SLOTS_OFF 64
#define TOE_RINGS_OFF 12288 /* TOE_SLOTS_OFF + TOE_SLOTS * TOE_SLOT_SIZE, page aligned */
#define TOE_SHM_SIZE 33566720 /* TOE_RINGS_OFF + 2 * TOE_SLOTS * TOE_RING_SIZE */

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
#define TOE_APP_WANT_TX 2 /* signal the eventfd when TX room frees up */

struct toe_header {
    uint32_t magic;
    uint32_t version;
    uint32_t slots;
    uint32_t ring_size;
    uint8_t reserved[48];
};

/* One connection. Addresses in network order, ports in host order; a
 * family of 4 or 6. The TCP_INFO fields are the protocol stage's state,
 * copied by the service each time it serves the connection. */
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
    uint16_t family;
    uint16_t local_port;
    uint16_t remote_port;
    uint16_t pad;
    uint8_t local_addr[16];
    uint8_t remote_addr[16];
    uint32_t refs; /* application: descriptors open on it, across forks */
    uint32_t snd_cwnd;   /* service: congestion window (bytes) */
    uint32_t srtt_us;    /* service: smoothed RTT (microseconds), 0 before a sample */
    uint32_t congestion; /* service: TOE_CC_* */
    uint8_t reserved[24];
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

/* struct toe_slot.congestion: the policy behind the window (toe::cc),
 * named as TCP_CONGESTION names it. */
#define TOE_CC_NONE 0
#define TOE_CC_RENO 1
#define TOE_CC_DCTCP 2

/* Control requests (struct toe_req.op) and their replies. */
#define TOE_OP_HELLO 1   /* -> memfd + doorbell eventfd; reply's local_addr is the data path's address */
#define TOE_OP_LISTEN 2  /* port -> id (listener) + eventfd */
#define TOE_OP_ACCEPT 3  /* id (listener) -> id (slot) + eventfd, or err EAGAIN */
#define TOE_OP_CONNECT 4 /* addr, port -> id (slot, TOE_ST_CONNECTING) + eventfd */
#define TOE_OP_CLOSE 5   /* id (slot): the application is done with it */
#define TOE_OP_UNLISTEN 6 /* id (listener) */
#define TOE_OP_JOIN 7    /* id (context): a forked child's control connection joins its parent's context */

#define TOE_REQ_SIZE 28
#define TOE_RESP_SIZE 48

struct toe_req {
    uint32_t op;
    uint32_t id;
    uint16_t port;
    uint16_t family;
    uint8_t addr[16];
};

/* err: 0 or a positive errno value. */
struct toe_resp {
    int32_t err;
    uint32_t id;
    uint16_t family;
    uint16_t local_port;
    uint16_t remote_port;
    uint16_t pad;
    uint8_t local_addr[16];
    uint8_t remote_addr[16];
};

#endif
