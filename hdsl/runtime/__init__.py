"""Runtime support shared by every target: image files in and out (`images`),
and — as they arrive — buffers, the thread pool, the compile cache and the
CUDA / OpenGL hosts."""
