/* Links the blur and multi pipelines into one program, written against their
 * headers alone. Reads raw inputs from argv files, writes raw outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "blur.h"
#include "multi.h"

static void *slurp(const char *path, size_t bytes) {
    void *p = malloc(bytes);
    FILE *f = fopen(path, "rb");
    if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot read %s\n", path); exit(3); }
    fclose(f);
    return p;
}

static void spill(const char *path, const void *p, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot write %s\n", path); exit(3); }
    fclose(f);
}

static struct hdsl_buffer image(void *host, int elem_bytes, int w, int h) {
    struct hdsl_buffer b;
    memset(&b, 0, sizeof b);
    b.host = host; b.dims = 2; b.elem_bytes = elem_bytes;
    b.extent[0] = w; b.extent[1] = h;
    b.stride[0] = 1; b.stride[1] = w;
    return b;
}

int main(int argc, char **argv) {
    /* usage: driver W H img.u16 a.u8 b.f32 dir */
    if (argc != 7) return 2;
    int w = atoi(argv[1]), h = atoi(argv[2]);
    const char *dir = argv[6];
    char path[4096];

    struct hdsl_buffer img = image(slurp(argv[3], (size_t)w * h * 2), 2, w, h);
    struct hdsl_buffer out = image(malloc((size_t)w * h * 2), 2, w, h);
    int r = blur(&img, &out);
    if (r) { printf("blur error %d: %s\n", r, blur_error_message()); return 1; }
    snprintf(path, sizeof path, "%s/blur.out", dir); spill(path, out.host, (size_t)w * h * 2);

    struct hdsl_buffer a = image(slurp(argv[4], (size_t)w * h), 1, w, h);
    struct hdsl_buffer b = image(slurp(argv[5], (size_t)w * h * 4), 4, w, h);
    struct hdsl_buffer mixed = image(malloc((size_t)w * h * 4), 4, w, h);
    int32_t counts[16];
    struct hdsl_buffer hist = image(counts, 4, 16, 1);
    hist.dims = 1;
    r = multi(&a, &b, 0.75f, -2, true, &mixed, &hist);
    if (r) { printf("multi error %d: %s\n", r, multi_error_message()); return 1; }
    snprintf(path, sizeof path, "%s/mixed.out", dir); spill(path, mixed.host, (size_t)w * h * 4);
    snprintf(path, sizeof path, "%s/hist.out", dir); spill(path, counts, sizeof counts);

    /* the argument description */
    int n = 0;
    const struct hdsl_argument *args = multi_arguments(&n);
    for (int i = 0; i < n; i++)
        printf("arg %s kind %d type %d bits %d dims %d\n", args[i].name, args[i].kind, args[i].type_code,
               args[i].bits, args[i].dims);

    /* too small: each input of multi given only 4 rows */
    struct hdsl_buffer small_a = image(a.host, 1, w, 4);
    r = multi(&small_a, &b, 0.75f, -2, true, &mixed, &hist);
    printf("small a: %d %s\n", r, multi_error_message());
    struct hdsl_buffer small_b = image(b.host, 4, w, 4);
    r = multi(&a, &small_b, 0.75f, -2, true, &mixed, &hist);
    printf("small b: %d %s\n", r, multi_error_message());
    /* too small: 16 bins wanted, 8 given */
    struct hdsl_buffer short_hist = image(counts, 4, 8, 1);
    short_hist.dims = 1;
    r = multi(&a, &b, 0.75f, -2, true, &mixed, &short_hist);
    printf("short hist: %d %s\n", r, multi_error_message());
    /* wrong element size */
    struct hdsl_buffer wrong = image(img.host, 4, w, h);
    r = blur(&wrong, &out);
    printf("wrong type: %d %s\n", r, blur_error_message());
    return 0;
}
