"""What each schedule directive means, for the language server's hover and completion.

The signatures are the compiler's (`USAGE`, `SIGNATURES` in hdsl/schedule/record.py);
the meanings condense the directive table of docs/language.md. tests/editor checks that
every directive the compiler knows has one."""
from __future__ import annotations

from hdsl.schedule.record import SIGNATURES, USAGE

MEANING = {
    "compute_root": "compute the whole region its consumers need, before them",
    "compute_inline": "inline it into every expression that reads it (the default for pure Funcs)",
    "compute_at": "compute the region needed by one iteration of loop `var` of consumer `consumer` "
                  "(a var of its pure definition or a name its directives made); the consumer must read this Func",
    "store_at": "allocate its storage at loop `var` of `consumer`; with a `compute_at` inside, each iteration "
                "computes only what earlier ones did not (a sliding window)",
    "store_root": "allocate its storage once, outside every loop",
    "memoize": "accepted, no effect yet",
    "store_nontemporal": "write its values with non-temporal (streaming) stores that bypass the caches, where a "
                         "dense vector store is aligned (CPU targets; for a large output not read again soon)",
    "split": "split loop `v` into an outer `vo` and an inner `vi` of `factor` iterations; an optional last "
             "argument names the tail strategy (round_up, guard_with_if, shift_inwards)",
    "fuse": "join loops `a` (inner) and `b` (outer) into one loop `ab`",
    "reorder": "reorder loops, innermost first",
    "tile": "split `x` and `y` by `w` and `h` and put the inner loops innermost; with four names the outer "
            "loops get new names, otherwise they keep `x` and `y`",
    "vectorize": "SIMD over loop `v` (of constant extent 2 to 64), or split `v` by `n` first and vectorize "
                 "the inner loop `v_i`",
    "unroll": "unroll loop `v` (constant extent), or split it by `n` and unroll the inner loop `v_i`",
    "parallel": "run the iterations of loop `v` on the thread pool; with `n`, in tasks of `n` iterations",
    "bound": "compute pure var `v` over exactly [min, min + extent), checked at run time",
    "estimate": "a size hint; accepted, no effect yet",
    "reorder_storage": "the storage order of the dimensions, innermost first",
    "gpu_blocks": "map loops to the GPU grid's blocks, innermost first (x, y, z; cuda and opengl targets)",
    "gpu_threads": "map loops to a GPU block's threads, innermost first (x, y, z; cuda and opengl targets)",
    "gpu_tile": "tile 1, 2 or 3 loops and map the tiles to GPU blocks and the loops inside a tile to threads "
                "(cuda and opengl targets); an optional last argument names the tail strategy",
    "update": "what follows in the chain applies to update definition `i` (from 0, in the order written)",
    "rfactor": "factor an associative update into partial results over the other rdom dimensions, indexed "
               "by the new var `u` and computed in parallel, then combined along `r.x`; ends the chain",
    "tile_iir": "run the filters of `f.iir(±v, ...)` in tiles of `n` (Chaurasia et al. 2015), or those along "
                "two dims together in tiles of `nx` x `ny` (Nehab et al. 2011)",
    "fold_storage": "keep only `n` slices of dimension `v` (addressed modulo `n`) of a Func stored outside the "
                    "serial loop it slides in; a window wider than `n` is an error (at compile time when constant, "
                    "else at run time)",
    "glsl": "OpenGL's fragment path (--target opengl): one fragment per (x, y), up to four channels `c` "
            "(a constant extent: bound it) in one RGBA texel, as an OpenGL ES 3.0 fragment shader",
}

# argument kinds (record.py's SIGNATURES) that name an existing loop or dimension, and a new one
LOOP_KINDS = {"var", "var_of", "dim", "rvar"}
NEW_KIND = "new"


def usage(name: str) -> str:
    return USAGE.get(name, f"{name}(...)")


def arg_kinds(name: str, nargs: int) -> list[str]:
    """The kind of each of `nargs` arguments of directive `name` (the signature of that arity,
    else the longest; '*' repeats the last kind)."""
    sigs = SIGNATURES.get(name) or [[]]
    sig = next((s for s in sigs if len(s) == nargs), None)
    if sig is None:
        sig = next((s for s in sigs if s and s[-1] == "*"), max(sigs, key=len))
    kinds = []
    for i in range(nargs):
        if i < len(sig) and sig[i] != "*":
            kinds.append(sig[i])
        elif sig and sig[-1] == "*" and len(sig) >= 2:
            kinds.append(sig[-2])
        else:
            kinds.append("other")
    return kinds


def hover_text(name: str) -> str:
    return f"```hdsl\n{usage(name)}\n```\nschedule directive: {MEANING.get(name, '')}"
