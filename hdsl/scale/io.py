"""Images larger than memory as Dask arrays: zarr stores, TIFF files (tiled or not), .npy
files (memory-mapped), and the small formats hdsl reads (docs/scale.md)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from hdsl.diagnostics import HdslError


def _suffix(path) -> str:
    return Path(os.fspath(path).rstrip("/")).suffix.lower()


def open_image(path, chunks=(1024, 1024)):
    """A Dask array (H, W[, C]) reading `path` chunk by chunk: .zarr (a zarr array), .tif/.tiff
    (through tifffile's zarr view: only the tiles or strips a chunk overlaps are read), .npy
    (memory-mapped); .png and .jpg are read whole. chunks: (height, width) of the chunks where
    the format leaves it open (zarr and TIFF keep their own)."""
    import dask.array as da
    kind = _suffix(path)
    if not os.path.exists(path):
        raise HdslError(f"cannot read '{path}': no such file", None, "check the path")
    if kind in (".zarr", ".tif", ".tiff", ".npy"):
        src = {".zarr": _Zarr, ".npy": _Npy}.get(kind, _Tiff)(os.fspath(path))
        own = src.chunks if src.chunks is not None else tuple(chunks) + (-1,) * (len(src.shape) - 2)
        arr = da.from_array(src, chunks=own, asarray=False, name=f"{kind[1:]}-{src.token}")
        SOURCES[arr.name] = src
        return arr

    def whole(arr):
        return da.from_array(arr, chunks=tuple(chunks) + (-1,) * (arr.ndim - 2))
    from hdsl.runtime.images import ImageError, load_image
    try:
        return whole(load_image(path))
    except ImageError as e:
        raise HdslError(e.message, None, e.hint) from None


def save_image(arr, path, tile=(256, 256)) -> None:
    """Compute the Dask array `arr` chunk by chunk into `path`: .zarr (a zarr array with arr's
    chunks, written in parallel), .tif/.tiff (a tiled TIFF of `tile` = (height, width), each a
    multiple of 16, written one row of chunks at a time, so memory holds one row), .npy (a
    memory-mapped file). The file appears whole: written under a temporary name, then renamed."""
    import dask.array as da
    kind = _suffix(path)
    path = os.fspath(path).rstrip("/")
    tmp = str(Path(path).with_name("." + Path(path).name + ".part"))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if kind == ".zarr":
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        da.to_zarr(arr, tmp)
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
        return
    if kind == ".npy":
        np.lib.format.open_memmap(tmp, mode="w+", dtype=arr.dtype, shape=arr.shape).flush()
        da.store(arr, _NpyWriter(os.path.abspath(tmp)), lock=False)    # (by path: Dask workers too)
        os.replace(tmp, path)
        return
    if kind in (".tif", ".tiff"):
        import tifffile
        th, tw = tile
        if th % 16 or tw % 16:
            raise HdslError(f"tile={tile}: a TIFF tile's sides are multiples of 16", None)
        rows = arr.rechunk((th, -1) + (-1,) * (arr.ndim - 2))

        def tiles():
            for i in range(rows.numblocks[0]):
                band = np.asarray(rows.blocks[i].compute())
                for x in range(0, arr.shape[1], tw):
                    t = band[:, x:x + tw]
                    if t.shape[:2] != (th, tw):     # the last row and column padded to whole tiles
                        pad = [(0, th - t.shape[0]), (0, tw - t.shape[1])] + [(0, 0)] * (t.ndim - 2)
                        t = np.pad(t, pad)
                    yield t
        tifffile.imwrite(tmp, tiles(), shape=arr.shape, dtype=arr.dtype, tile=(th, tw),
                         photometric="rgb" if arr.ndim == 3 and arr.shape[2] in (3, 4) else "minisblack")
        os.replace(tmp, path)
        return
    raise HdslError(f"cannot write '{path}' as a large image: use .zarr, .tif or .npy", None)


# the files behind the arrays open_image made, by the array's name: on_dask reads each tile's
# region from the file itself (no chunk travels between workers, none waits in memory for its
# neighbours' tiles)
SOURCES: dict = {}


class _Source:
    """A file as a lazy array that travels to Dask workers as its path: each read opens it."""
    chunks = None

    def __init__(self, path: str):
        st = os.stat(path)
        self.path = os.path.abspath(path)
        self.token = hashlib.sha1(f"{self.path}\0{st.st_mtime_ns}\0{st.st_size}".encode()).hexdigest()[:16]
        self.shape, self.dtype = self._describe()
        self.ndim = len(self.shape)


class _Zarr(_Source):
    def _describe(self):
        import zarr
        z = zarr.open_array(self.path, mode="r")
        self.chunks = tuple(z.chunks)
        return tuple(z.shape), np.dtype(z.dtype)

    def __getitem__(self, key):
        import zarr
        return np.asarray(zarr.open_array(self.path, mode="r")[key])


class _Npy(_Source):
    def _describe(self):
        m = np.load(self.path, mmap_mode="r")
        return m.shape, m.dtype

    def __getitem__(self, key):
        return np.array(np.load(self.path, mmap_mode="r")[key])


class _Tiff(_Source):
    """A TIFF file's first image, read through tifffile's zarr view (only the tiles or strips a
    slice overlaps)."""

    def _describe(self):
        import tifffile
        with tifffile.TiffFile(self.path) as f:
            s = f.series[0]
            return tuple(s.shape), np.dtype(s.dtype)

    def __getitem__(self, key):
        import tifffile
        import zarr
        store = tifffile.imread(self.path, aszarr=True)
        try:
            z = zarr.open(store, mode="r")
            if not hasattr(z, "shape"):         # a multi-resolution file: its full-resolution level
                z = z[0]
            return np.asarray(z[key])
        finally:
            store.close()


class _NpyWriter:
    """Writes a chunk into an .npy file opened by path for each write (a memory map would be
    pickled to Dask workers as a copy)."""

    def __init__(self, path: str):
        self.path = path

    def __setitem__(self, key, value):
        m = np.load(self.path, mmap_mode="r+")
        m[key] = value
        m.flush()
