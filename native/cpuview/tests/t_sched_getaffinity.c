/* sched_getaffinity(): the view for this process and its threads (pid 0,
 * getpid(), gettid(), another thread's tid), in masks of several sizes;
 * other processes and errors as glibc gives them. */
#include "common.h"
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static pid_t other_tid;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	other_tid = (pid_t)syscall(SYS_gettid);
	pthread_cond_broadcast(&cv);
	while (!done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void check_pid(const char *what, pid_t pid, size_t size, const char *want)
{
	unsigned char *m = malloc(size + 8);
	char list[4096], w[160];
	memset(m, 0xa5, size + 8);
	int r = sched_getaffinity(pid, size, (cpu_set_t *)m);
	snprintf(w, sizeof w, "sched_getaffinity(%s, %zu) returns 0", what, size);
	check_true(w, r == 0);
	bits_list(m, size, list, sizeof list);
	snprintf(w, sizeof w, "sched_getaffinity(%s, %zu)", what, size);
	check_str(w, list, want);
	check_true("  bytes past the size are untouched", m[size] == 0xa5 && m[size + 7] == 0xa5);
	free(m);
}

int main(void)
{
	prog = "sched_getaffinity";
	const char *want = expect("EXPECT_AFFINITY");
	pthread_t th;
	pthread_create(&th, NULL, thread, NULL);
	pthread_mutex_lock(&mu);
	while (!other_tid)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);

	size_t sizes[] = {sizeof(cpu_set_t), CPU_ALLOC_SIZE(8192)};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		check_pid("0", 0, sizes[i], want);
		check_pid("getpid()", getpid(), sizes[i], want);
		check_pid("gettid()", (pid_t)syscall(SYS_gettid), sizes[i], want);
		check_pid("another thread", other_tid, sizes[i], want);
	}

	/* Another process is not us: its real mask, as the kernel gives it. */
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	cpu_set_t raw;
	CPU_ZERO(&raw);
	long n = syscall(SYS_sched_getaffinity, child, sizeof raw, &raw);
	char rawlist[4096];
	bits_list((unsigned char *)&raw, n > 0 ? (size_t)n : 0, rawlist, sizeof rawlist);
	check_pid("a child process", child, sizeof(cpu_set_t), rawlist);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);

	cpu_set_t s;
	errno = 0;
	check_true("size 0 fails with EINVAL", sched_getaffinity(0, 0, &s) == -1 && errno == EINVAL);
	errno = 0;
	check_true("a missing pid fails with ESRCH", sched_getaffinity(0x3fffffff, sizeof s, &s) == -1 && errno == ESRCH);
	cpu_set_t *volatile nul = NULL;
	errno = 0;
	check_true("a NULL mask fails with EFAULT", sched_getaffinity(0, sizeof s, nul) == -1 && errno == EFAULT);
	if (expect_view()) {
		errno = 4242;
		sched_getaffinity(0, sizeof s, &s);
		check_int("errno after sched_getaffinity", errno, 4242);
	}

	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	return finish();
}
