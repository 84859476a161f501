/* fopen64() of the CPU files. */
#include "fopen_door.h"

static FILE *op(const char *path, const char *mode)
{
	return fopen64(path, mode);
}

int main(void)
{
	return fopen_door_main("fopen64", op);
}
