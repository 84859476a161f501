/* CFSPROBE_CPUS_FOLLOW: the view follows the quota of fake cgroup dirs as
 * their files change, with each rounding, re-read at most once a second,
 * and falls back to CFSPROBE_CPUS when there is no quota or the files are
 * unreadable. run.sh sets
 *   CFSPROBE_CPUS=$EXPECT_REAL CFSPROBE_CPUS_FOLLOW=v2,$FOLLOW_DIR/g2:v1,$FOLLOW_DIR/g1
 * and CFSPROBE_CPUS_ROUND; EXPECT_REAL (>= 2) is the size of the real mask. */
#include "common.h"
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>

static char dir[4096];
static long real_n, start_n;
static int mode; /* 0 floor, 1 ceil, 2 nearest */

static void put(const char *name, const char *content)
{
	char path[4200], tmp[4300];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fputs(content, f) == EOF || fclose(f) == EOF || rename(tmp, path) != 0) {
		perror(path);
		exit(2);
	}
}

static void rm(const char *name)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	unlink(path);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long clamp(long n)
{
	if (n > real_n)
		n = real_n;
	return n < 1 ? 1 : n;
}

/* every door must agree */
static void check_all(const char *what, long want)
{
	char w[256];
	snprintf(w, sizeof w, "%s: sysconf(_SC_NPROCESSORS_ONLN)", what);
	check_int(w, sysconf(_SC_NPROCESSORS_ONLN), want);
	snprintf(w, sizeof w, "%s: get_nprocs()", what);
	check_int(w, get_nprocs(), want);
	cpu_set_t s;
	sched_getaffinity(0, sizeof s, &s);
	snprintf(w, sizeof w, "%s: CPU_COUNT(sched_getaffinity)", what);
	check_int(w, CPU_COUNT(&s), want);
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY);
	long n = -1;
	if (fd >= 0 && read_fd(fd, filebuf, sizeof filebuf, 0) > 0) {
		/* count the CPUs of the list */
		n = 0;
		for (char *p = filebuf; *p && *p != '\n';) {
			long a = strtol(p, &p, 10), b = a;
			if (*p == '-')
				b = strtol(p + 1, &p, 10);
			n += b - a + 1;
			if (*p == ',')
				p++;
		}
	}
	if (fd >= 0)
		close(fd);
	snprintf(w, sizeof w, "%s: CPUs in /sys/devices/system/cpu/online", what);
	check_int(w, n, want);
}

/* step writes the files, waits past the next refresh and checks. */
static void step(const char *what, const char *cpumax, const char *v1quota, long want[3])
{
	if (cpumax)
		put("g2/cpu.max", cpumax);
	else
		rm("g2/cpu.max");
	if (v1quota) {
		put("g1/cpu.cfs_quota_us", v1quota);
		put("g1/cpu.cfs_period_us", "100000\n");
	} else {
		rm("g1/cpu.cfs_quota_us");
		rm("g1/cpu.cfs_period_us");
	}
	sleep_ms(1150);
	check_all(what, clamp(want[mode]));
}

int main(void)
{
	prog = "follow";
	snprintf(dir, sizeof dir, "%s", expect("FOLLOW_DIR"));
	real_n = expect_int("EXPECT_REAL");
	start_n = strtol(expect("CFSPROBE_CPUS"), NULL, 10);
	const char *r = getenv("CFSPROBE_CPUS_ROUND");
	mode = !r || strcmp(r, "floor") == 0 ? 0 : strcmp(r, "ceil") == 0 ? 1 : 2;
	printf("     follow: rounding %s, %ld CPUs in the mask, CFSPROBE_CPUS=%ld\n",
	       (const char *[]){"floor", "ceil", "nearest"}[mode], real_n, start_n);

	/* run.sh starts us with no quota anywhere */
	check_all("no quota at start: CFSPROBE_CPUS", clamp(start_n));

	long one[3] = {1, 1, 1};
	step("v2 1.0 CPU", "100000 100000\n", "-1\n", one);

	/* Cached: a change is not seen before a second has passed. */
	put("g2/cpu.max", "max 100000\n");
	check_int("a change within the second is not seen yet", sysconf(_SC_NPROCESSORS_ONLN), 1);

	step("v2 1.5 CPUs", "150000 100000\n", "-1\n", (long[3]){1, 2, 2});
	step("v2 1.4 CPUs", "140000 100000\n", "-1\n", (long[3]){1, 2, 1});
	step("v2 0.5 CPUs (at least 1)", "50000 100000\n", "-1\n", one);
	step("v1 1.0 CPU, v2 no limit", "max 100000\n", "100000\n", one);
	step("smallest of v2 2.5 and v1 1.2", "250000 100000\n", "120000\n", (long[3]){1, 2, 1});
	step("v2 10 CPUs: at most the real count", "1000000 100000\n", "-1\n", (long[3]){10, 10, 10});
	long start[3] = {start_n, start_n, start_n};
	step("garbage in cpu.max: CFSPROBE_CPUS", "abc\n", "-1\n", start);
	step("no quota anywhere: CFSPROBE_CPUS", "max 100000\n", "-1\n", start);
	step("unreadable files: CFSPROBE_CPUS", NULL, NULL, start);
	step("files back: follows again", "100000 100000\n", NULL, one);
	return finish();
}
