/* sysconf(_SC_NPROCESSORS_ONLN / _CONF); other names pass through. */
#include "common.h"
#include <sys/auxv.h>

int main(void)
{
	prog = "sysconf";
	check_int("sysconf(_SC_NPROCESSORS_ONLN)", sysconf(_SC_NPROCESSORS_ONLN), expect_int("EXPECT_ONLN"));
	check_int("sysconf(_SC_NPROCESSORS_CONF)", sysconf(_SC_NPROCESSORS_CONF), expect_int("EXPECT_CONF"));
	check_int("sysconf(_SC_PAGESIZE) passes through", sysconf(_SC_PAGESIZE), (long)getauxval(AT_PAGESZ));
	check_true("sysconf(_SC_CLK_TCK) passes through", sysconf(_SC_CLK_TCK) > 0);
	errno = 0;
	check_true("sysconf(-1) fails with EINVAL", sysconf(-1) == -1 && errno == EINVAL);
	if (expect_view()) {
		errno = 4242;
		sysconf(_SC_NPROCESSORS_ONLN);
		check_int("errno after sysconf", errno, 4242);
	}
	return finish();
}
