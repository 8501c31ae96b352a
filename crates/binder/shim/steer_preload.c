// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * steer_preload.c: the LD_PRELOAD binder of Steer (SRAP's "transparent port
 * binder", papers/srap-source-port-selection.txt section 3 (3)).
 *
 * It wraps connect(). For an unbound TCP socket connecting to an IPv4 or a
 * (non-mapped) IPv6 address it asks Steer's allocator (a Unix stream socket,
 * STEER_ALLOC_SOCK or /run/steer/alloc.sock, one JSON object per line) for a
 * source port, pins it, and connects:
 *
 *   {"v":1,"op":"lease","proto":"tcp","local":L,"remote":R,"remote_port":P}
 *   -> {"v":1,"port":40123,"queue":3,"cpu":3,"lease":17} | {"v":1,"error":"..."}
 *
 * Pinning: setsockopt(IP_LOCAL_PORT_RANGE, (port << 16) | port) plus
 * IP_BIND_ADDRESS_NO_PORT (Linux 6.3+): the kernel still chooses the port at
 * connect time, from a range of one, and only the 4-tuple must be unique. On
 * older kernels (ENOPROTOOPT) it bind()s the address and port instead.
 *
 * Every failure falls back to the plain connect(): the program never sees an
 * error caused by the binder, and errno is what the plain connect() leaves.
 * See docs/binders.md for the full list of cases.
 *
 * Spares: a program that connects to the same destination again and again
 * (iperf3 -P 16, a connection pool) would pay one allocator round trip per
 * connect(). So the requests for one (local, remote, remote port) grow:
 * 1, 1, 2, 4, 8, 16 ports ("count" in the lease request, planned together by
 * the allocator: distinct CPUs, then distinct queues), and the ports not
 * used at once are kept as spares for the next connects to that
 * destination. A spare is used only within SPARE_MS of its lease (the
 * allocator's grace period is longer, so it is still leased); older ones are
 * dropped. Spares left at exit are released (a destructor); otherwise the
 * allocator's sweep reclaims them once the grace period passes without a
 * socket. A program connecting once or twice never gets a spare, so
 * separate single-flow processes leave no spares to skew the plan.
 *
 * Lease table: before asking on the socket (when no fresh spare is there),
 * the shim claims a port the allocator planned ahead for this destination
 * from its shared-memory table (<socket>.leases, layout in lease_table.h),
 * with one compare-and-swap and no round trip. No table, a stale one, or
 * nothing free for the destination: the round trip as above.
 *
 * A lease in use is not released explicitly: the allocator releases it when
 * the 4-tuple's socket disappears.
 *
 * Thread-safe: the spare cache and the table mapping are behind mutexes;
 * the spare cache is keyed by pid (a forked child does not reuse its
 * parent's spares); no heap allocation; nothing is written to stdout
 * (STEER_PRELOAD_DEBUG=1 logs one line per decision to stderr).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The allocator's shared-memory lease table (crates/srap/src/alloc/). */
#include "lease_table.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif
#ifndef IP_LOCAL_PORT_RANGE
#define IP_LOCAL_PORT_RANGE 51
#endif

/* Constants the Rust side shares (crates/binder/src/preload.rs reads them
 * from this file at build time and pins them against the allocator's). */
#define DEFAULT_SOCK "/run/steer/alloc.sock"
#define SOCKET_ENV "STEER_ALLOC_SOCK"
#define DEBUG_ENV "STEER_PRELOAD_DEBUG"
#define BATCH_ENV "STEER_PRELOAD_BATCH"
/* STEER_PRELOAD_TABLE=0: never claim from the lease table (benchmarks). */
#define TABLE_ENV "STEER_PRELOAD_TABLE"
/* A missing or stale table is looked for again at most this often. */
#define TABLE_RETRY_MS 1000
/* The whole allocator exchange (connect, write, read) must finish in this. */
#define ALLOC_TIMEOUT_MS 200
#define LINE_MAX_BYTES 2048
/* Largest batch asked for (the allocator's MAX_BATCH). */
#define MAX_BATCH 16
/* Spares older than this are not used (the allocator's grace is 2 s). */
#define SPARE_MS 1000
/* Destinations with spares kept at once. */
#define SPARE_DESTS 8

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static connect_fn real_connect;
static int debug;
/* STEER_PRELOAD_BATCH: largest batch (1: no spares; default MAX_BATCH). */
static int max_batch = 16;
/* STEER_PRELOAD_TABLE: 0 turns the lease table off. */
static int use_table = 1;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void)
{
	real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
	const char *d = getenv(DEBUG_ENV);
	debug = d && d[0] == '1';
	const char *b = getenv(BATCH_ENV);
	if (b && b[0]) {
		int v = atoi(b);
		max_batch = v < 1 ? 1 : v > 16 ? 16 : v;
	}
	const char *t = getenv(TABLE_ENV);
	use_table = !(t && t[0] == '0');
}

/* One line on stderr, with write(2): no stdio buffers, no allocation. */
__attribute__((format(printf, 1, 2))) static void logf_(const char *fmt, ...)
{
	if (!debug)
		return;
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "steer-preload[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + ((size_t)m < sizeof(buf) - (size_t)n - 1 ? (size_t)m : sizeof(buf) - (size_t)n - 2);
	buf[len++] = '\n';
	ssize_t w = write(2, buf, len);
	(void)w;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `events` on fd until `deadline` (monotonic ms). */
static int wait_fd(int fd, short events, long deadline)
{
	for (;;) {
		long left = deadline - now_ms();
		if (left <= 0)
			return -1;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r == 0 || errno != EINTR)
			return -1;
	}
}

/* Finds "key": in a flat JSON object and parses the unsigned integer after
 * it. Returns -1 if absent or not a number in 0..=max. */
static long json_uint(const char *line, const char *key, long max)
{
	char pat[32];
	snprintf(pat, sizeof(pat), "\"%s\"", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p++ != ':')
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	long v = 0;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p++ - '0');
		if (v > max)
			return -1;
	}
	return v;
}

/* One allocator connection per thread, reused while it behaves: it saves a
 * Unix connect (and the allocator an accept) per connect(). Recognised by
 * pid (a forked child opens its own) and by inode (the program may have
 * closed the fd number and reused it for something else). Closed by a
 * thread-exit destructor. */
static __thread int conn_fd = -1;
static __thread pid_t conn_pid;
static __thread ino_t conn_ino;
static pthread_key_t conn_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void conn_close(void)
{
	if (conn_fd >= 0 && conn_pid == getpid())
		close(conn_fd);
	conn_fd = -1;
}

static void conn_destructor(void *unused)
{
	(void)unused;
	conn_close();
}

static void make_key(void)
{
	(void)pthread_key_create(&conn_key, conn_destructor);
}

static int conn_is_ours(void)
{
	struct stat st;
	return conn_fd >= 0 && conn_pid == getpid() && fstat(conn_fd, &st) == 0 &&
	       S_ISSOCK(st.st_mode) && st.st_ino == conn_ino;
}

static const char *alloc_path(void)
{
	const char *path = getenv(SOCKET_ENV);
	return path && path[0] ? path : DEFAULT_SOCK;
}

static int conn_open(long deadline)
{
	const char *path = alloc_path();
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path))
		return -1;
	strcpy(sun.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	if (real_connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int err = 0;
		socklen_t el = sizeof(err);
		if ((errno != EINPROGRESS && errno != EAGAIN) || wait_fd(s, POLLOUT, deadline) < 0 ||
		    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			close(s);
			return -1;
		}
	}
	struct stat st;
	if (fstat(s, &st) < 0) {
		close(s);
		return -1;
	}
	pthread_once(&key_once, make_key);
	(void)pthread_setspecific(conn_key, (void *)1);
	conn_fd = s;
	conn_pid = getpid();
	conn_ino = st.st_ino;
	return 0;
}

/* One request/response on the thread's connection. Returns the answer's
 * length, or -1 (the connection is then closed: after a timeout a late
 * answer must not be read as the next one's). */
static int exchange(const char *req, int n, char *line, size_t cap, long deadline)
{
	for (int off = 0; off < n;) {
		ssize_t w = send(conn_fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w > 0) {
			off += (int)w;
			continue;
		}
		if ((w < 0 && errno != EAGAIN && errno != EINTR) || wait_fd(conn_fd, POLLOUT, deadline) < 0)
			goto fail;
	}
	size_t got = 0;
	for (;;) {
		ssize_t r = recv(conn_fd, line + got, cap - 1 - got, 0);
		if (r > 0) {
			got += (size_t)r;
			line[got] = '\0';
			char *nl = memchr(line, '\n', got);
			if (nl) {
				if ((size_t)(nl - line) + 1 != got)
					conn_close(); /* more than one line: out of step */
				return (int)got;
			}
			if (got == cap - 1)
				goto fail; /* too long: garbage */
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			goto fail;
		if (wait_fd(conn_fd, POLLIN, deadline) < 0) {
			logf_("allocator did not answer within %d ms", ALLOC_TIMEOUT_MS);
			goto fail;
		}
	}
fail:
	conn_close();
	return -1;
}

/* Parses the leases of a batch answer ({"v":1,"leases":[{"port":P,...,
 * "lease":L},...]}) into ports/ids; returns how many (0 on garbage). */
static int parse_batch(const char *line, unsigned short *ports, unsigned long *ids, int max)
{
	const char *p = strstr(line, "\"leases\"");
	int n = 0;
	while (p && n < max && (p = strchr(p, '{')) != NULL) {
		const char *end = strchr(p, '}');
		if (!end)
			return 0;
		char obj[128];
		size_t len = (size_t)(end - p) + 1;
		if (len >= sizeof(obj))
			return 0;
		memcpy(obj, p, len);
		obj[len] = '\0';
		long port = json_uint(obj, "port", 65535);
		long id = json_uint(obj, "lease", 0x7fffffffffffffffL / 10);
		if (port <= 0 || id < 0)
			return 0;
		ports[n] = (unsigned short)port;
		ids[n] = (unsigned long)id;
		n++;
		p = end + 1;
	}
	return n;
}

/* One request line, one answer, on the thread's connection (reopened once
 * if the allocator closed an idle one). -1 on any failure. */
static int ask(const char *req, int n, char *line, size_t cap, long deadline)
{
	int got = -1;
	if (conn_is_ours()) {
		got = exchange(req, n, line, cap, deadline);
	} else {
		conn_fd = -1;
	}
	if (got < 0) {
		if (conn_open(deadline) < 0)
			return -1;
		got = exchange(req, n, line, cap, deadline);
	}
	if (got < 0)
		return -1;
	if (line[0] != '{' || json_uint(line, "v", 1000) != 1 || strstr(line, "\"error\"")) {
		logf_("allocator refused or answered garbage: %.*s", (int)strcspn(line, "\n"), line);
		conn_close();
		return -1;
	}
	return got;
}

/* The lease table (lease_table.h): the allocator plans ports ahead per
 * destination; a connect claims one with a compare-and-swap, no round trip.
 *
 * The table is mapped once per process (a fork inherits the mapping) and
 * used only while its heartbeat is fresh. When it goes stale (allocator
 * stopped or restarted) the file is mapped again, at most every
 * TABLE_RETRY_MS; a restarted allocator makes a new file, so the new
 * mapping is a new address. The old one is never unmapped: another thread
 * may be reading it, and it is one table per allocator restart. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *table;
static ino_t table_ino;
static long table_tried_ms = -2 * TABLE_RETRY_MS;

static int table_fresh(const unsigned char *t, long now)
{
	const struct lt_header *h = (const struct lt_header *)t;
	long beat = (long)__atomic_load_n(&h->heartbeat_ms, __ATOMIC_ACQUIRE);
	return beat != 0 && now - beat < LT_STALE_MS;
}

/* Maps the allocator's table if it is a new file. Under table_lock. */
static void table_map(void)
{
	char path[512];
	int n = snprintf(path, sizeof(path), "%s%s", alloc_path(), LT_SUFFIX);
	if (n <= 0 || n >= (int)sizeof(path))
		return;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size != LT_FILE_SIZE || (table && st.st_ino == table_ino)) {
		close(fd);
		return;
	}
	void *p = mmap(NULL, LT_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	const struct lt_header *h = p;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != LT_MAGIC || h->version != LT_VERSION ||
	    h->regions != LT_REGIONS || h->slots != LT_SLOTS) {
		munmap(p, LT_FILE_SIZE);
		logf_("lease table %s: not a version %d table", path, LT_VERSION);
		return;
	}
	table_ino = st.st_ino;
	__atomic_store_n(&table, (unsigned char *)p, __ATOMIC_RELEASE);
	logf_("lease table %s mapped", path);
}

/* The table if fresh, else NULL. */
static unsigned char *table_get(long now)
{
	unsigned char *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	if (t && table_fresh(t, now))
		return t;
	pthread_mutex_lock(&table_lock);
	if (now - table_tried_ms >= TABLE_RETRY_MS) {
		table_tried_ms = now;
		table_map();
	}
	t = table;
	pthread_mutex_unlock(&table_lock);
	return t && table_fresh(t, now) ? t : NULL;
}

static int key_matches(const struct lt_region_key *k, uint8_t fam, unsigned rport, const uint64_t *local,
		       const uint64_t *remote)
{
	/* Word 1 of the key: family, proto, remote port (little-endian). */
	uint64_t head = __atomic_load_n((const uint64_t *)k + 1, __ATOMIC_RELAXED);
	uint64_t want = (uint64_t)fam | (uint64_t)LT_PROTO_TCP << 8 | (uint64_t)rport << 16;
	if ((head & 0xffffffffu) != want)
		return 0;
	const uint64_t *l = (const uint64_t *)k->local, *r = (const uint64_t *)k->remote;
	for (int i = 0; i < 2; i++)
		if (__atomic_load_n(l + i, __ATOMIC_RELAXED) != local[i] ||
		    __atomic_load_n(r + i, __ATOMIC_RELAXED) != remote[i])
			return 0;
	return 1;
}

/* A port the allocator planned for this destination, claimed from the
 * table; 0 if there is no fresh table, no region for it, or no free slot. */
static unsigned short table_claim(int fam, const void *lbytes, const void *rbytes, unsigned rport)
{
	if (!use_table)
		return 0;
	unsigned char *t = table_get(now_ms());
	if (!t)
		return 0;
	size_t alen = fam == AF_INET ? 4 : 16;
	uint64_t local[2] = { 0, 0 }, remote[2] = { 0, 0 };
	memcpy(local, lbytes, alen);
	memcpy(remote, rbytes, alen);
	uint8_t lfam = fam == AF_INET ? LT_FAMILY_V4 : LT_FAMILY_V6;
	for (int i = 0; i < LT_REGIONS; i++) {
		struct lt_region *r = (struct lt_region *)(t + LT_HEADER_SIZE + (size_t)i * LT_REGION_SIZE);
		uint64_t seq = __atomic_load_n(&r->key.seq, __ATOMIC_ACQUIRE);
		if ((seq & 1) || !key_matches(&r->key, lfam, rport, local, remote))
			continue;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->key.seq, __ATOMIC_RELAXED) != seq)
			continue; /* rewritten while read */
		for (int k = 0; k < LT_SLOTS; k++) {
			uint64_t w = __atomic_load_n(&r->slots[k].word, __ATOMIC_ACQUIRE);
			while ((w & 0xff) == LT_STATE_FREE) {
				uint64_t c = (w & ~(uint64_t)0xff) | LT_STATE_CLAIMED;
				if (!__atomic_compare_exchange_n(&r->slots[k].word, &w, c, 0, __ATOMIC_ACQ_REL,
								 __ATOMIC_ACQUIRE))
					continue; /* w is the new value: look again */
				/* The slot was filled for this key only if the key
				 * did not change since it was read (the allocator
				 * empties all slots before rewriting a key). */
				if (__atomic_load_n(&r->key.seq, __ATOMIC_ACQUIRE) != seq) {
					logf_("lease table region %d rewritten during a claim: not used", i);
					return 0;
				}
				struct lt_header *h = (struct lt_header *)t;
				__atomic_add_fetch(&h->claims, 1, __ATOMIC_RELEASE);
				/* Shared (not PRIVATE): the allocator waits on it. */
				if (k >= LT_WAKE_SLOT)
					(void)syscall(SYS_futex, &h->claims, FUTEX_WAKE, 1, NULL, NULL, 0);
				unsigned short port = (unsigned short)(c >> LT_PORT_SHIFT);
				logf_("lease table: port %u (queue %u, cpu %u), slot %d of region %d", port,
				      r->slots[k].queue, r->slots[k].cpu, k, i);
				return port;
			}
		}
		return 0;
	}
	return 0;
}

/* Spare leases per destination, shared by the process's threads. */
struct spares {
	int used; /* slot in use */
	int family;
	unsigned char local[16], remote[16];
	unsigned remote_port;
	long leased_ms;    /* when the spares were leased */
	long last_ask_ms;  /* the last request to the allocator */
	int next_count;    /* ports the next request asks for */
	int asks;          /* requests so far (within SPARE_MS of each other) */
	int n;             /* spares left: ports[0..n] */
	unsigned short ports[MAX_BATCH];
	unsigned long ids[MAX_BATCH];
};

static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spares spare_tab[SPARE_DESTS];
static pid_t spare_pid;

static struct spares *spare_find(int fam, const void *local, const void *remote, unsigned rport,
				 long now)
{
	size_t alen = fam == AF_INET ? 4 : 16;
	if (spare_pid != getpid()) {
		memset(spare_tab, 0, sizeof(spare_tab));
		spare_pid = getpid();
	}
	struct spares *free_slot = NULL, *oldest = NULL;
	for (int i = 0; i < SPARE_DESTS; i++) {
		struct spares *s = &spare_tab[i];
		if (!s->used) {
			if (!free_slot)
				free_slot = s;
			continue;
		}
		if (s->family == fam && s->remote_port == rport && memcmp(s->local, local, alen) == 0 &&
		    memcmp(s->remote, remote, alen) == 0)
			return s;
		if (!oldest || s->last_ask_ms < oldest->last_ask_ms)
			oldest = s;
	}
	struct spares *s = free_slot ? free_slot : oldest;
	memset(s, 0, sizeof(*s));
	s->used = 1;
	s->family = fam;
	memcpy(s->local, local, alen);
	memcpy(s->remote, remote, alen);
	s->remote_port = rport;
	s->next_count = 1;
	s->last_ask_ms = now;
	return s;
}

/* Releases the spares still held at exit (best effort, one round trip per
 * lease on a fresh connection, within one ALLOC_TIMEOUT_MS). */
__attribute__((destructor)) static void release_spares(void)
{
	if (!real_connect || spare_pid != getpid())
		return;
	long deadline = now_ms() + ALLOC_TIMEOUT_MS;
	pthread_mutex_lock(&spare_lock);
	for (int i = 0; i < SPARE_DESTS; i++) {
		struct spares *s = &spare_tab[i];
		for (int k = 0; s->used && k < s->n && now_ms() < deadline; k++) {
			char req[96], line[256];
			int n = snprintf(req, sizeof(req), "{\"v\":1,\"op\":\"release\",\"lease\":%lu}\n", s->ids[k]);
			if (ask(req, n, line, sizeof(line), deadline) < 0) {
				k = s->n;
				i = SPARE_DESTS;
			}
		}
		s->n = 0;
	}
	pthread_mutex_unlock(&spare_lock);
	conn_close();
}

/* A port for local -> remote:remote_port: a fresh spare, else one from the
 * allocator (asking for a batch when this destination is connected to
 * repeatedly); 0 on any failure (absent, slow, error, garbage, other
 * protocol version). */
static unsigned short lease_port(int fam, const void *lbytes, const void *rbytes, const char *local,
				 const char *remote, unsigned remote_port)
{
	long now = now_ms();
	pthread_mutex_lock(&spare_lock);
	struct spares *s = spare_find(fam, lbytes, rbytes, remote_port, now);
	if (s->n > 0 && now - s->leased_ms < SPARE_MS) {
		unsigned short port = s->ports[0];
		int left = --s->n;
		memmove(s->ports, s->ports + 1, (size_t)left * sizeof(s->ports[0]));
		memmove(s->ids, s->ids + 1, (size_t)left * sizeof(s->ids[0]));
		pthread_mutex_unlock(&spare_lock);
		logf_("spare port %u (%d left)", port, left);
		return port;
	}
	pthread_mutex_unlock(&spare_lock);
	unsigned short claimed = table_claim(fam, lbytes, rbytes, remote_port);
	if (claimed)
		return claimed;
	pthread_mutex_lock(&spare_lock);
	s = spare_find(fam, lbytes, rbytes, remote_port, now);
	s->n = 0; /* stale: the allocator's sweep reclaims them */
	if (now - s->last_ask_ms >= SPARE_MS) {
		s->asks = 0;
		s->next_count = 1;
	}
	int count = s->next_count;
	s->asks++;
	if (s->asks >= 2 && s->next_count < max_batch)
		s->next_count = s->asks == 2 ? 2 : s->next_count * 2;
	if (s->next_count > max_batch)
		s->next_count = max_batch;
	s->last_ask_ms = now;
	pthread_mutex_unlock(&spare_lock);

	long deadline = now + ALLOC_TIMEOUT_MS;
	char req[LINE_MAX_BYTES], line[LINE_MAX_BYTES];
	int n;
	if (count > 1)
		n = snprintf(req, sizeof(req),
			     "{\"v\":1,\"op\":\"lease\",\"proto\":\"tcp\",\"local\":\"%s\","
			     "\"remote\":\"%s\",\"remote_port\":%u,\"count\":%d}\n",
			     local, remote, remote_port, count);
	else
		n = snprintf(req, sizeof(req),
			     "{\"v\":1,\"op\":\"lease\",\"proto\":\"tcp\",\"local\":\"%s\","
			     "\"remote\":\"%s\",\"remote_port\":%u}\n",
			     local, remote, remote_port);
	if (n <= 0 || n >= (int)sizeof(req))
		return 0;
	if (ask(req, n, line, sizeof(line), deadline) < 0)
		return 0;
	if (count == 1) {
		long p = json_uint(line, "port", 65535);
		if (p > 0)
			return (unsigned short)p;
		logf_("allocator answer without a port: %.*s", (int)strcspn(line, "\n"), line);
		return 0;
	}
	unsigned short ports[MAX_BATCH];
	unsigned long ids[MAX_BATCH];
	int got = parse_batch(line, ports, ids, MAX_BATCH);
	if (got <= 0) {
		logf_("allocator batch answer without ports: %.*s", (int)strcspn(line, "\n"), line);
		return 0;
	}
	pthread_mutex_lock(&spare_lock);
	s = spare_find(fam, lbytes, rbytes, remote_port, now);
	int keep = got - 1;
	if (keep > MAX_BATCH - s->n)
		keep = MAX_BATCH - s->n;
	if (s->n == 0)
		s->leased_ms = now;
	memcpy(s->ports + s->n, ports + 1, (size_t)keep * sizeof(ports[0]));
	memcpy(s->ids + s->n, ids + 1, (size_t)keep * sizeof(ids[0]));
	s->n += keep;
	pthread_mutex_unlock(&spare_lock);
	logf_("leased %d ports, %d kept as spares", got, keep);
	return ports[0];
}

/* The local address the kernel will use towards `dst` (a throwaway UDP
 * connect does the route lookup without sending anything). */
static int route_source(const struct sockaddr *dst, socklen_t len, struct sockaddr_storage *src)
{
	int u = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (u < 0)
		return -1;
	int ok = -1;
	socklen_t sl = sizeof(*src);
	if (real_connect(u, dst, len) == 0 && getsockname(u, (struct sockaddr *)src, &sl) == 0)
		ok = 0;
	close(u);
	return ok;
}

static int addr_is_any(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static const void *addr_bytes(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return &((const struct sockaddr_in *)a)->sin_addr;
	return &((const struct sockaddr_in6 *)a)->sin6_addr;
}

enum pin_how { PIN_NONE, PIN_RANGE, PIN_BIND };

/* How long a route lookup is trusted (routes rarely change; a stale source
 * address only makes the prediction wrong, never the connect fail). */
#define ROUTE_CACHE_MS 1000

static __thread struct {
	int family;
	unsigned char dst[16];
	struct sockaddr_storage src;
	long at_ms;
} route_cache;

/* Decides whether to steer this connect and pins the port. Never changes
 * anything on a socket it does not steer. */
static enum pin_how steer(int fd, const struct sockaddr *addr, socklen_t len, int *old_no_port)
{
	if (!addr || len < (socklen_t)sizeof(sa_family_t))
		return PIN_NONE;
	int fam = addr->sa_family;
	unsigned remote_port;
	if (fam == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		remote_port = ntohs(((const struct sockaddr_in *)addr)->sin_port);
	} else if (fam == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			logf_("fd %d: IPv4-mapped IPv6 destination: plain connect", fd);
			return PIN_NONE;
		}
		remote_port = ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
	} else {
		return PIN_NONE; /* AF_UNIX, AF_UNSPEC (disconnect), short addresses, ... */
	}
	if (remote_port == 0)
		return PIN_NONE;

	int type = 0, proto = 0;
	socklen_t ol = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ol) < 0 || type != SOCK_STREAM)
		return PIN_NONE;
	ol = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &ol) < 0 || proto != IPPROTO_TCP)
		return PIN_NONE;

	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	if (getsockname(fd, (struct sockaddr *)&bound, &bl) < 0 || bound.ss_family != fam)
		return PIN_NONE;
	/* sin_port and sin6_port are at the same offset. */
	if (((struct sockaddr_in *)&bound)->sin_port != 0) {
		logf_("fd %d: already bound to a port: plain connect", fd);
		return PIN_NONE;
	}
	int bound_addr = !addr_is_any(&bound);

	struct sockaddr_storage local;
	if (bound_addr) {
		local = bound;
	} else {
		/* The route's source towards the last destination of this
		 * thread, remembered for ROUTE_CACHE_MS. */
		size_t alen = fam == AF_INET ? 4 : 16;
		long now = now_ms();
		if (route_cache.family == fam && now - route_cache.at_ms < ROUTE_CACHE_MS &&
		    memcmp(route_cache.dst, addr_bytes(addr), alen) == 0) {
			local = route_cache.src;
		} else {
			if (route_source(addr, len, &local) < 0)
				return PIN_NONE;
			route_cache.family = fam;
			memcpy(route_cache.dst, addr_bytes(addr), alen);
			route_cache.src = local;
			route_cache.at_ms = now;
		}
	}

	char lbuf[INET6_ADDRSTRLEN], rbuf[INET6_ADDRSTRLEN];
	if (!inet_ntop(fam, addr_bytes((struct sockaddr *)&local), lbuf, sizeof(lbuf)) ||
	    !inet_ntop(fam, addr_bytes(addr), rbuf, sizeof(rbuf)))
		return PIN_NONE;
	unsigned short port = lease_port(fam, addr_bytes((struct sockaddr *)&local), addr_bytes(addr), lbuf,
					 rbuf, remote_port);
	if (!port) {
		logf_("fd %d: no port from the allocator for %s -> %s:%u: plain connect", fd, lbuf, rbuf, remote_port);
		return PIN_NONE;
	}

	unsigned range = ((unsigned)port << 16) | port;
	if (setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &range, sizeof(range)) == 0) {
		ol = sizeof(int);
		if (getsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, old_no_port, &ol) < 0)
			*old_no_port = 0;
		int one = 1;
		(void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		logf_("fd %d: %s -> %s:%u pinned to port %u (IP_LOCAL_PORT_RANGE)", fd, lbuf, rbuf, remote_port, port);
		return PIN_RANGE;
	}
	if (errno != ENOPROTOOPT && errno != EINVAL)
		return PIN_NONE;
	/* Before Linux 6.3: bind the port (and the address the app bound, or
	 * the wildcard, so routing still picks the source address). */
	struct sockaddr_storage b;
	memset(&b, 0, sizeof(b));
	socklen_t blen;
	if (fam == AF_INET) {
		struct sockaddr_in *b4 = (struct sockaddr_in *)&b;
		b4->sin_family = AF_INET;
		b4->sin_port = htons(port);
		if (bound_addr)
			b4->sin_addr = ((struct sockaddr_in *)&bound)->sin_addr;
		blen = sizeof(*b4);
	} else {
		struct sockaddr_in6 *b6 = (struct sockaddr_in6 *)&b;
		b6->sin6_family = AF_INET6;
		b6->sin6_port = htons(port);
		if (bound_addr) {
			b6->sin6_addr = ((struct sockaddr_in6 *)&bound)->sin6_addr;
			b6->sin6_scope_id = ((struct sockaddr_in6 *)&bound)->sin6_scope_id;
		}
		blen = sizeof(*b6);
	}
	if (bind(fd, (struct sockaddr *)&b, blen) == 0) {
		logf_("fd %d: %s -> %s:%u bound to port %u (bind)", fd, lbuf, rbuf, remote_port, port);
		return PIN_BIND;
	}
	logf_("fd %d: bind to port %u failed (errno %d): plain connect", fd, port, errno);
	return PIN_NONE;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	pthread_once(&init_once, init);
	if (!real_connect) {
		errno = ENOSYS;
		return -1;
	}
	int saved = errno;
	int old_no_port = 0;
	enum pin_how how = steer(fd, addr, len, &old_no_port);
	errno = saved;
	int r = real_connect(fd, addr, len);
	if (r == 0 || how != PIN_RANGE)
		return r;
	int err = errno;
	if (err != EADDRNOTAVAIL && err != EADDRINUSE)
		return r; /* EINPROGRESS, ECONNREFUSED, ...: the connect's own result */
	/* The pinned port's 4-tuple is taken (e.g. TIME_WAIT): undo the pin
	 * and let the kernel choose. */
	unsigned zero = 0;
	(void)setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &zero, sizeof(zero));
	(void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &old_no_port, sizeof(old_no_port));
	logf_("fd %d: pinned port unavailable (errno %d): plain connect", fd, err);
	errno = saved;
	return real_connect(fd, addr, len);
}
