/* get_nprocs_conf() */
#include "common.h"
#include <sys/sysinfo.h>

int main(void)
{
	prog = "get_nprocs_conf";
	check_int("get_nprocs_conf()", get_nprocs_conf(), expect_int("EXPECT_CONF"));
	if (expect_view()) {
		errno = 4242;
		get_nprocs_conf();
		check_int("errno after get_nprocs_conf", errno, 4242);
	}
	return finish();
}
