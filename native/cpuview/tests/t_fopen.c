/* fopen() of the CPU files, read with stdio as most programs do. */
#include "common.h"

static void one(const struct sysfile *f, const char *mode, int cloexec)
{
	char what[128];
	FILE *fp = fopen(f->path, mode);
	snprintf(what, sizeof what, "fopen(%s, \"%s\") returns a FILE", f->path, mode);
	check_true(what, fp != NULL);
	if (!fp)
		return;
	size_t n = fread(filebuf, 1, sizeof filebuf - 1, fp);
	filebuf[n] = 0;
	check_content("fopen", f, filebuf);
	check_true("  close-on-exec as asked", !!(fcntl(fileno(fp), F_GETFD) & FD_CLOEXEC) == !!cloexec);
	if (!f->cpuinfo) {
		char line[256] = "";
		rewind(fp);
		check_true("  rewind and fgets", fgets(line, sizeof line, fp) && strcmp(line, filebuf) == 0);
	}
	fclose(fp);
}

int main(void)
{
	prog = "fopen";
	for (size_t i = 0; i < sizeof sysfiles / sizeof sysfiles[0]; i++) {
		one(&sysfiles[i], "r", 0);
		one(&sysfiles[i], "re", 1);
		one(&sysfiles[i], "rb", 0);
	}
	FILE *fp = fopen("/proc/self/status", "r");
	check_true("another file opens as usual", fp && fgets(filebuf, 100, fp) && strncmp(filebuf, "Name:", 5) == 0);
	if (fp)
		fclose(fp);
	errno = 0;
	check_true("a missing file fails with ENOENT", !fopen("/nonexistent/cpuview", "r") && errno == ENOENT);
	errno = 0;
	fp = fopen("/sys/devices/system/cpu/online", "r+");
	check_true("\"r+\" goes to the real file (sysfs refuses: EACCES)", !fp && errno == EACCES);
	if (fp)
		fclose(fp);
	if (expect_view()) {
		errno = 4242;
		fp = fopen("/proc/cpuinfo", "r");
		check_true("errno is left alone", errno == 4242);
		if (fp)
			fclose(fp);
	}
	return finish();
}
