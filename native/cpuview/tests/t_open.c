/* open() of the CPU files. */
#include "open_door.h"

static int op(const char *path, int flags)
{
	return open(path, flags);
}

int main(void)
{
	return open_door_main("open", op);
}
