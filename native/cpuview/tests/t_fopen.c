/* fopen() of the CPU files. */
#include "fopen_door.h"

static FILE *op(const char *path, const char *mode)
{
	return fopen(path, mode);
}

int main(void)
{
	return fopen_door_main("fopen", op);
}
