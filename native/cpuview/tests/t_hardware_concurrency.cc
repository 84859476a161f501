// std::thread::hardware_concurrency(): libstdc++ asks get_nprocs().
#include <cstdio>
#include <cstdlib>
#include <thread>

int main()
{
	const char *want = std::getenv("EXPECT_ONLN");
	if (!want) {
		std::fprintf(stderr, "hardware_concurrency: EXPECT_ONLN is not set (run me from run.sh)\n");
		return 2;
	}
	unsigned got = std::thread::hardware_concurrency();
	if (got != std::strtoul(want, nullptr, 10)) {
		std::printf("FAIL hardware_concurrency: std::thread::hardware_concurrency() = %u, want %s\n", got, want);
		return 1;
	}
	std::printf("ok   hardware_concurrency: std::thread::hardware_concurrency() = %u\n", got);
	return 0;
}
