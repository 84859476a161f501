/* The checks every open-family door test runs; the test supplies `op`, a
 * call of its one door. */
#ifndef CPUVIEW_TEST_OPEN_DOOR_H
#define CPUVIEW_TEST_OPEN_DOOR_H

#include "common.h"

static int open_door_main(const char *door, int (*op)(const char *path, int flags))
{
	prog = door;
	for (size_t i = 0; i < sizeof sysfiles / sizeof sysfiles[0]; i++) {
		check_fd(door, &sysfiles[i], op(sysfiles[i].path, O_RDONLY), 0);
		check_fd(door, &sysfiles[i], op(sysfiles[i].path, O_RDONLY | O_CLOEXEC), 1);
	}

	/* Other files and errors pass through untouched. */
	int fd = op("/proc/self/status", O_RDONLY);
	check_true("another file opens as usual", fd >= 0 && read_fd(fd, filebuf, sizeof filebuf, 0) > 0 &&
							   strncmp(filebuf, "Name:", 5) == 0);
	if (fd >= 0)
		close(fd);
	errno = 0;
	check_true("a missing file fails with ENOENT", op("/nonexistent/cpuview", O_RDONLY) == -1 && errno == ENOENT);
	const char *volatile nul = NULL;
	errno = 0;
	check_true("a NULL path fails with EFAULT", op(nul, O_RDONLY) == -1 && errno == EFAULT);
	errno = 0;
	check_true("O_DIRECTORY on the file fails with ENOTDIR",
		   op("/sys/devices/system/cpu/online", O_RDONLY | O_DIRECTORY) == -1 && errno == ENOTDIR);
	errno = 0;
	check_true("O_RDWR goes to the real file (sysfs refuses: EACCES)",
		   op("/sys/devices/system/cpu/online", O_RDWR) == -1 && errno == EACCES);
	fd = op("/sys/devices/system/cpu/online", O_PATH);
	check_true("O_PATH gives the real file (read fails with EBADF)",
		   fd >= 0 && read(fd, filebuf, 1) == -1 && errno == EBADF);
	if (fd >= 0)
		close(fd);
	if (expect_view()) {
		errno = 4242;
		fd = op("/sys/devices/system/cpu/online", O_RDONLY);
		check_true("errno is left alone", errno == 4242);
		if (fd >= 0)
			close(fd);
	}
	return finish();
}

#endif
