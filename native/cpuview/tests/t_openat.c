/* openat() of the CPU files, with AT_FDCWD and with a directory fd (an
 * absolute path ignores it). */
#include "open_door.h"

static int dirfd_;

static int op(const char *path, int flags)
{
	return openat(dirfd_, path, flags);
}

int main(void)
{
	dirfd_ = AT_FDCWD;
	int rc = open_door_main("openat", op);
	dirfd_ = open("/tmp", O_RDONLY | O_DIRECTORY);
	rc |= open_door_main("openat(dirfd)", op);
	return rc;
}
