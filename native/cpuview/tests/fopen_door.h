/* The checks both stdio door tests (fopen, fopen64) run; the test supplies
 * `op`, a call of its one door. The CPU files are read with stdio as most
 * programs do. */
#ifndef CPUVIEW_TEST_FOPEN_DOOR_H
#define CPUVIEW_TEST_FOPEN_DOOR_H

#include "common.h"

static void fopen_one(const char *door, FILE *(*op)(const char *, const char *), const struct sysfile *f,
		      const char *mode, int cloexec)
{
	char what[128];
	FILE *fp = op(f->path, mode);
	snprintf(what, sizeof what, "%s(%s, \"%s\") returns a FILE", door, f->path, mode);
	check_true(what, fp != NULL);
	if (!fp)
		return;
	size_t n = fread(filebuf, 1, sizeof filebuf - 1, fp);
	filebuf[n] = 0;
	check_content(door, f, filebuf);
	check_true("  close-on-exec as asked", !!(fcntl(fileno(fp), F_GETFD) & FD_CLOEXEC) == !!cloexec);
	if (!f->cpuinfo) {
		char line[256] = "";
		rewind(fp);
		check_true("  rewind and fgets", fgets(line, sizeof line, fp) && strcmp(line, filebuf) == 0);
	}
	fclose(fp);
}

static int fopen_door_main(const char *door, FILE *(*op)(const char *, const char *))
{
	prog = door;
	for (size_t i = 0; i < sizeof sysfiles / sizeof sysfiles[0]; i++) {
		fopen_one(door, op, &sysfiles[i], "r", 0);
		fopen_one(door, op, &sysfiles[i], "re", 1);
		fopen_one(door, op, &sysfiles[i], "rb", 0);
	}
	FILE *fp = op("/proc/self/status", "r");
	check_true("another file opens as usual", fp && fgets(filebuf, 100, fp) && strncmp(filebuf, "Name:", 5) == 0);
	if (fp)
		fclose(fp);
	errno = 0;
	check_true("a missing file fails with ENOENT", !op("/nonexistent/cpuview", "r") && errno == ENOENT);
	errno = 0;
	fp = op("/sys/devices/system/cpu/online", "r+");
	check_true("\"r+\" goes to the real file (sysfs refuses: EACCES)", !fp && errno == EACCES);
	if (fp)
		fclose(fp);
	if (expect_view()) {
		errno = 4242;
		fp = op("/proc/cpuinfo", "r");
		check_true("errno is left alone", errno == 4242);
		if (fp)
			fclose(fp);
	}
	return finish();
}

#endif
