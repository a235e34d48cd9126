/* hdsl's fast call path: a compiled pipeline called with NumPy arrays, the buffer
 * descriptors filled here, in C, on this call's stack (hdsl/runtime/fastcall.py is the
 * Python side and documents the contract).
 *
 * hdsl_call(plan, arrays, params) reads the arrays straight out of their Python objects:
 * `arrays` is a tuple (inputs, then outputs) of numpy.ndarray, `params` the params' values
 * packed by Python's struct module. Where the objects' fields are (the tuple's items, the
 * array's data, nd, shape, strides, descr and flags) was found by probing live objects when
 * the plan was made (fastcall.probe_layout), so nothing here depends on Python's or NumPy's
 * headers. Any array the compiled code cannot take as it is (another type, dtype, rank or
 * byte order, x not at stride 1, an empty or 2^31-long dimension, an unaligned or read-only
 * array, outputs overlapping an input or each other, a form of the pipeline not compiled
 * yet) returns HDSL_CALL_FALLBACK before anything is touched: the Python side then takes
 * the general path, which copies what it must or raises the error with its message.
 *
 * No Python API is called and no Python object is changed: the caller holds every object
 * for the call, so this runs without the GIL (ctypes releases it), like the pipeline.
 */
#include <stdint.h>
#include <string.h>

/*HDSL_BUFFER_STRUCT*/

#define HDSL_CALL_FALLBACK (-1)
#define HDSL_MAX_CALL_BUFFERS 64
#define HDSL_MAX_CALL_PARAMS 64
#define NPY_ALIGNED 0x0100
#define NPY_WRITEABLE 0x0400

/* byte offsets of the fields of this process's Python and NumPy objects (probed) */
struct hdsl_py_layout {
    int64_t ob_type;                 /* PyObject.ob_type */
    int64_t tuple_size, tuple_items; /* PyTupleObject.ob_size, .ob_item */
    int64_t data, nd, dims, strides, descr, flags;   /* PyArrayObject_fields */
    const void *ndarray_type;        /* &PyArray_Type */
};

struct hdsl_plan_buffer {
    int32_t dims, elem_bytes;
    const void *descr[2];            /* the dtypes accepted (NumPy's descriptor objects) */
};

struct hdsl_plan_param {
    int32_t offset, size, is_bool, pad;
};

struct hdsl_plan_req {
    int32_t output, dim, factor, pad;
};

typedef int32_t (*hdsl_pipeline_fn)(void **args, int64_t *info);

struct hdsl_call_plan {
    struct hdsl_py_layout layout;
    hdsl_pipeline_fn fn;             /* the pipeline (the shifted form, when reqs) */
    hdsl_pipeline_fn fn_guarded;     /* the form for outputs narrower than a req; NULL: not made */
    void *extra;                     /* an argument after the outputs (a GPU's device table), or NULL */
    int32_t n_inputs, n_params, n_outputs, n_reqs;
    const struct hdsl_plan_buffer *buffers;   /* inputs, then outputs */
    const struct hdsl_plan_param *params;
    const struct hdsl_plan_req *reqs;
};

/* the last call's error info (which buffer or Func, dim, region), per thread */
static __thread int64_t last_info[4];

void hdsl_call_info(int64_t *out) { memcpy(out, last_info, sizeof last_info); }

#define FIELD(obj, off, type) (*(type *)((const char *)(obj) + (off)))

int32_t hdsl_call(const struct hdsl_call_plan *plan, const void *arrays, const char *params) {
    const struct hdsl_py_layout *L = &plan->layout;
    int nin = plan->n_inputs, nout = plan->n_outputs, nb = nin + nout, np = plan->n_params;
    if (nb > HDSL_MAX_CALL_BUFFERS || np > HDSL_MAX_CALL_PARAMS || FIELD(arrays, L->tuple_size, int64_t) != nb)
        return HDSL_CALL_FALLBACK;
    const void *const *items = (const void *const *)((const char *)arrays + L->tuple_items);
    struct hdsl_buffer bufs[nb > 0 ? nb : 1];
    const char *lo[nb > 0 ? nb : 1], *hi[nb > 0 ? nb : 1];
    int64_t cells[np > 0 ? np : 1];
    void *args[nb + np + 1];
    for (int k = 0; k < nb; k++) {
        const void *a = items[k];
        const struct hdsl_plan_buffer *pb = &plan->buffers[k];
        if (FIELD(a, L->ob_type, const void *) != L->ndarray_type) return HDSL_CALL_FALLBACK;
        const void *descr = FIELD(a, L->descr, const void *);
        if (descr != pb->descr[0] && descr != pb->descr[1]) return HDSL_CALL_FALLBACK;
        int nd = FIELD(a, L->nd, int32_t);
        int flags = FIELD(a, L->flags, int32_t);
        if (nd != pb->dims || !(flags & NPY_ALIGNED) || (k >= nin && !(flags & NPY_WRITEABLE)))
            return HDSL_CALL_FALLBACK;
        const int64_t *shape = FIELD(a, L->dims, const int64_t *);
        const int64_t *strides = FIELD(a, L->strides, const int64_t *);
        char *data = FIELD(a, L->data, char *);
        int64_t eb = pb->elem_bytes;
        struct hdsl_buffer *b = &bufs[k];
        memset(b, 0, sizeof *b);
        b->host = data;
        b->dims = nd;
        b->elem_bytes = (int32_t)eb;
        const char *l = data, *h = data;
        for (int d = 0; d < nd; d++) {
            /* the user's (H, W, C, ...) is the buffer's [x, y, c, ...] */
            int axis = (nd >= 2 && d < 2) ? 1 - d : d;
            int64_t n = shape[axis], s = strides[axis];
            if (n <= 0 || n > INT32_MAX || s % eb != 0) return HDSL_CALL_FALLBACK;
            b->extent[d] = n;
            b->stride[d] = s / eb;
            if (s < 0) l += (n - 1) * s; else h += (n - 1) * s;
        }
        if (nd > 0 && b->extent[0] == 1) b->stride[0] = 1;      /* (never used) */
        if (nd > 0 && b->stride[0] != 1) return HDSL_CALL_FALLBACK;
        lo[k] = l;
        hi[k] = h + eb;
        /* an output may not share memory with an input or another output (the bounds test
         * of numpy.may_share_memory, as the general path) */
        if (k >= nin)
            for (int j = 0; j < k; j++)
                if (lo[k] < hi[j] && lo[j] < hi[k]) return HDSL_CALL_FALLBACK;
    }
    for (int p = 0; p < np; p++) {
        const struct hdsl_plan_param *pp = &plan->params[p];
        cells[p] = 0;
        memcpy(&cells[p], params + pp->offset, (size_t)pp->size);
        if (pp->is_bool && cells[p] > 1) return HDSL_CALL_FALLBACK;
    }
    hdsl_pipeline_fn fn = plan->fn;
    for (int r = 0; r < plan->n_reqs; r++) {
        const struct hdsl_plan_req *q = &plan->reqs[r];
        if (bufs[nin + q->output].extent[q->dim] < q->factor) {
            fn = plan->fn_guarded;
            break;
        }
    }
    if (fn == NULL) return HDSL_CALL_FALLBACK;
    int n = 0;
    for (int k = 0; k < nin; k++) args[n++] = &bufs[k];
    for (int p = 0; p < np; p++) args[n++] = &cells[p];
    for (int k = nin; k < nb; k++) args[n++] = &bufs[k];
    if (plan->extra) args[n++] = plan->extra;
    int64_t info[4] = {0, 0, 0, 0};
    int32_t code = fn(args, info);
    if (code != 0) memcpy(last_info, info, sizeof info);
    return code;
}
