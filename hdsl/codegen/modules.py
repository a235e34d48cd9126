"""Compile orchestration: splitting one LLVM module into parts that compile in parallel
(hdsl/runtime/jit.py compiles them in worker processes; hdsl/aot.py links them)."""
from __future__ import annotations

from llvmlite import ir


# Splitting a module for parallel compilation. LLVM's time grows with a function's
# instructions plus a fixed cost per function (measured on the local Laplacian: ~50 us per
# unit of the weight below, each small task function ~0.05 s of optimization and code
# generation); a part lighter than MIN_PART_WEIGHT (~0.2 s) is not worth a process.
FUNCTION_WEIGHT = 1000
MIN_PART_WEIGHT = 4000


def function_weight(f: ir.Function) -> int:
    return sum(len(b.instructions) for b in f.blocks) + FUNCTION_WEIGHT


def balance(weights: list[int], n: int) -> list[list[int]]:
    """The indices of `weights` in n groups of about equal total weight (each, heaviest first,
    onto the lightest group so far), the heaviest group first."""
    groups: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        k = load.index(min(load))
        groups[k].append(i)
        load[k] += weights[i]
    order = sorted(range(n), key=lambda k: -load[k])
    return [groups[k] for k in order]


def split_module(module: ir.Module, parts: int) -> list[str]:
    """The module as at most `parts` LLVM IR texts that compile separately and link together:
    each defines some of the functions (balanced by weight, heaviest part first) and declares
    the others. Task functions are reached only through their addresses, which the thread
    pool calls, so no optimization crosses a part's boundary. A small module stays whole."""
    defined = [f for f in module.functions if f.blocks]
    weights = [function_weight(f) for f in defined]
    n = max(1, min(parts, len(defined), sum(weights) // MIN_PART_WEIGHT))
    if n == 1:
        return [str(module)]
    saved = [(f, f.blocks, f.linkage) for f in defined]
    texts = []
    try:
        for group in balance(weights, n):
            owned = {defined[i].name for i in group}
            for f, blocks, _ in saved:
                f.linkage = ""           # visible to the other parts (the object stays private to its engine)
                f.blocks = blocks if f.name in owned else []
            texts.append(str(module))
    finally:
        for f, blocks, linkage in saved:
            f.blocks, f.linkage = blocks, linkage
    return texts


def release(module: ir.Module) -> None:
    """Break a module's reference cycles once it is printed: instructions and their block,
    phis and the values of later blocks, blocks and their function. Dropped, the module is
    then freed at once by reference counting instead of being left to the cyclic collector,
    whose next collection would walk it whole (the local Laplacian's: ~90k objects, about
    0.05 s). The module is empty after this."""
    for f in module.functions:
        for b in f.blocks:
            for i in b.instructions:
                if isinstance(i, ir.PhiInstr):
                    i.incomings = []
            b.instructions = []
            b.terminator = None
        f.blocks = []
