// Halide's side of the GPU benchmark: runs one app's AOT-compiled CUDA pipeline (built by
// benchmarks/gpu/halide_cuda.py) on inputs read from .hbuf files (benchmarks/gpu/apps.py writes
// them and documents the format) and prints one JSON object:
//   e2e_ms:      median time of a call that copies the inputs host -> device (their host side
//                marked dirty before each call), runs the pipeline and copies the output
//                device -> host (copy_to_host);
//   resident_ms: median time of a call whose inputs are already on the device and whose output
//                stays there (the pipeline, then halide_device_sync);
// each over CALLS calls after WARMUP calls. The output of the last end-to-end call is written
// to OUTDIR/APP[.strict][.reuse].out.hbuf.
//
//   harness APP INDIR OUTDIR [CALLS [WARMUP [strict|default [reuse]]]]
//
// "strict" runs APP_cuda_strict, the pipeline compiled with Halide's strict_float (no FMA
// contraction: hdsl's default floating point), instead of APP_cuda (Halide's default).
// "reuse" turns on halide_reuse_device_allocations: the runtime keeps the intermediates'
// device memory between calls instead of allocating and freeing it in each (its default).
//
// Without a GPU (no libcuda, no device) the pipeline returns Halide's error code, after the
// runtime's message (also on stderr); the harness then prints {"app": ..., "error": ...} and exits 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntime.h"

#ifdef HAVE_LOCAL_LAPLACIAN
#include "local_laplacian_cuda.h"
#include "local_laplacian_cuda_strict.h"
#endif
#ifdef HAVE_BILATERAL_GRID
#include "bilateral_grid_cuda.h"
#include "bilateral_grid_cuda_strict.h"
#endif
#ifdef HAVE_INTERPOLATE
#include "interpolate_cuda.h"
#include "interpolate_cuda_strict.h"
#endif
#ifdef HAVE_CAMERA_PIPE
#include "camera_pipe_cuda.h"
#include "camera_pipe_cuda_strict.h"
#endif
#ifdef HAVE_BLUR
#include "blur_cuda.h"
#include "blur_cuda_strict.h"
#endif

#ifndef HALIDE_TARGET
#define HALIDE_TARGET "?"
#endif

using Halide::Runtime::Buffer;

namespace {

template <typename T> constexpr int type_code();
template <> constexpr int type_code<uint8_t>() { return 1; }
template <> constexpr int type_code<uint16_t>() { return 2; }
template <> constexpr int type_code<float>() { return 3; }

[[noreturn]] void fail(const std::string &msg) {
    std::fprintf(stderr, "harness: %s\n", msg.c_str());
    std::exit(1);
}

template <typename T>
Buffer<T> read_hbuf(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("cannot read " + path);
    int32_t ndim = 0;
    f.read(reinterpret_cast<char *>(&ndim), 4);
    if (ndim < 1 || ndim > 4) fail(path + ": bad header");
    std::vector<int> extents(ndim);
    for (auto &e : extents) f.read(reinterpret_cast<char *>(&e), 4);
    int32_t code = 0;
    f.read(reinterpret_cast<char *>(&code), 4);
    if (code != type_code<T>()) fail(path + ": element type " + std::to_string(code) + ", expected " +
                                     std::to_string(type_code<T>()));
    Buffer<T> b(extents);
    f.read(reinterpret_cast<char *>(b.data()), b.size_in_bytes());
    if (!f) fail(path + ": short file");
    return b;
}

template <typename T>
void write_hbuf(const std::string &path, const Buffer<T> &b) {
    std::ofstream f(path, std::ios::binary);
    int32_t ndim = b.dimensions();
    f.write(reinterpret_cast<const char *>(&ndim), 4);
    for (int d = 0; d < ndim; d++) {
        int32_t e = b.dim(d).extent();
        f.write(reinterpret_cast<const char *>(&e), 4);
    }
    int32_t code = type_code<T>();
    f.write(reinterpret_cast<const char *>(&code), 4);
    f.write(reinterpret_cast<const char *>(b.data()), b.size_in_bytes());
    if (!f) fail("cannot write " + path);
}

// Halide's default error handler prints and aborts; this one prints the runtime's message to
// stderr and lets the pipeline return its error code.
std::string last_error;
void on_halide_error(void *, const char *msg) {
    last_error = msg;
    while (!last_error.empty() && (last_error.back() == '\n')) last_error.pop_back();
    std::fprintf(stderr, "Halide runtime: %s\n", last_error.c_str());
}

std::string json_escape(const std::string &s) {
    std::string r;
    for (char ch : s) {
        if (ch == '"' || ch == '\\') r += '\\';
        if (static_cast<unsigned char>(ch) >= 0x20) r += ch;
    }
    return r;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Time `call` both ways; `inputs` are the pipeline's input buffers, `out` its output.
template <typename O>
int bench(const std::string &app, std::vector<halide_buffer_t *> inputs, Buffer<O> &out,
          const std::function<int()> &call, const std::string &outpath, int calls, int warmup) {
    auto error = [&](const char *phase, int rc) {
        std::printf("{\"app\": \"%s\", \"target\": \"%s\", \"error\": \"Halide error %d in the %s calls: %s\"}\n",
                    app.c_str(), HALIDE_TARGET, rc, phase, json_escape(last_error).c_str());
        std::fflush(stdout);
        return 2;
    };
    // warmup + calls calls of `call` then `finish`, each timed; `prepare` before each, untimed.
    // Returns Halide's error code (0: none); the times after the warm-up go to `times`.
    auto time_calls = [&](const std::function<void()> &prepare, const std::function<int()> &finish,
                          std::vector<double> &times) {
        for (int i = 0; i < warmup + calls; i++) {
            prepare();
            double t0 = now_ms();
            int rc = call();
            if (rc == 0) rc = finish();
            double t1 = now_ms();
            if (rc) return rc;
            if (i >= warmup) times.push_back(t1 - t0);
        }
        return 0;
    };
    std::vector<double> e2e, resident;
    // end to end: the inputs' host side dirty, so the runtime copies them in; the output copied out
    int rc = time_calls([&] { for (auto *b : inputs) b->set_host_dirty(true); },
                        [&] { return out.copy_to_host(); }, e2e);
    if (rc) return error("end-to-end", rc);
    write_hbuf(outpath, out);
    // device-resident: the inputs already on the device, the output left there
    rc = time_calls([] {}, [&] { return out.device_sync(); }, resident);
    if (rc) return error("device-resident", rc);
    std::printf("{\"app\": \"%s\", \"target\": \"%s\", \"e2e_ms\": %.4f, \"resident_ms\": %.4f, \"calls\": %d, "
                "\"warmup\": %d, \"e2e_all_ms\": [", app.c_str(), HALIDE_TARGET, median(e2e), median(resident), calls,
                warmup);
    for (size_t i = 0; i < e2e.size(); i++) std::printf("%s%.4f", i ? ", " : "", e2e[i]);
    std::printf("], \"resident_all_ms\": [");
    for (size_t i = 0; i < resident.size(); i++) std::printf("%s%.4f", i ? ", " : "", resident[i]);
    std::printf("]}\n");
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s APP INDIR OUTDIR [CALLS [WARMUP [strict|default [reuse]]]]\n", argv[0]);
        return 1;
    }
    const std::string app = argv[1], in = std::string(argv[2]) + "/" + app, outdir = argv[3];
    halide_set_error_handler(on_halide_error);
    const int calls = argc > 4 ? std::atoi(argv[4]) : 20, warmup = argc > 5 ? std::atoi(argv[5]) : 3;
    const bool strict = argc > 6 && std::string(argv[6]) == "strict";
    const bool reuse = argc > 7 && std::string(argv[7]) == "reuse";
    if (reuse) halide_reuse_device_allocations(nullptr, true);
    const std::string outpath = outdir + "/" + app + (strict ? ".strict" : "") + (reuse ? ".reuse" : "") + ".out.hbuf";
    // The params: the hdsl examples' defaults, which are also the Halide apps' estimates and
    // benchmarks/run.py's values.
#define PICK(name) (strict ? name##_cuda_strict : name##_cuda)
#ifdef HAVE_LOCAL_LAPLACIAN
    if (app == "local_laplacian") {
        auto img = read_hbuf<uint16_t>(in + ".in0.hbuf");
        Buffer<uint16_t> out(img.width(), img.height(), 3);
        auto fn = PICK(local_laplacian);
        return bench(app, {img.raw_buffer()}, out, [&] { return fn(img, 8, 1.0f, 1.0f, out); }, outpath, calls,
                     warmup);
    }
#endif
#ifdef HAVE_BILATERAL_GRID
    if (app == "bilateral_grid") {
        auto img = read_hbuf<float>(in + ".in0.hbuf");
        Buffer<float> out(img.width(), img.height());
        auto fn = PICK(bilateral_grid);
        return bench(app, {img.raw_buffer()}, out, [&] { return fn(img, 0.1f, out); }, outpath, calls, warmup);
    }
#endif
#ifdef HAVE_INTERPOLATE
    if (app == "interpolate") {
        auto img = read_hbuf<float>(in + ".in0.hbuf");
        Buffer<float> out(img.width(), img.height(), 3);
        auto fn = PICK(interpolate);
        return bench(app, {img.raw_buffer()}, out, [&] { return fn(img, out); }, outpath, calls, warmup);
    }
#endif
#ifdef HAVE_CAMERA_PIPE
    if (app == "camera_pipe") {
        auto raw = read_hbuf<uint16_t>(in + ".in0.hbuf");
        auto m3200 = read_hbuf<float>(in + ".in1.hbuf");
        auto m7000 = read_hbuf<float>(in + ".in2.hbuf");
        // the output size of Halide's apps/camera_pipe/process.cpp (and benchmarks/run.py)
        Buffer<uint8_t> out((raw.width() - 32) / 32 * 32, (raw.height() - 24) / 32 * 32, 3);
        auto fn = PICK(camera_pipe);
        return bench(app, {raw.raw_buffer(), m3200.raw_buffer(), m7000.raw_buffer()}, out,
                     [&] { return fn(raw, m3200, m7000, 3700.0f, 2.0f, 50.0f, 1.0f, 25, 1023, out); }, outpath,
                     calls, warmup);
    }
#endif
#ifdef HAVE_BLUR
    if (app == "blur") {
        auto img = read_hbuf<uint16_t>(in + ".in0.hbuf");
        Buffer<uint16_t> out(img.width(), img.height());
        auto fn = PICK(blur);
        return bench(app, {img.raw_buffer()}, out, [&] { return fn(img, out); }, outpath, calls, warmup);
    }
#endif
    std::fprintf(stderr, "harness: unknown app %s (or not built in)\n", app.c_str());
    return 1;
}
