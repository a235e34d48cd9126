/* Exercises hdsl's thread pool (hdsl/runtime/thread_pool.c) directly; see test_thread_pool.py.
 * Prints one line per check and exits nonzero on the first failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int32_t (*hdsl_task)(void *closure, int32_t i);
int32_t hdsl_parallel_for(hdsl_task task, void *closure, int32_t min, int32_t extent);
int32_t hdsl_num_threads(void);

struct counts {
    int32_t min, extent;
    int32_t *hits;
    int32_t spin;              /* busy work per iteration, varied by i */
};

static int32_t count_task(void *c, int32_t i) {
    struct counts *k = c;
    if (i < k->min || i >= k->min + k->extent) return 99;
    __atomic_fetch_add(&k->hits[i - k->min], 1, __ATOMIC_RELAXED);
    volatile int32_t x = 0;
    for (int32_t s = 0; s < k->spin * ((i * 7) % 5); s++) x += s;
    return 0;
}

static int check_once(int32_t min, int32_t extent, int32_t spin) {
    struct counts k = {min, extent, calloc(extent > 0 ? extent : 1, sizeof(int32_t)), spin};
    int32_t r = hdsl_parallel_for(count_task, &k, min, extent);
    int bad = r != 0;
    for (int32_t i = 0; i < extent; i++)
        if (k.hits[i] != 1) {
            printf("FAIL: extent %d min %d: iteration %d ran %d times\n", extent, min, i, k.hits[i]);
            bad = 1;
            break;
        }
    free(k.hits);
    return bad;
}

/* iteration `blocker` waits until every other iteration has run: only possible when the
 * iterations of its thread's share can be taken by the other threads */
struct blocked {
    int32_t blocker, extent, others_done;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int32_t blocking_task(void *c, int32_t i) {
    struct blocked *b = c;
    if (i != b->blocker) {
        __atomic_fetch_add(&b->others_done, 1, __ATOMIC_RELEASE);
        return 0;
    }
    double t0 = now();
    while (__atomic_load_n(&b->others_done, __ATOMIC_ACQUIRE) < b->extent - 1)
        if (now() - t0 > 10.0) return 7;          /* the others never came: held up */
    return 0;
}

static int32_t failing_task(void *c, int32_t i) {
    (void)c;
    return i == 37 ? 5 : 0;
}

static int32_t nested_task(void *c, int32_t i) {
    (void)i;
    struct counts *inner = c;
    /* a parallel loop inside a task runs serially on this thread: every inner count is
     * touched by exactly one outer iteration at a time, so plain increments are exact */
    (void)inner;
    int32_t local[16] = {0};
    struct counts mine = {0, 16, local, 0};
    int32_t r = hdsl_parallel_for(count_task, &mine, 0, 16);
    for (int k = 0; k < 16; k++)
        if (local[k] != 1) return 11;
    return r;
}

int main(void) {
    printf("threads %d\n", hdsl_num_threads());
    static const int32_t extents[] = {0, 1, 2, 3, 5, 7, 8, 13, 64, 100, 1000, 4099};
    for (int rep = 0; rep < 20; rep++)
        for (size_t e = 0; e < sizeof extents / sizeof *extents; e++)
            if (check_once(rep * 3 - 10, extents[e], rep % 3 ? 50 : 0)) return 1;
    printf("each iteration once: ok\n");
    for (int32_t extent = 2; hdsl_num_threads() > 1 && extent <= 200; extent += 33) {
        int32_t positions[] = {0, extent / 3, extent / 2, extent - 1};
        for (int p = 0; p < 4; p++) {
            struct blocked b = {positions[p], extent, 0};
            int32_t r = hdsl_parallel_for(blocking_task, &b, 0, extent);
            if (r != 0) {
                printf("FAIL: iteration %d of %d held up the others (result %d)\n", positions[p], extent, r);
                return 1;
            }
        }
    }
    if (hdsl_num_threads() > 1)
        printf("a blocked thread holds up only its own iteration: ok\n");
    int32_t r = hdsl_parallel_for(failing_task, NULL, 0, 100);
    if (r != 5) {
        printf("FAIL: a failing task's result: %d\n", r);
        return 1;
    }
    printf("failing task result: ok\n");
    struct counts unused = {0, 0, NULL, 0};
    r = hdsl_parallel_for(nested_task, &unused, 0, 50);
    if (r != 0) {
        printf("FAIL: nested loops (result %d)\n", r);
        return 1;
    }
    printf("nested loops: ok\n");
    return 0;
}
