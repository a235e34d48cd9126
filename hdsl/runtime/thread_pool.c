/* hdsl's thread pool: parallel loops of generated code run here, on real OS
 * threads, without Python or its GIL.
 *
 * hdsl_parallel_for(task, closure, min, extent) runs task(closure, i) for
 * every i in [min, min + extent) and returns when all have finished; the
 * calling thread takes part. Iterations are handed out one at a time from
 * an atomic counter, so uneven iterations balance themselves. A parallel
 * loop met inside a task runs serially on the thread that met it (no nested
 * fan-out). The first nonzero value a task returns is returned.
 *
 * Threads: HDSL_NUM_THREADS, else the number of online processors.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef int32_t (*hdsl_task)(void *closure, int32_t i);

struct job {
    hdsl_task task;
    void *closure;
    int32_t min, extent;
    int32_t next;          /* next iteration to hand out (atomic) */
    int32_t done;          /* iterations finished (atomic) */
    int32_t result;        /* first nonzero task result (atomic) */
    int32_t workers_in;    /* workers currently inside this job */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER;
static struct job *current = NULL;
static uint64_t generation = 0;
static int started = 0;
static int n_threads = 1;
static __thread int in_task = 0;

static void run_iterations(struct job *j) {
    for (;;) {
        int32_t k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (k >= j->extent) break;
        int32_t r = j->task(j->closure, j->min + k);
        if (r != 0) {
            int32_t zero = 0;
            __atomic_compare_exchange_n(&j->result, &zero, r, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
        __atomic_fetch_add(&j->done, 1, __ATOMIC_RELEASE);
    }
}

static void *worker(void *arg) {
    (void)arg;
    in_task = 1;
    uint64_t seen = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (generation == seen || current == NULL) {
            if (generation != seen && current == NULL) seen = generation;
            pthread_cond_wait(&wake, &lock);
        }
        seen = generation;
        struct job *j = current;
        j->workers_in++;
        pthread_mutex_unlock(&lock);
        run_iterations(j);
        pthread_mutex_lock(&lock);
        j->workers_in--;
        pthread_cond_broadcast(&finished);
    }
    return NULL;
}

static void start_pool(void) {
    const char *env = getenv("HDSL_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 256) n = 256;
    n_threads = (int)n;
    for (int i = 0; i < n_threads - 1; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 8u << 20);
        pthread_create(&t, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
    }
    started = 1;
}

int32_t hdsl_num_threads(void) {
    pthread_mutex_lock(&lock);
    if (!started) start_pool();
    pthread_mutex_unlock(&lock);
    return n_threads;
}

int32_t hdsl_parallel_for(hdsl_task task, void *closure, int32_t min, int32_t extent) {
    if (extent <= 0) return 0;
    if (in_task || extent == 1) {
        for (int32_t i = 0; i < extent; i++) {
            int32_t r = task(closure, min + i);
            if (r != 0) return r;
        }
        return 0;
    }
    struct job j = {task, closure, min, extent, 0, 0, 0, 0};
    pthread_mutex_lock(&submit);          /* one parallel loop at a time from outside the pool */
    pthread_mutex_lock(&lock);
    if (!started) start_pool();
    current = &j;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);

    in_task = 1;
    run_iterations(&j);
    in_task = 0;

    pthread_mutex_lock(&lock);
    current = NULL;                       /* no new worker joins; wait for those inside */
    while (j.workers_in > 0 || __atomic_load_n(&j.done, __ATOMIC_ACQUIRE) < extent)
        pthread_cond_wait(&finished, &lock);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&submit);
    return j.result;
}
