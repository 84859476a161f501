/* open64() of the CPU files. */
#include "open_door.h"

static int op(const char *path, int flags)
{
	return open64(path, flags);
}

int main(void)
{
	return open_door_main("open64", op);
}
