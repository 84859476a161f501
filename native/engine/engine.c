/*
 * cfsprobe-engine: the hot loops of cfsprobe's CPU-bound built-in workloads,
 * in C, for runs where the workload's own overhead must be nil.
 *
 * A Go program has helper threads besides its workers (the runtime's
 * monitor, the garbage collector) and they run inside the measured group.
 * When the workload's demand equals the quota exactly (one busy thread
 * under a 1-CPU quota), that little extra is enough for the kernel to
 * throttle some periods by a millisecond or two, which the experiments
 * this reproduces (seed 001: sysbench cpu) do not see. This program is a
 * static binary with nothing but its workers: cfsprobe embeds it and runs
 * it in place of the Go workload when it can (internal/workload/engine.go).
 *
 *   cfsprobe-engine parallel THREADS DURATION_NS MAX_PRIME EVENTS PIN
 *   cfsprobe-engine bursty THREADS DURATION_NS ON_NS ON_CPU_NS OFF_NS JITTER_NS SEED PIN
 *   cfsprobe-engine periodic THREADS ITERATIONS BURN_NS BURN_CPU_NS SLEEP_NS QUIET
 *
 * parallel: each worker repeats sysbench cpu's event (count primes below
 * MAX_PRIME by trial division) and times it with CLOCK_MONOTONIC (vDSO: no
 * system call inside or between events).
 * bursty: each worker busy-waits for ON_NS of wall time (or, with ON_CPU_NS
 * > 0, until it has spent that much thread CPU time), then sleeps OFF_NS
 * plus a uniform random [-JITTER_NS, +JITTER_NS], until DURATION_NS.
 * periodic: each worker burns like a bursty one (BURN_NS of wall time or
 * BURN_CPU_NS of thread CPU time), prints a line about it unless QUIET (the
 * "Overly aggressive CFS" program's output), sleeps SLEEP_NS, ITERATIONS
 * times.
 * PIN (parallel, bursty): with fewer threads than CPUs in the affinity mask, keep the
 * process on that many CPUs (the last ones).
 *
 * Records stay in memory until the end; then the result goes to the
 * descriptor named by CFSPROBE_RESULT_FD in this format (all integers
 * little-endian int64):
 *
 *   "CFSPENG3" start_mono end_mono start_cpu_ns self_cpu_ns threads dropped
 *   then per thread: count, count x (start_mono_ns, wall_ns, cpu_ns)
 *
 * start_mono is the workload's clock's start (its release), end_mono its
 * end (every worker joined); start_cpu_ns and self_cpu_ns are the
 * process's CPU time (CLOCK_PROCESS_CPUTIME_ID, since its fork) at those
 * two moments: what its start cost, and what it used up to its end.
 *
 * Exit status: 0 done, 2 bad arguments, 1 anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct rec {
	int64_t start, wall, cpu;
};

struct worker {
	pthread_t tid;
	struct rec *recs;
	int64_t n, cap;
	int dropped;
	uint64_t sink; /* the work's result, kept so the compiler cannot drop it */
};

static int64_t deadline, max_prime, events;
static int64_t on_ns, on_cpu_ns, off_ns, jitter_ns, every_ns, seed;
static int64_t iterations, quiet, run_start;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_llong done_events;
static volatile uint64_t sink;
static struct worker *workers;
static int64_t nworkers;

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC goes through the vDSO: no system call. */
static int64_t mono(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* The record of one operation, kept while there is room. */
static void record(struct worker *w, int64_t start, int64_t wall, int64_t cpu)
{
	if (w->n < w->cap)
		w->recs[w->n++] = (struct rec){start, wall, cpu};
	else
		w->dropped = 1;
}

/* sysbench cpu's event. */
static uint64_t prime_event(int64_t max)
{
	uint64_t n = 0;
	for (int64_t c = 3; c < max; c++) {
		int64_t t = (int64_t)sqrt((double)c), l = 2;
		for (; l <= t; l++)
			if (c % l == 0)
				break;
		if (l > t)
			n++;
	}
	return n;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t primes = 0;
	for (;;) {
		if (events > 0 && atomic_fetch_add(&done_events, 1) >= events)
			break;
		int64_t t0 = mono();
		if (t0 >= deadline)
			break;
		primes += prime_event(max_prime);
		int64_t t1 = mono();
		record(w, t0, t1 - t0, 0);
	}
	w->sink = primes;
	return NULL;
}

static int64_t thread_cpu(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* A few microseconds of CPU work the compiler cannot remove. */
static uint64_t burn_chunk(uint64_t x)
{
	x |= 1;
	for (int i = 0; i < 2000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

/* splitmix64: the jitter's random numbers. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int64_t burn_for(uint64_t *x, int64_t t0);
static void sleep_ns(int64_t ns);

static void *burst_work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uint64_t)(w - workers) + 7, rs = (uint64_t)seed * 1000003 + (uint64_t)(w - workers);
	for (int64_t k = 1;; k++) {
		int64_t t0 = mono();
		if (t0 >= deadline)
			break;
		int64_t cpu = burn_for(&x, t0);
		int64_t t1 = mono();
		record(w, t0, t1 - t0, cpu);
		int64_t off = off_ns;
		if (every_ns > 0) {
			/* An open loop: burst k starts k × every after the start,
			 * at once when the one before ended later. */
			off = run_start + k * every_ns - mono();
			if (off < 0)
				off = 0;
		} else if (jitter_ns > 0) {
			off += (int64_t)(next_rand(&rs) % (uint64_t)(2 * jitter_ns + 1)) - jitter_ns;
		}
		int64_t rest = deadline - mono();
		if (rest < off)
			off = rest > 0 ? rest : 0;
		sleep_ns(off);
	}
	w->sink = x;
	return NULL;
}

static int64_t process_cpu(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* Busy until on_ns of wall time (or on_cpu_ns of thread CPU time) has
 * passed since t0; returns the thread CPU time spent. */
static int64_t burn_for(uint64_t *x, int64_t t0)
{
	int64_t c0 = thread_cpu();
	for (;;) {
		*x = burn_chunk(*x);
		if (on_cpu_ns > 0) {
			if (thread_cpu() - c0 >= on_cpu_ns)
				break;
		} else if (mono() - t0 >= on_ns) {
			break;
		}
	}
	/* CPU clock (a system call, where a throttled task may be stopped)
	 * before the wall clock, so that a stall counts. */
	return thread_cpu() - c0;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {ns / 1000000000, ns % 1000000000};
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void *periodic_work(void *arg)
{
	struct worker *w = arg;
	int64_t th = w - workers;
	uint64_t x = (uint64_t)th + 1;
	for (int64_t i = 0; i < iterations; i++) {
		int64_t t0 = mono();
		int64_t cpu = burn_for(&x, t0);
		int64_t t1 = mono();
		record(w, t0, t1 - t0, cpu);
		if (!quiet) {
			char stamp[32] = "";
			time_t now = time(NULL);
			struct tm tm;
			if (localtime_r(&now, &tm))
				strftime(stamp, sizeof stamp, "%Y/%m/%d %H:%M:%S", &tm);
			char prefix[32] = "";
			if (nworkers > 1)
				snprintf(prefix, sizeof prefix, "{%lld}", (long long)th);
			int64_t t2 = mono();
			pthread_mutex_lock(&out_mu);
			printf("%s %s[%lld] burn took %lldms, real time so far: %lldms, cpu time so far: %lldms\n",
			       stamp, prefix, (long long)i, (long long)((t1 - t0 + 500000) / 1000000),
			       (long long)((t2 - run_start) / 1000000), (long long)(process_cpu() / 1000000));
			fflush(stdout);
			pthread_mutex_unlock(&out_mu);
		}
		if (i < iterations - 1)
			sleep_ns(off_ns);
	}
	w->sink = x;
	return NULL;
}

/* Keep the whole process on the last n CPUs of its mask when it has more,
 * as the Go workload does (CPU 0 usually takes most interrupts). */
static void pin_last(int n)
{
	cpu_set_t set, want;
	if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) <= n)
		return;
	CPU_ZERO(&want);
	for (int c = CPU_SETSIZE - 1, k = 0; c >= 0 && k < n; c--)
		if (CPU_ISSET(c, &set)) {
			CPU_SET(c, &want);
			k++;
		}
	sched_setaffinity(0, sizeof want, &want);
}

static int write_all(int fd, const void *p, size_t len)
{
	const char *b = p;
	while (len > 0) {
		ssize_t k = write(fd, b, len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += k;
		len -= (size_t)k;
	}
	return 0;
}

static int parse(const char *s, int64_t min, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min)
		return -1;
	*out = v;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: cfsprobe-engine parallel THREADS DURATION_NS MAX_PRIME EVENTS PIN\n"
			"       cfsprobe-engine bursty THREADS DURATION_NS ON_NS ON_CPU_NS OFF_NS JITTER_NS SEED PIN EVERY_NS\n"
			"       cfsprobe-engine periodic THREADS ITERATIONS BURN_NS BURN_CPU_NS SLEEP_NS QUIET\n");
}

int main(int argc, char **argv)
{
	int64_t threads, duration, pin = 0;
	void *(*fn)(void *) = work;
	if (argc == 7 && strcmp(argv[1], "parallel") == 0) {
		if (parse(argv[2], 1, &threads) || threads > 4096 || parse(argv[3], 1, &duration) ||
		    parse(argv[4], 3, &max_prime) || parse(argv[5], 0, &events) || parse(argv[6], 0, &pin)) {
			usage();
			return 2;
		}
	} else if (argc == 11 && strcmp(argv[1], "bursty") == 0) {
		fn = burst_work;
		if (parse(argv[2], 1, &threads) || threads > 4096 || parse(argv[3], 1, &duration) ||
		    parse(argv[4], 0, &on_ns) || parse(argv[5], 0, &on_cpu_ns) || on_ns + on_cpu_ns == 0 ||
		    parse(argv[6], 0, &off_ns) || parse(argv[7], 0, &jitter_ns) || jitter_ns > off_ns ||
		    parse(argv[8], 0, &seed) || parse(argv[9], 0, &pin) || parse(argv[10], 0, &every_ns) ||
		    (every_ns > 0 && off_ns + jitter_ns > 0)) {
			usage();
			return 2;
		}
	} else if (argc == 8 && strcmp(argv[1], "periodic") == 0) {
		fn = periodic_work;
		if (parse(argv[2], 1, &threads) || threads > 4096 || parse(argv[3], 1, &iterations) ||
		    parse(argv[4], 0, &on_ns) || parse(argv[5], 0, &on_cpu_ns) || on_ns + on_cpu_ns == 0 ||
		    parse(argv[6], 0, &off_ns) || parse(argv[7], 0, &quiet)) {
			usage();
			return 2;
		}
		duration = INT64_MAX / 2;
	} else {
		usage();
		return 2;
	}
	nworkers = threads;
	const char *fds = getenv("CFSPROBE_RESULT_FD");
	int fd = fds ? atoi(fds) : -1;
	if (pin)
		pin_last((int)threads);

	/* Room for 4M events per thread (96 MiB of address space, touched
	 * only as used); a program with many threads gets less each. */
	int64_t cap = 4 << 20;
	if (threads > 16)
		cap = (64 << 20) / threads;
	struct worker *ws = workers = calloc((size_t)threads, sizeof *ws);
	if (!ws) {
		perror("cfsprobe-engine");
		return 1;
	}
	for (int64_t i = 0; i < threads; i++) {
		void *m = mmap(NULL, (size_t)cap * sizeof(struct rec), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			perror("cfsprobe-engine: mmap");
			return 1;
		}
		ws[i].recs = m;
		ws[i].cap = cap;
	}
	int64_t start_cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	int64_t start = mono();
	run_start = start;
	deadline = start + duration;
	for (int64_t i = 0; i < threads; i++) {
		int err = pthread_create(&ws[i].tid, NULL, fn, &ws[i]);
		if (err) {
			fprintf(stderr, "cfsprobe-engine: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	uint64_t primes = 0;
	int64_t dropped = 0;
	for (int64_t i = 0; i < threads; i++) {
		pthread_join(ws[i].tid, NULL);
		primes += ws[i].sink;
		dropped |= ws[i].dropped;
	}
	int64_t end = mono();
	int64_t self = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	sink = primes;
	if (fd < 0)
		return 0;
	int64_t head[6] = {start, end, start_cpu, self, threads, dropped};
	if (write_all(fd, "CFSPENG3", 8) || write_all(fd, head, sizeof head))
		goto fail;
	for (int64_t i = 0; i < threads; i++)
		if (write_all(fd, &ws[i].n, sizeof ws[i].n) ||
		    write_all(fd, ws[i].recs, (size_t)ws[i].n * sizeof(struct rec)))
			goto fail;
	return 0;
fail:
	perror("cfsprobe-engine: write result");
	return 1;
}
