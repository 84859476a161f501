/* Helpers shared by the door tests. Each test reads what it expects from the
 * environment (run.sh computes it from the kernel's own files, and from
 * CFSPROBE_CPUS when the library is preloaded), checks one door, prints one
 * "ok" or "FAIL" line per check and exits 1 on any failure.
 *
 *   EXPECT_ONLN       sysconf(_SC_NPROCESSORS_ONLN), get_nprocs()
 *   EXPECT_CONF       sysconf(_SC_NPROCESSORS_CONF), get_nprocs_conf()
 *   EXPECT_AFFINITY   the affinity mask as a cpu list ("0-1")
 *   EXPECT_ONLINE     /sys/devices/system/cpu/online without its newline
 *   EXPECT_POSSIBLE   /sys/devices/system/cpu/possible
 *   EXPECT_PRESENT    /sys/devices/system/cpu/present
 *   EXPECT_CPUINFO    the processors of /proc/cpuinfo as a cpu list
 *   EXPECT_VIEW       1 when the library is expected to answer (errno checks)
 */
#ifndef CPUVIEW_TEST_COMMON_H
#define CPUVIEW_TEST_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Not every test uses every helper. */
#define HELPER static __attribute__((unused))

static int failures;
static const char *prog = "test";

HELPER const char *expect(const char *name)
{
	const char *v = getenv(name);
	if (!v) {
		fprintf(stderr, "%s: %s is not set (run me from run.sh)\n", prog, name);
		exit(2);
	}
	return v;
}

HELPER long expect_int(const char *name)
{
	return strtol(expect(name), NULL, 10);
}

HELPER int expect_view(void)
{
	const char *v = getenv("EXPECT_VIEW");
	return v && strcmp(v, "1") == 0;
}

HELPER void check_int(const char *what, long got, long want)
{
	if (got == want) {
		printf("ok   %s: %s = %ld\n", prog, what, got);
	} else {
		printf("FAIL %s: %s = %ld, want %ld\n", prog, what, got, want);
		failures++;
	}
}

HELPER void check_str(const char *what, const char *got, const char *want)
{
	if (strcmp(got, want) == 0) {
		printf("ok   %s: %s = \"%s\"\n", prog, what, got);
	} else {
		printf("FAIL %s: %s = \"%s\", want \"%s\"\n", prog, what, got, want);
		failures++;
	}
}

HELPER void check_true(const char *what, int cond)
{
	if (cond) {
		printf("ok   %s: %s\n", prog, what);
	} else {
		printf("FAIL %s: %s\n", prog, what);
		failures++;
	}
}

HELPER int finish(void)
{
	if (failures)
		printf("FAIL %s: %d check(s) failed\n", prog, failures);
	return failures ? 1 : 0;
}

/* bits_list formats the set bits of a byte array as a cpu list. */
HELPER void bits_list(const unsigned char *m, size_t len, char *out, size_t cap)
{
	size_t n = 0, nbits = len * 8;
	out[0] = 0;
	for (size_t i = 0; i < nbits;) {
		if (!((m[i / 8] >> (i % 8)) & 1)) {
			i++;
			continue;
		}
		size_t j = i;
		while (j + 1 < nbits && ((m[(j + 1) / 8] >> ((j + 1) % 8)) & 1))
			j++;
		if (j > i)
			n += (size_t)snprintf(out + n, cap - n, "%s%zu-%zu", n ? "," : "", i, j);
		else
			n += (size_t)snprintf(out + n, cap - n, "%s%zu", n ? "," : "", i);
		if (n >= cap)
			return;
		i = j + 1;
	}
}

/* read_fd reads an fd to its end (one byte at a time when tiny != 0, which
 * checks that the content does not depend on the read size). */
HELPER long read_fd(int fd, char *buf, size_t cap, int tiny)
{
	size_t len = 0;
	while (len < cap - 1) {
		ssize_t r = read(fd, buf + len, tiny ? 1 : cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = 0;
	return (long)len;
}

/* cpuinfo_list: the "processor : k" ids of a /proc/cpuinfo text as a list. */
HELPER void cpuinfo_list(const char *text, char *out, size_t cap)
{
	unsigned char m[1024];
	memset(m, 0, sizeof m);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		unsigned k;
		if (strncmp(p, "processor", 9) == 0 && sscanf(p, "processor : %u", &k) == 1 && k < sizeof m * 8)
			m[k / 8] |= (unsigned char)(1u << (k % 8));
	}
	bits_list(m, sizeof m, out, cap);
}

/* Which files the open tests look at, and what each should hold. */
struct sysfile {
	const char *path;
	const char *env;
	int cpuinfo;
};
static const struct sysfile sysfiles[] = {
	{"/sys/devices/system/cpu/online", "EXPECT_ONLINE", 0},
	{"/sys/devices/system/cpu/possible", "EXPECT_POSSIBLE", 0},
	{"/sys/devices/system/cpu/present", "EXPECT_PRESENT", 0},
	{"/proc/cpuinfo", "EXPECT_CPUINFO", 1},
};

static char filebuf[1 << 20];

/* check_content checks what was read from one of the sysfiles. */
HELPER void check_content(const char *door, const struct sysfile *f, const char *text)
{
	char what[256], got[4096];
	snprintf(what, sizeof what, "%s(%s)", door, f->path);
	if (f->cpuinfo) {
		cpuinfo_list(text, got, sizeof got);
		check_str(what, got, expect(f->env));
		size_t n = strlen(text);
		check_true("  /proc/cpuinfo ends with a blank line", n >= 2 && text[n - 1] == '\n' && text[n - 2] == '\n');
	} else {
		size_t n = strlen(text);
		check_true("  the cpu list ends with a newline", n > 0 && text[n - 1] == '\n');
		snprintf(got, sizeof got, "%.*s", (int)(n ? n - 1 : 0), text);
		check_str(what, got, expect(f->env));
	}
}

/* check_fd checks an fd opened read-only from one of the sysfiles: its
 * content (read whole and byte by byte), that it is read-only, its
 * close-on-exec flag, and that it can be read again after lseek. */
HELPER void check_fd(const char *door, const struct sysfile *f, int fd, int cloexec)
{
	char what[256];
	snprintf(what, sizeof what, "%s(%s) returns an fd", door, f->path);
	check_true(what, fd >= 0);
	if (fd < 0)
		return;
	if (read_fd(fd, filebuf, sizeof filebuf, 0) < 0) {
		check_true("  read", 0);
		close(fd);
		return;
	}
	check_content(door, f, filebuf);
	check_true("  the fd is read-only (F_GETFL)", (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
	check_true("  close-on-exec as asked", !!(fcntl(fd, F_GETFD) & FD_CLOEXEC) == !!cloexec);
	if (!f->cpuinfo) {
		/* /proc/cpuinfo's "cpu MHz" changes between reads; the lists do not */
		static char again[1 << 16];
		check_true("  lseek(0) and read again, one byte at a time",
			   lseek(fd, 0, SEEK_SET) == 0 && read_fd(fd, again, sizeof again, 1) >= 0 &&
				   strcmp(again, filebuf) == 0);
	}
	close(fd);
}

#endif
