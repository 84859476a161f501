/* get_nprocs() */
#include "common.h"
#include <sys/sysinfo.h>

int main(void)
{
	prog = "get_nprocs";
	check_int("get_nprocs()", get_nprocs(), expect_int("EXPECT_ONLN"));
	if (expect_view()) {
		errno = 4242;
		get_nprocs();
		check_int("errno after get_nprocs", errno, 4242);
	}
	return finish();
}
