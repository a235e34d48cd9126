#!/bin/bash
# Builds .gpu/ (ignored by git), what benchmarks/gpu/device/run.sh needs on a lent GPU machine
# that has Python 3.12, NumPy, Pillow, pytest, CUDA's driver and nothing that can be fetched:
#   - pycuda, built here for CPython 3.12 against pip's CUDA 13 headers and linked against a
#     stand-in libcuda.so.1 that only names the driver's functions (the machine's real driver
#     library is loaded in its place there);
#   - pytools, platformdirs, mako, siphash24 (pycuda's needs), lark, PyOpenGL: wheels;
#   - llvmlite, the version this checkout's .venv has, its library stripped and xz-packed
#     (the wheel is 60 MB; the tree that travels may be 64 MiB in all);
#   - libdevice.10.bc (from the nvidia-nvvm wheel in .venv);
#   - the glvnd loaders (libEGL, libOpenGL...) as .debs, for OpenGL on the vendor's EGL.
# Needs: python3.12 (pyenv's here), g++, .venv with the test extra, apt-get download.
# Run from the repository root:  bash benchmarks/gpu/device/prepare.sh   (about 4 minutes)
set -euo pipefail
ROOT=$PWD
W=${GPU_PREP_DIR:-/tmp/hdsl-gpu-prep}
PY312=${PY312:-python3.12}
"$PY312" -c "" 2>/dev/null || PY312=$(ls ~/.pyenv/versions/3.12*/bin/python3.12 | head -1)   # (pyenv's shim may refuse)
NV=$(.venv/bin/python -c "import nvidia, os; print([p for p in nvidia.__path__ if os.path.isdir(p + '/cu13')][0] + '/cu13')")
mkdir -p "$W" .gpu/gl
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/.gpu/" >> .git/info/exclude; }
[ -d "$W/v312" ] || "$PY312" -m venv "$W/v312"
"$W/v312/bin/pip" install -q -U pip wheel setuptools "numpy>=2"
pl="--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64"
"$W/v312/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 $pl -d .gpu \
    pytools platformdirs mako siphash24 "lark==$(.venv/bin/python -c 'import lark; print(lark.__version__)')" pyopengl

# pycuda: CUDA headers (nvidia-cuda-runtime's cuda.h, nvidia-cuda-profiler-api's cudaProfiler.h)
cd "$W"
rm -rf cudaroot prof && mkdir -p cudaroot/include cudaroot/lib64 prof
"$W/v312/bin/pip" download -q --no-deps --only-binary=:all: -d prof "nvidia-cuda-profiler-api>=13,<14"
(cd prof && unzip -q -o ./*.whl)
for f in "$NV"/include/* prof/nvidia/cu13/include/*; do ln -sf "$(realpath "$f")" cudaroot/include/; done
"$W/v312/bin/pip" download -q --no-deps --no-binary=pycuda --no-build-isolation -d sdist pycuda
rm -rf pycuda-src && mkdir pycuda-src && tar xzf sdist/pycuda-*.tar.gz -C pycuda-src --strip-components 1
# a first stand-in without symbols, to build; then one that names every cu* function the
# extension calls, so that the relinked extension needs libcuda.so.1 by name
echo 'void hdsl_stub(void){}' > stub.c && gcc -shared -fPIC -Wl,-soname,libcuda.so.1 stub.c -o cudaroot/lib64/libcuda.so
(cd pycuda-src && "$W/v312/bin/python" configure.py --cuda-root="$W/cudaroot" --no-cuda-enable-curand >/dev/null \
   && "$W/v312/bin/pip" wheel -q --no-build-isolation --no-deps -w "$W/built" .)
so=$(ls pycuda-src/build/lib*/pycuda/_driver*.so)
nm -D -u "$so" | awk '$2 ~ /^cu/ {print "int " $2 "(void){return 0;}"}' > stub.c
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 stub.c -o cudaroot/lib64/libcuda.so
objs=$(find pycuda-src/build/temp* -name "*.o" | grep -v _pycuda_struct)
g++ -shared -pthread -Wl,--no-as-needed $objs -L"$W/cudaroot/lib64" -lcuda -o _driver.so
readelf -d _driver.so | grep -q "libcuda.so.1" || { echo "the relinked pycuda does not need libcuda.so.1"; exit 1; }
rm -rf unp && "$W/v312/bin/python" -m wheel unpack -d unp built/pycuda-*.whl
cp _driver.so unp/pycuda-*/pycuda/$(basename "$so")
"$W/v312/bin/python" -m wheel pack -d "$ROOT/.gpu" unp/pycuda-*

# llvmlite: this checkout's version, stripped and packed
V=$("$ROOT/.venv/bin/python" -c "import llvmlite; print(llvmlite.__version__)")
rm -rf ll && mkdir ll && "$W/v312/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 $pl -d ll "llvmlite==$V"
(cd ll && unzip -q -o llvmlite-*.whl && strip llvmlite/binding/libllvmlite.so && tar cf - llvmlite | xz -T0 -6 > "$ROOT/.gpu/llvmlite.tar.xz")
cp "$NV/nvvm/libdevice/libdevice.10.bc" "$ROOT/.gpu/"

# the glvnd loaders (the machine has the vendor's EGL and GL, not the loaders)
cd "$ROOT/.gpu/gl"
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial && apt-get $o update -qq && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2
cd "$ROOT" && du -sh .gpu && ls .gpu
