/* The _FORTIFY_SOURCE doors: a program built with -D_FORTIFY_SOURCE that
 * calls open(path, flags) with flags unknown at compile time calls
 * __open_2 (and __open64_2, __openat_2, __openat64_2). */
#include "open_door.h"

extern int __open_2(const char *path, int flags);
extern int __open64_2(const char *path, int flags);
extern int __openat_2(int dfd, const char *path, int flags);
extern int __openat64_2(int dfd, const char *path, int flags);

static int op_open_2(const char *path, int flags)
{
	return __open_2(path, flags);
}
static int op_open64_2(const char *path, int flags)
{
	return __open64_2(path, flags);
}
static int op_openat_2(const char *path, int flags)
{
	return __openat_2(AT_FDCWD, path, flags);
}
static int op_openat64_2(const char *path, int flags)
{
	return __openat64_2(AT_FDCWD, path, flags);
}

int main(void)
{
	int rc = open_door_main("__open_2", op_open_2);
	rc |= open_door_main("__open64_2", op_open64_2);
	rc |= open_door_main("__openat_2", op_openat_2);
	rc |= open_door_main("__openat64_2", op_openat64_2);
	return rc;
}
