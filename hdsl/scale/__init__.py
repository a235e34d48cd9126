"""Beyond one image on one machine (docs/scale.md): batches of images in local processes or on a
Dask cluster (batch.py: `hdsl.batch`, `hdsl run` with an --input pattern), images larger than
memory as Dask arrays cut into tiles where bounds inference says (tiles.py: `p.on_dask`), what
runs in a worker (worker.py), and zarr / TIFF / .npy files as Dask arrays (io.py). Only the
Dask paths import Dask: `import hdsl` does not."""
