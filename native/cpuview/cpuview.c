/*
 * libcfsprobe-cpuview: an LD_PRELOAD library that makes a process see N CPUs.
 *
 * Doors covered: sysconf(_SC_NPROCESSORS_ONLN/_CONF), get_nprocs,
 * get_nprocs_conf, sched_getaffinity, pthread_getaffinity_np, and read-only
 * opens of /sys/devices/system/cpu/{online,possible,present} and
 * /proc/cpuinfo through open, open64, openat, openat64, their _FORTIFY_SOURCE
 * variants (__open_2, ...), fopen and fopen64. See README.md for the
 * environment contract and what cannot be covered.
 *
 * Rules this file keeps (libfaketime's habits):
 *  - The real functions are resolved with dlsym(RTLD_NEXT) once, under
 *    pthread_once, from a constructor; a thread-local flag makes any call
 *    that re-enters during that resolution pass straight through.
 *  - Any internal error gives the real answer. Nothing here may crash or
 *    change the behaviour of the host beyond the CPU count it sees.
 *  - The paths a signal handler may take (sysconf, get_nprocs*,
 *    sched_getaffinity, the open family) allocate nothing and take no lock:
 *    they use raw system calls, the stack, and mmap for the large
 *    /proc/cpuinfo buffer. errno is preserved whenever the answer is ours.
 *  - Raw syscall() is used rather than libc's read/write/close so that the
 *    library adds no cancellation points (a thread cancelled inside a
 *    refresh would otherwise leave the refresh flag held).
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
#ifndef __O_TMPFILE
#define __O_TMPFILE 0
#endif

#define EXPORT __attribute__((visibility("default")))
/* initial-exec: no __tls_get_addr (which may allocate) on first use in a
 * thread, so the flag is safe to touch from a signal handler. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* glibc declares some arguments nonnull (open's path, fopen's, the masks);
 * a null one must still reach the real function, which fails cleanly with
 * EFAULT, rather than crash here. launder hides the attribute from the
 * optimiser so our own null checks stay. */
#define launder(p)                         \
	({                                 \
		__typeof__(p) p_ = (p);    \
		__asm__("" : "+r"(p_));    \
		p_;                        \
	})

extern char **environ;

/* glibc exports this alias of sysconf; it is the fallback should dlsym fail. */
extern long __sysconf(int name);

/* ---- the real functions ------------------------------------------------ */

typedef long (*sysconf_fn)(int);
typedef int (*nprocs_fn)(void);
typedef int (*getaff_fn)(pid_t, size_t, cpu_set_t *);
typedef int (*pgetaff_fn)(pthread_t, size_t, cpu_set_t *);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef FILE *(*fopen_fn)(const char *, const char *);

static struct {
	sysconf_fn sysconf;
	nprocs_fn get_nprocs, get_nprocs_conf;
	getaff_fn sched_getaffinity;
	pgetaff_fn pthread_getaffinity_np;
	open_fn open, open64;
	openat_fn openat, openat64;
	open2_fn open_2, open64_2;
	openat2_fn openat_2, openat64_2;
	fopen_fn fopen, fopen64;
} real;

/* ---- configuration, written once by init() before `ready` is set -------- */

enum { ROUND_FLOOR, ROUND_CEIL, ROUND_NEAREST };
static const char *const round_names[] = {"floor", "ceil", "nearest"};

#define MAX_ENTRIES 64
#define POOL_SIZE 65536
struct entry {
	int v2;      /* 1: cgroup v2 cpu.max; 0: v1 cfs_quota_us + cfs_period_us */
	unsigned a;  /* offset in pool: cpu.max (v2) or cpu.cfs_quota_us (v1) */
	unsigned b;  /* offset in pool: cpu.cfs_period_us (v1) */
};
static struct entry entries[MAX_ENTRIES];
static int nentries;
static char pool[POOL_SIZE];

static int active;     /* 0: pass everything through */
static int start_n;    /* CFSPROBE_CPUS as given (not clamped) */
static int round_mode; /* CFSPROBE_CPUS_ROUND */
static int debug;      /* CFSPROBE_CPUS_DEBUG=1 */

static _Atomic int cur_n;                /* the view */
static _Atomic int real_n;               /* CPUs in the mask at the last look */
static _Atomic long long next_refresh;   /* CLOCK_MONOTONIC_COARSE ns */
static atomic_flag refreshing = ATOMIC_FLAG_INIT;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int ready;
static TLS int in_init;

/* ---- raw system calls (async-signal-safe, no cancellation points) ------ */

static int sys_openat(int dfd, const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dfd, path, flags, mode);
}

static void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

static long sys_read(int fd, void *buf, size_t n)
{
	long r;
	do
		r = syscall(SYS_read, fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		long r = syscall(SYS_write, fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* glibc's sched_getaffinity: the kernel returns the bytes it wrote; glibc
 * zeroes the rest of the caller's mask and returns 0. */
static int raw_getaffinity(pid_t pid, size_t size, cpu_set_t *mask)
{
	long r = syscall(SYS_sched_getaffinity, pid, size, mask);
	if (r < 0)
		return -1;
	if ((size_t)r < size)
		memset((char *)mask + r, 0, size - (size_t)r);
	return 0;
}

static void dbg(const char *s)
{
	write_all(2, s, strlen(s));
}

/* ---- CPU masks as byte arrays ------------------------------------------ */

static int bit_isset(const unsigned char *m, size_t len, size_t i)
{
	return i / 8 < len && (m[i / 8] >> (i % 8)) & 1;
}

static int count_bits(const unsigned char *m, size_t len)
{
	int n = 0;
	for (size_t i = 0; i < len; i++)
		n += __builtin_popcount(m[i]);
	return n;
}

/* trim keeps the first `keep` set bits of m and clears the others. */
static void trim(unsigned char *m, size_t len, int keep)
{
	int seen = 0;
	for (size_t i = 0; i < len; i++) {
		if (m[i] == 0)
			continue;
		if (seen >= keep) {
			m[i] = 0;
			continue;
		}
		for (int b = 0; b < 8; b++) {
			if (!((m[i] >> b) & 1))
				continue;
			if (seen >= keep)
				m[i] &= (unsigned char)~(1u << b);
			else
				seen++;
		}
	}
}

/* A real affinity mask (pid 0: the calling thread's): on the stack for up
 * to 1024 CPUs, in an mmap'd buffer (no malloc) for bigger machines. */
struct maskbuf {
	unsigned char *p;
	size_t len;    /* bytes the kernel wrote */
	size_t maplen; /* non-zero when p is mmap'd */
	unsigned char small[128];
};

static int mask_get(struct maskbuf *mb, pid_t pid)
{
	long r = syscall(SYS_sched_getaffinity, pid, sizeof mb->small, mb->small);
	mb->maplen = 0;
	if (r > 0) {
		mb->p = mb->small;
		mb->len = (size_t)r;
		return 0;
	}
	if (r == 0 || errno != EINVAL)
		return -1;
	size_t sz = 1 << 16; /* 524288 CPUs */
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	r = syscall(SYS_sched_getaffinity, pid, sz, p);
	if (r <= 0) {
		munmap(p, sz);
		return -1;
	}
	mb->p = p;
	mb->len = (size_t)r;
	mb->maplen = sz;
	return 0;
}

static void mask_put(struct maskbuf *mb)
{
	if (mb->maplen)
		munmap(mb->p, mb->maplen);
}

/* real_count: the CPUs in the process's mask, that is its main thread's
 * (not the caller's: a worker that pinned itself to one CPU must not shrink
 * everyone's view). */
static int real_count(void)
{
	struct maskbuf mb;
	if (mask_get(&mb, getpid()) && mask_get(&mb, 0))
		return -1;
	int n = count_bits(mb.p, mb.len);
	mask_put(&mb);
	return n;
}

/* ---- following the quota ----------------------------------------------- */

/* read_small reads a small file whole into buf (NUL-terminated). */
static int read_small(const char *path, char *buf, size_t cap)
{
	int fd = sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len < cap - 1) {
		long r = sys_read(fd, buf + len, cap - 1 - len);
		if (r < 0) {
			sys_close(fd);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	sys_close(fd);
	buf[len] = 0;
	return (int)len;
}

/* parse_int reads an optionally negative decimal after blanks. */
static int parse_int(const char **sp, long long *out)
{
	const char *s = *sp;
	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	int neg = 0;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (*s < '0' || *s > '9')
		return -1;
	long long v = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (LLONG_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*out = neg ? -v : v;
	*sp = s;
	return 0;
}

/* entry_quota: 1 and *q, *p when the entry has a quota; 0 when it has none
 * or cannot be read. */
static int entry_quota(const struct entry *e, long long *q, long long *p)
{
	char buf[96];
	const char *s;
	if (e->v2) {
		if (read_small(pool + e->a, buf, sizeof buf) <= 0)
			return 0;
		s = buf;
		while (*s == ' ' || *s == '\t')
			s++;
		if (strncmp(s, "max", 3) == 0)
			return 0;
		if (parse_int(&s, q) || parse_int(&s, p))
			return 0;
	} else {
		if (read_small(pool + e->a, buf, sizeof buf) <= 0)
			return 0;
		s = buf;
		if (parse_int(&s, q))
			return 0;
		if (*q < 0)
			return 0; /* -1: no quota */
		if (read_small(pool + e->b, buf, sizeof buf) <= 0)
			return 0;
		s = buf;
		if (parse_int(&s, p))
			return 0;
	}
	return *q > 0 && *p > 0;
}

static long long round_ratio(long long q, long long p)
{
	long long n;
	if (q > LLONG_MAX / 2 - p)
		return LLONG_MAX; /* absurdly large quota: no limit in practice */
	switch (round_mode) {
	case ROUND_CEIL:
		n = (q + p - 1) / p;
		break;
	case ROUND_NEAREST:
		n = (2 * q + p) / (2 * p);
		break;
	default:
		n = q / p;
	}
	return n < 1 ? 1 : n;
}

/* quota_n is the rounded smallest quota/period over the entries, or -1 when
 * no entry has a readable quota. */
static long long quota_n(void)
{
	long long best = -1;
	for (int i = 0; i < nentries; i++) {
		long long q, p;
		if (!entry_quota(&entries[i], &q, &p))
			continue;
		long long n = round_ratio(q, p);
		if (best < 0 || n < best)
			best = n;
	}
	return best;
}

/* refresh recomputes the view. Only one thread runs it at a time. */
static void refresh(void)
{
	int rn = real_count();
	if (rn > 0)
		atomic_store_explicit(&real_n, rn, memory_order_relaxed);
	else
		rn = atomic_load_explicit(&real_n, memory_order_relaxed);
	long long n = nentries ? quota_n() : -1;
	if (n < 1)
		n = start_n;
	if (n > rn)
		n = rn;
	if (n < 1)
		n = 1;
	atomic_store_explicit(&cur_n, (int)n, memory_order_relaxed);
}

static long long now_coarse(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return -1;
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* view_n is N. When following, at most one refresh a second, by whichever
 * caller wins the flag; everyone else (a signal handler that interrupted
 * the refresher included) takes the cached value and never waits. */
static int view_n(void)
{
	if (nentries) {
		long long now = now_coarse();
		if (now >= 0 && now >= atomic_load_explicit(&next_refresh, memory_order_relaxed) &&
		    !atomic_flag_test_and_set_explicit(&refreshing, memory_order_acquire)) {
			if (now >= atomic_load_explicit(&next_refresh, memory_order_relaxed)) {
				refresh();
				atomic_store_explicit(&next_refresh, now + 1000000000LL, memory_order_relaxed);
			}
			atomic_flag_clear_explicit(&refreshing, memory_order_release);
		}
	}
	return atomic_load_explicit(&cur_n, memory_order_relaxed);
}

static void atfork_child(void)
{
	/* a thread of the parent may have been refreshing at fork time */
	atomic_flag_clear(&refreshing);
}

/* ---- init ---------------------------------------------------------------- */

static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void resolve(void)
{
	real.sysconf = (sysconf_fn)next_sym("sysconf");
	real.get_nprocs = (nprocs_fn)next_sym("get_nprocs");
	real.get_nprocs_conf = (nprocs_fn)next_sym("get_nprocs_conf");
	real.sched_getaffinity = (getaff_fn)next_sym("sched_getaffinity");
	real.pthread_getaffinity_np = (pgetaff_fn)next_sym("pthread_getaffinity_np");
	real.open = (open_fn)next_sym("open");
	real.open64 = (open_fn)next_sym("open64");
	real.openat = (openat_fn)next_sym("openat");
	real.openat64 = (openat_fn)next_sym("openat64");
	real.open_2 = (open2_fn)next_sym("__open_2");
	real.open64_2 = (open2_fn)next_sym("__open64_2");
	real.openat_2 = (openat2_fn)next_sym("__openat_2");
	real.openat64_2 = (openat2_fn)next_sym("__openat64_2");
	real.fopen = (fopen_fn)next_sym("fopen");
	real.fopen64 = (fopen_fn)next_sym("fopen64");
}

/* pool_add copies dir + suffix into the pool; returns the offset or -1. */
static long pool_add(unsigned *used, const char *dir, size_t dirlen, const char *suffix)
{
	size_t sl = strlen(suffix);
	if (dirlen + sl + 1 > PATH_MAX || *used + dirlen + sl + 1 > POOL_SIZE)
		return -1;
	unsigned off = *used;
	memcpy(pool + off, dir, dirlen);
	memcpy(pool + off + dirlen, suffix, sl + 1);
	*used += (unsigned)(dirlen + sl + 1);
	return off;
}

static void parse_follow(const char *s)
{
	unsigned used = 0;
	while (*s) {
		const char *end = strchr(s, ':');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		int v2 = -1;
		if (len > 3 && s[0] == 'v' && s[2] == ',' && (s[1] == '1' || s[1] == '2'))
			v2 = s[1] == '2';
		if (v2 < 0 || s[3] != '/' || nentries == MAX_ENTRIES) {
			if (debug) {
				dbg("cfsprobe-cpuview: CFSPROBE_CPUS_FOLLOW: ignoring an entry (want v1,/dir or v2,/dir, at most 64)\n");
			}
		} else {
			const char *dir = s + 3;
			size_t dl = len - 3;
			while (dl > 1 && dir[dl - 1] == '/')
				dl--;
			long a = pool_add(&used, dir, dl, v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
			long b = v2 ? 0 : pool_add(&used, dir, dl, "/cpu.cfs_period_us");
			if (a >= 0 && b >= 0) {
				entries[nentries].v2 = v2;
				entries[nentries].a = (unsigned)a;
				entries[nentries].b = (unsigned)b;
				nentries++;
			} else if (debug) {
				dbg("cfsprobe-cpuview: CFSPROBE_CPUS_FOLLOW: ignoring a path that is too long\n");
			}
		}
		if (!end)
			break;
		s = end + 1;
	}
}

static void init(void)
{
	in_init = 1;
	resolve();

	const char *d = getenv("CFSPROBE_CPUS_DEBUG");
	debug = d && strcmp(d, "1") == 0;

	const char *s = getenv("CFSPROBE_CPUS");
	if (!s) {
		if (debug)
			dbg("cfsprobe-cpuview: CFSPROBE_CPUS is not set; the real CPU count passes through\n");
		goto done;
	}
	long long v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9' || parse_int(&p, &v) || *p != 0 || v < 1 || v > 1 << 22) {
		if (debug)
			dbg("cfsprobe-cpuview: CFSPROBE_CPUS is not an integer >= 1; the real CPU count passes through\n");
		goto done;
	}
	start_n = (int)v;

	round_mode = ROUND_FLOOR;
	const char *r = getenv("CFSPROBE_CPUS_ROUND");
	if (r && *r) {
		if (strcmp(r, "ceil") == 0)
			round_mode = ROUND_CEIL;
		else if (strcmp(r, "nearest") == 0)
			round_mode = ROUND_NEAREST;
		else if (strcmp(r, "floor") != 0 && debug)
			dbg("cfsprobe-cpuview: CFSPROBE_CPUS_ROUND is not ceil, floor or nearest; using floor\n");
	}

	const char *f = getenv("CFSPROBE_CPUS_FOLLOW");
	if (f && *f)
		parse_follow(f);

	int rn = real_count();
	if (rn < 1) {
		if (debug)
			dbg("cfsprobe-cpuview: cannot read the affinity mask; the real CPU count passes through\n");
		nentries = 0;
		goto done;
	}
	atomic_store(&real_n, rn);
	refresh();
	if (nentries) {
		long long now = now_coarse();
		atomic_store(&next_refresh, now < 0 ? 0 : now + 1000000000LL);
		pthread_atfork(NULL, NULL, atfork_child);
	}
	active = 1;

	if (debug) {
		char line[320];
		int n = snprintf(line, sizeof line,
				 "cfsprobe-cpuview: pid %d sees %d CPUs (CFSPROBE_CPUS=%d, %d in its affinity mask)",
				 (int)getpid(), atomic_load(&cur_n), start_n, rn);
		if (nentries && n > 0 && (size_t)n < sizeof line)
			n += snprintf(line + n, sizeof line - (size_t)n,
				      ", following the quota of %d cgroup dirs, rounding %s",
				      nentries, round_names[round_mode]);
		if (n > 0 && (size_t)n < sizeof line - 1)
			line[n++] = '\n', line[n] = 0;
		dbg(line);
	}
done:
	atomic_store_explicit(&ready, 1, memory_order_release);
	in_init = 0;
}

/* ensure_init: 1 when the configuration and real functions are ready; 0
 * (the caller then passes through with the fallbacks, which need neither)
 * for a call that re-enters while this thread runs init, and for a call
 * made before libc has set up the environment: ASan's runtime, for one,
 * calls sysconf from the executable's preinit_array, where environ is
 * still NULL. Initialising then would read no CFSPROBE_CPUS and leave the
 * view off for good; our constructor initialises a little later. */
static int ensure_init(void)
{
	if (atomic_load_explicit(&ready, memory_order_acquire))
		return 1;
	if (in_init || !environ)
		return 0;
	pthread_once(&once, init);
	return atomic_load_explicit(&ready, memory_order_acquire);
}

__attribute__((constructor)) static void cpuview_ctor(void)
{
	ensure_init();
}

/* ---- sysconf, get_nprocs, get_nprocs_conf -------------------------------- */

/* viewed_count: the view's CPU count when the view is on, 0 when it is
 * off; *ok says whether initialisation is done (the real functions are
 * resolved). errno is left as it was. */
static int viewed_count(int *ok)
{
	*ok = ensure_init();
	if (!*ok || !active)
		return 0;
	int e = errno;
	int n = view_n();
	errno = e;
	return n;
}

EXPORT long sysconf(int name)
{
	int ok;
	if (name == _SC_NPROCESSORS_ONLN || name == _SC_NPROCESSORS_CONF) {
		int n = viewed_count(&ok);
		if (n > 0)
			return n;
	} else {
		ok = ensure_init();
	}
	if (ok && real.sysconf)
		return real.sysconf(name);
	return __sysconf(name);
}

EXPORT int get_nprocs(void)
{
	int ok, n = viewed_count(&ok);
	if (n > 0)
		return n;
	if (ok && real.get_nprocs)
		return real.get_nprocs();
	return (int)__sysconf(_SC_NPROCESSORS_ONLN);
}

EXPORT int get_nprocs_conf(void)
{
	int ok, n = viewed_count(&ok);
	if (n > 0)
		return n;
	if (ok && real.get_nprocs_conf)
		return real.get_nprocs_conf();
	return (int)__sysconf(_SC_NPROCESSORS_CONF);
}

/* ---- sched_getaffinity, pthread_getaffinity_np --------------------------- */

/* is_self: pid names this process or one of its threads. */
static int is_self(pid_t pid)
{
	if (pid == 0)
		return 1;
	if (pid < 0)
		return 0;
	pid_t me = getpid();
	if (pid == me)
		return 1;
	int e = errno;
	int same = syscall(SYS_tgkill, me, pid, 0) == 0; /* signal 0: existence check */
	errno = e;
	return same;
}

EXPORT int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask)
{
	int ok = ensure_init();
	int r;
	if (ok && real.sched_getaffinity)
		r = real.sched_getaffinity(pid, size, mask);
	else
		r = raw_getaffinity(pid, size, mask);
	if (r == 0 && ok && active && launder(mask) && is_self(pid)) {
		int e = errno;
		trim((unsigned char *)mask, size, view_n());
		errno = e;
	}
	return r;
}

EXPORT int pthread_getaffinity_np(pthread_t th, size_t size, cpu_set_t *set)
{
	int ok = ensure_init();
	int r;
	if (ok && real.pthread_getaffinity_np) {
		r = real.pthread_getaffinity_np(th, size, set);
	} else if (pthread_equal(th, pthread_self())) {
		int e = errno;
		r = raw_getaffinity(0, size, set) == 0 ? 0 : errno;
		errno = e;
	} else {
		return ENOSYS;
	}
	if (r == 0 && ok && active && launder(set)) {
		int e = errno;
		trim((unsigned char *)set, size, view_n());
		errno = e;
	}
	return r;
}

/* ---- the files ----------------------------------------------------------- */

enum { F_NONE, F_LIST, F_CPUINFO };

static int classify(const char *path)
{
	static const char cpu[] = "/sys/devices/system/cpu/";
	if (!path || path[0] != '/')
		return F_NONE;
	if (strncmp(path, cpu, sizeof cpu - 1) == 0) {
		const char *n = path + sizeof cpu - 1;
		if (strcmp(n, "online") == 0 || strcmp(n, "possible") == 0 || strcmp(n, "present") == 0)
			return F_LIST;
		return F_NONE;
	}
	return strcmp(path, "/proc/cpuinfo") == 0 ? F_CPUINFO : F_NONE;
}

static int open_readonly(int flags)
{
	return (flags & O_ACCMODE) == O_RDONLY &&
	       !(flags & (O_CREAT | O_TRUNC | O_PATH | O_DIRECTORY | __O_TMPFILE));
}

struct writer {
	int fd;
	int err;
	size_t n;
	char buf[128];
};

static void w_flush(struct writer *w)
{
	if (w->n && !w->err && write_all(w->fd, w->buf, w->n))
		w->err = 1;
	w->n = 0;
}

static void w_char(struct writer *w, char c)
{
	if (w->n == sizeof w->buf)
		w_flush(w);
	w->buf[w->n++] = c;
}

static void w_uint(struct writer *w, size_t v)
{
	char d[24];
	int i = 0;
	do {
		d[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		w_char(w, d[--i]);
}

/* fill_list writes S, the first N CPUs of the real mask, as the kernel
 * writes a cpu list: "0-3,6\n". */
static int fill_list(int fd)
{
	struct maskbuf mb;
	if (mask_get(&mb, 0))
		return -1;
	trim(mb.p, mb.len, view_n());
	struct writer w = {.fd = fd};
	size_t nbits = mb.len * 8;
	int first = 1;
	for (size_t i = 0; i < nbits;) {
		if (!bit_isset(mb.p, mb.len, i)) {
			i++;
			continue;
		}
		size_t j = i;
		while (j + 1 < nbits && bit_isset(mb.p, mb.len, j + 1))
			j++;
		if (!first)
			w_char(&w, ',');
		first = 0;
		w_uint(&w, i);
		if (j > i) {
			w_char(&w, '-');
			w_uint(&w, j);
		}
		i = j + 1;
	}
	w_char(&w, '\n');
	w_flush(&w);
	mask_put(&mb);
	return w.err ? -1 : 0;
}

/* block_cpu: the k of a block starting "processor\t: k", else -1. */
static long block_cpu(const char *b, size_t len)
{
	static const char key[] = "processor";
	size_t i = sizeof key - 1;
	if (len < i || memcmp(b, key, i) != 0)
		return -1;
	while (i < len && (b[i] == ' ' || b[i] == '\t'))
		i++;
	if (i >= len || b[i] != ':')
		return -1;
	i++;
	while (i < len && (b[i] == ' ' || b[i] == '\t'))
		i++;
	if (i >= len || b[i] < '0' || b[i] > '9')
		return -1;
	long k = 0;
	for (; i < len && b[i] >= '0' && b[i] <= '9'; i++) {
		if (k > 1 << 24)
			return -1;
		k = k * 10 + (b[i] - '0');
	}
	return k;
}

#define CPUINFO_FIRST (256u << 10)
#define CPUINFO_MAX (64u << 20)

/* fill_cpuinfo writes the real /proc/cpuinfo without the blocks of the
 * processors outside S. Blocks without a "processor" line are kept. */
static int fill_cpuinfo(int fd)
{
	struct maskbuf mb;
	if (mask_get(&mb, 0))
		return -1;
	trim(mb.p, mb.len, view_n());
	int rc = -1;
	size_t cap = CPUINFO_FIRST, len = 0;
	char *buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		goto out_mask;
	int in = sys_openat(AT_FDCWD, "/proc/cpuinfo", O_RDONLY | O_CLOEXEC, 0);
	if (in < 0)
		goto out_buf;
	for (;;) {
		if (len == cap) {
			if (cap >= CPUINFO_MAX)
				break; /* too big: rc stays -1 */
			char *nb = mremap(buf, cap, cap * 2, MREMAP_MAYMOVE);
			if (nb == MAP_FAILED)
				break;
			buf = nb;
			cap *= 2;
		}
		long r = sys_read(in, buf + len, cap - len);
		if (r < 0)
			break;
		if (r == 0) {
			rc = 0;
			break;
		}
		len += (size_t)r;
	}
	sys_close(in);
	if (rc != 0)
		goto out_buf;
	for (size_t pos = 0; pos < len && rc == 0;) {
		size_t end = pos;
		while (end + 1 < len && !(buf[end] == '\n' && buf[end + 1] == '\n'))
			end++;
		end = end + 1 < len ? end + 2 : len;
		long k = block_cpu(buf + pos, end - pos);
		if (k < 0 || bit_isset(mb.p, mb.len, (size_t)k))
			rc = write_all(fd, buf + pos, end - pos);
		pos = end;
	}
out_buf:
	munmap(buf, cap);
out_mask:
	mask_put(&mb);
	return rc;
}

/* view_open returns a read-only fd holding our version of the file, or -1
 * (errno untouched either way) so that the caller opens the real one. */
static int view_open(int kind, int flags)
{
	int e = errno;
	int mfd = (int)syscall(SYS_memfd_create, "cfsprobe-cpuview", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		goto fail;
	if ((kind == F_CPUINFO ? fill_cpuinfo(mfd) : fill_list(mfd)) != 0)
		goto fail_close;
	syscall(SYS_fcntl, mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);

	/* Reopen through /proc so the caller gets a fresh read-only open file
	 * description with its own flags, as the real open would give. */
	char path[40] = "/proc/self/fd/";
	char d[16];
	int i = 0, p = (int)strlen(path);
	unsigned v = (unsigned)mfd;
	do {
		d[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		path[p++] = d[--i];
	path[p] = 0;
	int fd = sys_openat(AT_FDCWD, path, O_RDONLY | (flags & (O_CLOEXEC | O_NONBLOCK | O_LARGEFILE)), 0);
	if (fd >= 0) {
		sys_close(mfd);
		errno = e;
		return fd;
	}
	/* No /proc: hand out the memfd itself (sealed against writes). */
	if (!(flags & O_CLOEXEC) && syscall(SYS_fcntl, mfd, F_SETFD, 0) != 0)
		goto fail_close;
	if (syscall(SYS_lseek, mfd, 0, SEEK_SET) != 0)
		goto fail_close;
	errno = e;
	return mfd;
fail_close:
	sys_close(mfd);
fail:
	errno = e;
	return -1;
}

/* try_view: our fd for path, or -1 to open the real file. */
static int try_view(const char *path, int flags)
{
	if (!active || !open_readonly(flags))
		return -1;
	int kind = classify(launder(path));
	return kind == F_NONE ? -1 : view_open(kind, flags);
}

#define OPEN_NEEDS_MODE(f) (((f) & O_CREAT) != 0 || ((f) & __O_TMPFILE) == __O_TMPFILE)
#define GET_MODE(flags, mode)                      \
	do {                                       \
		if (OPEN_NEEDS_MODE(flags)) {      \
			va_list ap;                \
			va_start(ap, flags);       \
			mode = va_arg(ap, mode_t); \
			va_end(ap);                \
		}                                  \
	} while (0)

EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.open)
		return real.open(path, flags, mode);
	return sys_openat(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.open64)
		return real.open64(path, flags, mode);
	return sys_openat(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

EXPORT int openat(int dfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.openat)
		return real.openat(dfd, path, flags, mode);
	return sys_openat(dfd, path, flags, mode);
}

EXPORT int openat64(int dfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.openat64)
		return real.openat64(dfd, path, flags, mode);
	return sys_openat(dfd, path, flags | O_LARGEFILE, mode);
}

/* The _FORTIFY_SOURCE entry points (open(path, flags) with flags unknown at
 * compile time). The real ones abort on O_CREAT without a mode. */
EXPORT int __open_2(const char *path, int flags)
{
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.open_2)
		return real.open_2(path, flags);
	return sys_openat(AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags)
{
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.open64_2)
		return real.open64_2(path, flags);
	return sys_openat(AT_FDCWD, path, flags | O_LARGEFILE, 0);
}

EXPORT int __openat_2(int dfd, const char *path, int flags)
{
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.openat_2)
		return real.openat_2(dfd, path, flags);
	return sys_openat(dfd, path, flags, 0);
}

EXPORT int __openat64_2(int dfd, const char *path, int flags)
{
	int ok = ensure_init(), fd;
	if (ok && (fd = try_view(path, flags)) >= 0)
		return fd;
	if (ok && real.openat64_2)
		return real.openat64_2(dfd, path, flags);
	return sys_openat(dfd, path, flags | O_LARGEFILE, 0);
}

/* ---- fopen, fopen64 ------------------------------------------------------ */

/* mode_flags: open(2) flags for an fopen mode; *ro says read-only. */
static int mode_flags(const char *m, int *ro)
{
	int flags;
	*ro = 0;
	switch (*m) {
	case 'r':
		flags = O_RDONLY;
		*ro = 1;
		break;
	case 'w':
		flags = O_WRONLY | O_CREAT | O_TRUNC;
		break;
	case 'a':
		flags = O_WRONLY | O_CREAT | O_APPEND;
		break;
	default:
		return -1;
	}
	for (m++; *m && *m != ','; m++) {
		if (*m == '+') {
			flags = (flags & ~O_ACCMODE) | O_RDWR;
			*ro = 0;
		} else if (*m == 'e') {
			flags |= O_CLOEXEC;
		} else if (*m == 'x') {
			flags |= O_EXCL;
		}
	}
	return flags;
}

/* fallback_fopen is fopen from open(2) and fdopen, for the case where the
 * real fopen could not be resolved (never seen in practice). */
static FILE *fallback_fopen(const char *path, const char *mode)
{
	int ro;
	int flags = launder(mode) ? mode_flags(mode, &ro) : -1;
	if (flags < 0) {
		errno = EINVAL;
		return NULL;
	}
	int fd = sys_openat(AT_FDCWD, path, flags | O_LARGEFILE, 0666);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, mode);
	if (!f) {
		int e = errno;
		sys_close(fd);
		errno = e;
	}
	return f;
}

static FILE *fopen_common(const char *path, const char *mode, int is64)
{
	int ok = ensure_init();
	if (ok && active && launder(path) && launder(mode)) {
		int ro, flags = mode_flags(mode, &ro);
		if (flags >= 0 && ro) {
			int kind = classify(path);
			int fd = kind == F_NONE ? -1 : view_open(kind, flags);
			if (fd >= 0) {
				int e = errno;
				FILE *f = fdopen(fd, mode);
				if (f)
					return f;
				sys_close(fd);
				errno = e;
			}
		}
	}
	fopen_fn f = ok ? (is64 ? real.fopen64 : real.fopen) : NULL;
	if (f)
		return f(path, mode);
	return fallback_fopen(path, mode);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fopen_common(path, mode, 0);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common(path, mode, 1);
}
