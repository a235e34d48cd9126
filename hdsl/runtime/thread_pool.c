/* hdsl's thread pool: parallel loops of generated code run here, on real OS
 * threads, without Python or its GIL.
 *
 * hdsl_parallel_for(task, closure, min, extent) runs task(closure, i) for
 * every i in [min, min + extent) and returns when all have finished; the
 * calling thread takes part. Each thread starts with its own contiguous share
 * of the iterations and takes them one at a time from its front, so neighbouring
 * iterations (rows) run on the same core; a thread whose share is done steals the
 * back half of the largest share left, so a thread that is descheduled holds up
 * at most the iteration it is running. A parallel loop met inside a task runs
 * serially on the thread that met it (no nested fan-out). The first nonzero value
 * a task returns is returned.
 *
 * Threads: HDSL_NUM_THREADS, else the number of online processors.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int32_t (*hdsl_task)(void *closure, int32_t i);

/* what is left of one thread's share: iterations [begin, end), packed as begin << 32 | end
 * so that the owner (taking from the front) and thieves (taking the back half) agree by
 * one compare-and-swap; one per cache line */
struct share {
    uint64_t range;
    char pad[56];
};

struct job {
    hdsl_task task;
    void *closure;
    int32_t min, extent;
    int32_t done;          /* iterations finished (atomic) */
    int32_t result;        /* first nonzero task result (atomic) */
    int32_t workers_in;    /* workers currently inside this job */
    int32_t joined;        /* workers that took a share (atomic): the next one takes share joined + 1 */
    int32_t n_shares;
    struct share *shares;
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

static inline uint64_t pack(uint32_t begin, uint32_t end) { return (uint64_t)begin << 32 | end; }

/* Steal the back half of the largest share left into `mine` (empty: no other thread
 * writes it); 0 when no share has anything left. */
static int steal(struct job *j, struct share *mine) {
    for (;;) {
        struct share *victim = NULL;
        uint64_t seen = 0;
        uint32_t most = 0;
        for (int i = 0; i < j->n_shares; i++) {
            uint64_t r = __atomic_load_n(&j->shares[i].range, __ATOMIC_RELAXED);
            uint32_t b = (uint32_t)(r >> 32), e = (uint32_t)r;
            if (b < e && e - b > most) {
                most = e - b;
                victim = &j->shares[i];
                seen = r;
            }
        }
        if (victim == NULL) return 0;
        uint32_t b = (uint32_t)(seen >> 32), e = (uint32_t)seen, m = b + (e - b) / 2;
        if (__atomic_compare_exchange_n(&victim->range, &seen, pack(b, m), 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&mine->range, pack(m, e), __ATOMIC_RELAXED);
            return 1;
        }
    }
}

/* Run iterations from share `slot` (then stolen ones) until none is left anywhere.
 * (Handing out single iterations from one shared counter sent neighbouring rows to
 * different cores: the interpolation benchmark's memory-bound pyramid levels, where
 * consecutive rows of a downsampling read a common input row, ran ~12 % slower; handing
 * out shrinking chunks kept rows together but left a descheduled thread holding a chunk
 * the others could not take.) */
static void run_iterations(struct job *j, int slot) {
    struct share *mine = &j->shares[slot];
    int32_t ran = 0;
    for (;;) {
        uint64_t r = __atomic_load_n(&mine->range, __ATOMIC_RELAXED);
        uint32_t b = (uint32_t)(r >> 32), e = (uint32_t)r;
        if (b >= e) {
            if (!steal(j, mine)) break;
            continue;
        }
        if (!__atomic_compare_exchange_n(&mine->range, &r, pack(b + 1, e), 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;                     /* a thief took part of it meanwhile */
        int32_t res = j->task(j->closure, j->min + (int32_t)b);
        if (res != 0) {
            int32_t zero = 0;
            __atomic_compare_exchange_n(&j->result, &zero, res, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
        ran++;
    }
    __atomic_fetch_add(&j->done, ran, __ATOMIC_RELEASE);
}

/* Between two parallel loops of a pipeline (a pyramid has dozens, some of a few
 * microseconds) a thread that goes to sleep costs a futex wake-up and a context switch
 * to bring back, so workers and the submitting thread first spin this many pauses
 * (some tens of microseconds) on the shared state before sleeping. */
#define SPIN 4000

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg) {
    (void)arg;
    in_task = 1;
    uint64_t seen = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (generation == seen || current == NULL) {
            if (generation != seen && current == NULL) seen = generation;
            pthread_mutex_unlock(&lock);
            for (int k = 0; k < SPIN && __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen; k++)
                relax();
            pthread_mutex_lock(&lock);
            if (generation == seen)       /* (checked under the lock: no wake-up is missed) */
                pthread_cond_wait(&wake, &lock);
        }
        seen = generation;
        struct job *j = current;
        __atomic_fetch_add(&j->workers_in, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&lock);
        run_iterations(j, __atomic_add_fetch(&j->joined, 1, __ATOMIC_RELAXED));   /* 1 .. n - 1 */
        pthread_mutex_lock(&lock);
        __atomic_fetch_sub(&j->workers_in, 1, __ATOMIC_RELEASE);
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
    pthread_mutex_lock(&submit);          /* one parallel loop at a time from outside the pool */
    pthread_mutex_lock(&lock);
    if (!started) start_pool();
    int n = n_threads;                    /* a share per thread (some empty when extent < n) */
    struct share shares[n];
    for (int i = 0; i < n; i++)           /* contiguous shares, as even as they can be */
        shares[i].range = pack((uint32_t)((int64_t)extent * i / n), (uint32_t)((int64_t)extent * (i + 1) / n));
    struct job j = {task, closure, min, extent, 0, 0, 0, 0, n, shares};
    current = &j;
    __atomic_store_n(&generation, generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);

    in_task = 1;
    run_iterations(&j, 0);
    in_task = 0;

    pthread_mutex_lock(&lock);
    current = NULL;                       /* no new worker joins; wait for those inside */
    pthread_mutex_unlock(&lock);
    for (int k = 0; k < SPIN && (__atomic_load_n(&j.workers_in, __ATOMIC_ACQUIRE) > 0 ||
                                 __atomic_load_n(&j.done, __ATOMIC_ACQUIRE) < extent); k++)
        relax();
    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&j.workers_in, __ATOMIC_ACQUIRE) > 0 || __atomic_load_n(&j.done, __ATOMIC_ACQUIRE) < extent)
        pthread_cond_wait(&finished, &lock);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&submit);
    return j.result;
}

/* Storage for Funcs computed at the root: hdsl_malloc(bytes) returns 64-byte aligned
 * memory and hdsl_free gives it back. Blocks of 64 KiB or more (smaller ones live on the
 * stack) are kept in a small
 * cache, up to HDSL_ALLOC_CACHE_MB in all (default 256), and handed out again to a request
 * of at least half their size: a pipeline run again and again then reuses pages already
 * mapped instead of faulting (and zeroing) fresh ones on every run. */
#define CACHE_SLOTS 32
#define HEADER 64
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static void *cache_ptr[CACHE_SLOTS];
static size_t cache_cap[CACHE_SLOTS];
static size_t cached_bytes = 0;
static size_t cache_limit = (size_t)-1;

static size_t limit(void) {
    if (cache_limit == (size_t)-1) {
        const char *env = getenv("HDSL_ALLOC_CACHE_MB");
        long mb = env ? strtol(env, NULL, 10) : 256;
        cache_limit = mb > 0 ? (size_t)mb << 20 : 0;
    }
    return cache_limit;
}

void *hdsl_malloc(int64_t bytes) {
    size_t need = ((size_t)(bytes > 0 ? bytes : 1) + 63) & ~(size_t)63;
    if (need >= (1u << 16)) {
        pthread_mutex_lock(&cache_lock);
        int best = -1;
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (cache_ptr[i] && cache_cap[i] >= need && cache_cap[i] / 2 <= need &&
                (best < 0 || cache_cap[i] < cache_cap[best]))
                best = i;
        if (best >= 0) {
            char *raw = cache_ptr[best];
            cached_bytes -= cache_cap[best];
            cache_ptr[best] = NULL;
            pthread_mutex_unlock(&cache_lock);
            return raw + HEADER;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    char *raw = aligned_alloc(64, need + HEADER);
    if (!raw) return NULL;
    memcpy(raw, &need, sizeof need);
    return raw + HEADER;
}

void hdsl_free(void *p) {
    if (!p) return;
    char *raw = (char *)p - HEADER;
    size_t cap;
    memcpy(&cap, raw, sizeof cap);
    if (cap >= (1u << 16)) {
        pthread_mutex_lock(&cache_lock);
        if (cached_bytes + cap <= limit()) {
            for (int i = 0; i < CACHE_SLOTS; i++)
                if (!cache_ptr[i]) {
                    cache_ptr[i] = raw;
                    cache_cap[i] = cap;
                    cached_bytes += cap;
                    pthread_mutex_unlock(&cache_lock);
                    return;
                }
        }
        pthread_mutex_unlock(&cache_lock);
    }
    free(raw);
}
