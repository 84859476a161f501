/* pthread_getaffinity_np(): the view for this thread and another one. */
#include "common.h"
#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void check_thread(const char *what, pthread_t th, size_t size, const char *want)
{
	unsigned char *m = calloc(1, size);
	char list[4096], w[160];
	int r = pthread_getaffinity_np(th, size, (cpu_set_t *)m);
	snprintf(w, sizeof w, "pthread_getaffinity_np(%s, %zu) returns 0", what, size);
	check_true(w, r == 0);
	bits_list(m, size, list, sizeof list);
	snprintf(w, sizeof w, "pthread_getaffinity_np(%s, %zu)", what, size);
	check_str(w, list, want);
	free(m);
}

int main(void)
{
	prog = "pthread_getaffinity_np";
	const char *want = expect("EXPECT_AFFINITY");
	pthread_t th;
	pthread_create(&th, NULL, thread, NULL);
	size_t sizes[] = {sizeof(cpu_set_t), CPU_ALLOC_SIZE(8192)};
	for (size_t i = 0; i < 2; i++) {
		check_thread("pthread_self()", pthread_self(), sizes[i], want);
		check_thread("another thread", th, sizes[i], want);
	}
	cpu_set_t s;
	check_int("size 0 returns EINVAL", pthread_getaffinity_np(pthread_self(), 0, &s), EINVAL);
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	return finish();
}
