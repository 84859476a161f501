/* Stress: STRESS_THREADS threads call every interposed function for
 * STRESS_SECONDS while SIGALRM, from setitimer every 200 us, interrupts
 * them; its handler calls the async-signal-safe doors (sysconf,
 * get_nprocs, get_nprocs_conf, sched_getaffinity, open/openat + read +
 * close of the CPU files and /proc/cpuinfo) and checks their answers. Any
 * wrong answer, crash, deadlock (run.sh puts a timeout on us) or sanitizer
 * report fails. With STRESS_FLIP=<cpu.max path>, one more thread rewrites
 * that file (atomically, between two quotas that round to the same N) so
 * that refreshes run concurrently with everything else. One more thread
 * forks children that check the answers too. */
#include "common.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

extern int __open_2(const char *path, int flags);
extern int __openat64_2(int dfd, const char *path, int flags);

static long want_onln, want_conf, want_aff;
static const char *want_online, *want_cpuinfo;
static atomic_int stop;
static atomic_long calls, sig_calls, sigs, forks;
static atomic_long bad[32];
static const char *bad_name[32];

#define BAD(i, name)                                        \
	do {                                                \
		bad_name[i] = name;                         \
		atomic_fetch_add_explicit(&bad[i], 1, memory_order_relaxed); \
	} while (0)

/* count CPUs in a cpu list ("0-1,3\n"), async-signal-safe */
static long list_count(const char *p)
{
	long n = 0;
	while (*p >= '0' && *p <= '9') {
		long a = 0, b;
		while (*p >= '0' && *p <= '9')
			a = a * 10 + (*p++ - '0');
		b = a;
		if (*p == '-') {
			p++;
			b = 0;
			while (*p >= '0' && *p <= '9')
				b = b * 10 + (*p++ - '0');
		}
		n += b - a + 1;
		if (*p == ',')
			p++;
	}
	return *p == '\n' ? n : -1;
}

/* count "processor" lines, async-signal-safe */
static long count_processors(const char *p, size_t len)
{
	long n = 0;
	for (size_t i = 0; i + 9 <= len; i++)
		if ((i == 0 || p[i - 1] == '\n') && memcmp(p + i, "processor", 9) == 0)
			n++;
	return n;
}

static long read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0 || len + (size_t)r >= cap - 1) {
			len += (size_t)(r > 0 ? r : 0);
			break;
		}
		len += (size_t)r;
	}
	buf[len] = 0;
	return (long)len;
}

static void check_list_fd(int fd, int slot, char *buf, size_t cap)
{
	if (fd < 0) {
		BAD(slot, "open of a cpu list failed");
		return;
	}
	if (read_all(fd, buf, cap) <= 0 || list_count(buf) != want_aff)
		BAD(slot + 1, "cpu list has the wrong CPUs");
	close(fd);
}

static void check_cpuinfo_fd(int fd, int slot, char *buf, size_t cap)
{
	if (fd < 0) {
		BAD(slot, "open of /proc/cpuinfo failed");
		return;
	}
	long n = read_all(fd, buf, cap);
	if (n <= 0 || count_processors(buf, (size_t)n) != want_aff)
		BAD(slot + 1, "/proc/cpuinfo has the wrong processors");
	close(fd);
}

static void on_alarm(int sig)
{
	/* SIGALRM is process-directed: handlers run in several threads at once */
	static __thread char buf[1 << 16];
	static atomic_uint turn;
	int e = errno;
	(void)sig;
	atomic_fetch_add_explicit(&sigs, 1, memory_order_relaxed);
	if (sysconf(_SC_NPROCESSORS_ONLN) != want_onln)
		BAD(0, "handler: sysconf(_SC_NPROCESSORS_ONLN)");
	if (sysconf(_SC_NPROCESSORS_CONF) != want_conf)
		BAD(1, "handler: sysconf(_SC_NPROCESSORS_CONF)");
	if (get_nprocs() != want_onln)
		BAD(2, "handler: get_nprocs");
	if (get_nprocs_conf() != want_conf)
		BAD(3, "handler: get_nprocs_conf");
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof s, &s) != 0 || CPU_COUNT(&s) != want_aff)
		BAD(4, "handler: sched_getaffinity");
	switch (atomic_fetch_add_explicit(&turn, 1, memory_order_relaxed) % 3) {
	case 0:
		check_list_fd(open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC), 5, buf, sizeof buf);
		break;
	case 1:
		check_list_fd(openat(AT_FDCWD, "/sys/devices/system/cpu/possible", O_RDONLY), 5, buf, sizeof buf);
		break;
	default:
		check_cpuinfo_fd(open("/proc/cpuinfo", O_RDONLY), 7, buf, sizeof buf);
	}
	atomic_fetch_add_explicit(&sig_calls, 6, memory_order_relaxed);
	errno = e;
}

static void *worker(void *arg)
{
	static const char *lists[] = {"/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible",
				      "/sys/devices/system/cpu/present"};
	char *buf = malloc(1 << 16);
	long id = (long)arg, n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (sysconf(_SC_NPROCESSORS_ONLN) != want_onln)
			BAD(10, "thread: sysconf(_SC_NPROCESSORS_ONLN)");
		if (sysconf(_SC_NPROCESSORS_CONF) != want_conf)
			BAD(11, "thread: sysconf(_SC_NPROCESSORS_CONF)");
		if (sysconf(_SC_PAGESIZE) <= 0)
			BAD(12, "thread: sysconf(_SC_PAGESIZE)");
		if (get_nprocs() != want_onln)
			BAD(13, "thread: get_nprocs");
		if (get_nprocs_conf() != want_conf)
			BAD(14, "thread: get_nprocs_conf");
		cpu_set_t s;
		pid_t pids[] = {0, getpid(), (pid_t)syscall(SYS_gettid)};
		for (int i = 0; i < 3; i++)
			if (sched_getaffinity(pids[i], sizeof s, &s) != 0 || CPU_COUNT(&s) != want_aff)
				BAD(15, "thread: sched_getaffinity");
		if (pthread_getaffinity_np(pthread_self(), sizeof s, &s) != 0 || CPU_COUNT(&s) != want_aff)
			BAD(16, "thread: pthread_getaffinity_np");
		const char *l = lists[(id + n) % 3];
		switch (n % 6) {
		case 0:
			check_list_fd(open(l, O_RDONLY), 17, buf, 1 << 16);
			break;
		case 1:
			check_list_fd(open64(l, O_RDONLY | O_CLOEXEC), 17, buf, 1 << 16);
			break;
		case 2:
			check_list_fd(openat(AT_FDCWD, l, O_RDONLY), 17, buf, 1 << 16);
			break;
		case 3:
			check_list_fd(openat64(AT_FDCWD, l, O_RDONLY), 17, buf, 1 << 16);
			break;
		case 4:
			check_list_fd(__open_2(l, O_RDONLY), 17, buf, 1 << 16);
			break;
		default:
			check_list_fd(__openat64_2(AT_FDCWD, l, O_RDONLY), 17, buf, 1 << 16);
		}
		if (n % 4 == 0)
			check_cpuinfo_fd(open("/proc/cpuinfo", O_RDONLY), 19, buf, 1 << 16);
		FILE *f = (n & 1) ? fopen(l, "re") : fopen64("/proc/cpuinfo", "r");
		if (!f) {
			BAD(21, "thread: fopen failed");
		} else {
			size_t len = fread(buf, 1, (1 << 16) - 1, f);
			buf[len] = 0;
			if ((n & 1) ? list_count(buf) != want_aff : count_processors(buf, len) != want_aff)
				BAD(22, "thread: fopen content");
			fclose(f);
		}
		n++;
		atomic_fetch_add_explicit(&calls, 17, memory_order_relaxed);
	}
	free(buf);
	return NULL;
}

/* forker: children forked in the middle of it all (another thread may hold
 * the refresh flag at that moment) must get the same answers. */
static void *forker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		pid_t pid = fork();
		if (pid == 0) {
			char b[256];
			cpu_set_t s;
			int ok = sysconf(_SC_NPROCESSORS_ONLN) == want_onln && get_nprocs() == want_onln &&
				 sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) == want_aff;
			int fd = open("/sys/devices/system/cpu/online", O_RDONLY);
			ok = ok && fd >= 0 && read_all(fd, b, sizeof b) > 0 && list_count(b) == want_aff;
			_exit(ok ? 0 : 1);
		}
		if (pid < 0) {
			BAD(23, "fork failed");
			break;
		}
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			BAD(24, "a forked child got wrong answers");
		atomic_fetch_add(&forks, 1);
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static const char *flip_path;

static void *flipper(void *arg)
{
	(void)arg;
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", flip_path);
	for (long n = 0; !atomic_load(&stop); n++) {
		FILE *f = fopen(tmp, "w");
		if (f) {
			fputs(n & 1 ? "150000 100000\n" : "100000 100000\n", f);
			fclose(f);
			rename(tmp, flip_path);
		}
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(void)
{
	prog = "stress";
	want_onln = expect_int("EXPECT_ONLN");
	want_conf = expect_int("EXPECT_CONF");
	want_online = expect("EXPECT_ONLINE");
	want_cpuinfo = expect("EXPECT_CPUINFO");
	want_aff = expect_int("EXPECT_REAL");
	const char *e = getenv("EXPECT_VIEW");
	if (e && strcmp(e, "1") == 0)
		want_aff = want_onln; /* the view: N CPUs everywhere */
	int nthreads = getenv("STRESS_THREADS") ? atoi(getenv("STRESS_THREADS")) : 8;
	double secs = getenv("STRESS_SECONDS") ? atof(getenv("STRESS_SECONDS")) : 2;
	flip_path = getenv("STRESS_FLIP");
	(void)want_online;
	(void)want_cpuinfo;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_REAL, &it, NULL);

	pthread_t th[65], fl, fk;
	if (nthreads < 1 || nthreads > 64)
		nthreads = 8;
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	if (flip_path)
		pthread_create(&fl, NULL, flipper, NULL);
	pthread_create(&fk, NULL, forker, NULL);
	struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	if (flip_path)
		pthread_join(fl, NULL);
	pthread_join(fk, NULL);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);

	long total = 0;
	for (int i = 0; i < 32; i++) {
		long b = atomic_load(&bad[i]);
		if (b) {
			printf("FAIL stress: [%d] %s: %ld times\n", i, bad_name[i], b);
			total += b;
		}
	}
	printf("     stress: %d threads, %.1f s, %ld calls in threads, %ld signals handled (%ld calls in the handler), "
	       "%ld children forked%s\n",
	       nthreads, secs, atomic_load(&calls), atomic_load(&sigs), atomic_load(&sig_calls), atomic_load(&forks),
	       flip_path ? ", quota file rewritten every 5 ms" : "");
	check_true("every answer right", total == 0);
	check_true("the signal handler ran at least 100 times", atomic_load(&sigs) >= 100);
	return finish();
}
