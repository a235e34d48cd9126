#!/bin/bash
# One call on a lent GPU machine: hdsl's CUDA target (and OpenGL on the vendor's EGL) on a real GPU.
# Prepare the carried folder .gpu/ here first (benchmarks/gpu/device/prepare.sh, README.md there);
# then on the device, from the repo root, carrying .gpu and benchmarks/gpu/build:
#   bash benchmarks/gpu/device/run.sh STEPS      (STEPS: a comma list of the steps below)
# Results go to $OUT (the device tool's folder; at most 8 files come back).
set +e
export PYTHONUNBUFFERED=1
STEPS=${1:-smoke,tests,bench,opengl,fuzz}
D=benchmarks/gpu/device
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
S=/tmp/site
if [ ! -d $S/llvmlite ]; then
  mkdir -p $S
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $S .gpu/*.whl 2>&1 | grep -v WARN | tail -3
  tar xJf .gpu/llvmlite.tar.xz -C $S
  mkdir -p $S/nvidia/cu13/nvvm/libdevice $S/nvidia/cu13/bin
  cp .gpu/libdevice.10.bc $S/nvidia/cu13/nvvm/libdevice/
  P=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)
  [ -n "$P" ] && ln -sf "$P" $S/nvidia/cu13/bin/ptxas
fi
export PYTHONPATH=$S:$PWD HDSL_CACHE_DIR=/tmp/hc
el setup done
{
  nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 --version; which cc gcc; nproc; uname -r
  python3 -c "import llvmlite, numpy, PIL, lark; print('llvmlite', llvmlite.__version__, 'numpy', numpy.__version__, 'PIL', PIL.__version__, 'lark', lark.__version__)"
  python3 -c "from hdsl.codegen.cuda_tools import libdevice_path, ptxas_path; print('libdevice', libdevice_path(), 'ptxas', ptxas_path())"
  python3 -c "import pycuda.driver as d; d.init(); dv=d.Device(0); print('pycuda', dv.name(), dv.compute_capability(), d.get_version(), d.get_driver_version())"
} > $OUT/env.txt 2>&1
el env; cat $OUT/env.txt

case ,$STEPS, in *,smoke,*)
timeout ${SMOKE_S:-90} python3 $D/smoke.py > $OUT/smoke.txt 2>&1; el "smoke rc=$?"; tail -40 $OUT/smoke.txt;;
esac

case ,$STEPS, in *,repro,*)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
{
for f in $D/cases/*.txt; do
  set -- $(basename "$f" .txt | sed 's/--/ /g')      # (the file's name: NAME--W--H--SEED)
  echo "=== $* plain"; HDSL_TEST_TARGET=cuda timeout 40 python3 tests/compiler/repro.py $1 $2 $3 $4 "$(cat "$f")" 2>&1 | tail -15
  echo "=== $* memcheck ($CS)"; HDSL_TEST_TARGET=cuda timeout 60 $CS --tool memcheck --print-limit 6 python3 tests/compiler/repro.py $1 $2 $3 $4 "$(cat "$f")" 2>&1 | grep -v "Host Frame" | head -80
done
} > $OUT/repro.txt 2>&1
el repro; head -c 6000 $OUT/repro.txt;;
esac

case ,$STEPS, in *,tests,*)
HDSL_TEST_TARGET=cuda timeout ${TESTS_S:-200} python3 -m pytest -p no:cacheprovider -n 14 -q -rfE --tb=short \
  tests/examples/test_gpu_schedules.py tests/gpu tests/cuda tests/compiler/test_compiler_fuzz.py \
  tests/compiler/test_compiler_corpus.py > $OUT/tests_cuda.log 2>&1
el "tests rc=$?"; tail -25 $OUT/tests_cuda.log;;
esac

case ,$STEPS, in *,bench,*)
if [ -f benchmarks/gpu/run_device.py ]; then
  timeout ${BENCH_S:-170} python3 benchmarks/gpu/run_device.py --harness benchmarks/gpu/build/harness --out $OUT/bench ${BENCH_ARGS} > $OUT/bench.log 2>&1
  el "bench rc=$?"; tail -30 $OUT/bench.log
fi;;
esac

case ,$STEPS, in *,opengl,*)
for f in .gpu/gl/*.deb; do dpkg -x $f /; done; ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f $__EGL_VENDOR_LIBRARY_FILENAMES ] || unset __EGL_VENDOR_LIBRARY_FILENAMES
python3 -c "
from hdsl.runtime.opengl import context
c = context(); from OpenGL import GL
print('GL', GL.glGetString(GL.GL_VENDOR), GL.glGetString(GL.GL_RENDERER), GL.glGetString(GL.GL_VERSION))" > $OUT/opengl.log 2>&1
CI=1 timeout ${GL_S:-100} python3 -m pytest -p no:cacheprovider -n 14 -q -rfE --tb=short tests/opengl >> $OUT/opengl.log 2>&1
el "opengl rc=$?"; tail -25 $OUT/opengl.log;;
esac

case ,$STEPS, in *,fuzz,*)
HDSL_FUZZ_ECHO=1 HDSL_TEST_TARGET=cuda timeout ${FUZZ_S:-120} python3 -m pytest -p no:cacheprovider -n 14 -q -rfE --tb=short -m slow \
  tests/compiler/test_compiler_fuzz.py -k "gpu" > $OUT/fuzz_slow.log 2>&1
el "fuzz rc=$?"; tail -25 $OUT/fuzz_slow.log;;
esac
el all done
