"""Loads that read neighbouring elements, made together (CodeGenCPU.store): gathers
whose indices differ by constants, and strided loads whose spans overlap.

A vectorized statement often gathers from one buffer at several indices that differ, on
every lane, by the same small constants: the bilateral grid's slicing reads
`blury(xi, yi, zj, c)` for c = 0, 1 and for zj, zj + 1, in a grid stored with c innermost
and z next (`reorder_storage(c, z, x, y)`), so four of its sixteen gathers read the four
consecutive floats at `i`, `i + 1`, `i + 2`, `i + 3` for one lane-varying `i`. Halide gathers
each one on its own (a scalar load per lane, 128 loads and inserts per vector of 8 pixels on
AVX2). Here such loads are found before the statement is generated, and each set is read as
one short vector per lane (a 16-byte load of the four floats) and transposed into its
members' vectors (unpacks within 128-bit chunks): a quarter of the loads, no inserts.

Which loads: gathers in the statement's value (a vector index that reads memory: the
patterned and clamped loads of index arithmetic keep their own paths), of 32- or 64-bit
elements, outside the arms of selects (which may not run on every lane). Two such loads
of one buffer belong together when their indices, as polynomials over the index's
non-arithmetic parts (variables, loads, divisions, casts), differ by a constant; a
variable whose value is a constant in the generated code (an allocation's stride made of
constant extents, as blury's z stride 2) counts as that constant. A set is read as windows
whose first and last elements are both read by a member: every element between them is
then inside the same allocation on every lane (an allocation is contiguous), so nothing is
read that the gathers would not have had in bounds.

Strided loads of a constant stride (2 to 8) whose first lanes differ by constants, the taps
of a downsampling filter, share their dense vectors the same way (_strided_groups).
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.codegen.llvm import K, Interleave, Ramp, _suffix, llvm_type
from hdsl.ir.expr import BinOp, Const, Expr, Select, Var, intern
from hdsl.ir.stmt import Load
from hdsl.ir.types import I32

_MAX_TERMS = 48           # a polynomial larger than this is not compared (never in practice)
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)


def _wrap(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def const_int(v) -> int | None:
    """The value of an integer LLVM value built from constants by + - * and casts (an
    allocation's size or stride, made from constant extents), else None."""
    if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType) and isinstance(v.constant, int):
        return v.constant
    if isinstance(v, ir.CastInstr) and v.opname in ("sext", "zext", "trunc") and isinstance(v.type, ir.IntType):
        x = const_int(v.operands[0])
        if x is None or (v.opname == "zext" and x < 0):
            return None
        if v.opname == "trunc":
            w = v.type.width
            x &= (1 << w) - 1
            x = x - (1 << w) if x >= 1 << (w - 1) else x
        return x
    if isinstance(v, ir.Instruction) and v.opname in ("add", "sub", "mul") and len(v.operands) == 2:
        x, y = const_int(v.operands[0]), const_int(v.operands[1])
        if x is None or y is None:
            return None
        r = x + y if v.opname == "add" else x - y if v.opname == "sub" else x * y
        return r if -2 ** 62 < r < 2 ** 62 else None
    return None


def polynomial(e: Expr, value_of) -> dict | None:
    """e (an i32 index) as {monomial: coefficient}, a monomial a sorted tuple of the ids of
    its (interned) factors, () the constant; coefficients mod 2^32 (i32 arithmetic wraps,
    and two in-bounds indices differ by less than 2^31). value_of(name): a variable's
    constant value or None. None: too large."""
    if isinstance(e, Const) and e.type == I32:
        return {(): _wrap(int(e.value))} if int(e.value) else {}
    if isinstance(e, Var) and e.type == I32 and (k := value_of(e.name)) is not None:
        return {(): _wrap(k)} if k else {}
    if isinstance(e, BinOp) and e.type == I32 and e.op in ("+", "-", "*"):
        a, b = polynomial(e.a, value_of), polynomial(e.b, value_of)
        if a is None or b is None:
            return None
        if e.op == "*":
            out: dict = {}
            for ma, ca in a.items():
                for mb, cb in b.items():
                    m = tuple(sorted(ma + mb))
                    out[m] = _wrap(out.get(m, 0) + ca * cb)
        else:
            out = dict(a)
            sign = 1 if e.op == "+" else -1
            for m, c in b.items():
                out[m] = _wrap(out.get(m, 0) + sign * c)
        out = {m: c for m, c in out.items() if c}
        return out if len(out) <= _MAX_TERMS else None
    return {(id(intern(e)),): 1}


def _difference(p: dict, q: dict) -> int | None:
    """p - q when it is a constant, else None."""
    d = dict(p)
    for m, c in q.items():
        d[m] = _wrap(d.get(m, 0) - c)
    rest = {m: c for m, c in d.items() if c}
    if any(m != () for m in rest):
        return None
    return rest.get((), 0)


def every_lane(value: Expr) -> list[Load]:
    """The loads in `value` that run on every lane (not in a select's arms, which may not),
    bool ones left out."""
    out, seen, todo = [], set(), [value]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Load) and not n.type.is_bool():
            out.append(n)
        todo.extend([n.cond] if isinstance(n, Select) else n.children())
    return out


def candidates(loads: list[Load]) -> list[Load]:
    """The loads (of every_lane) that may be gathers: an index that reads memory, an
    element of 32 or 64 bits."""
    return [n for n in loads if n.type.bits in (32, 64) and any(isinstance(x, Load) for x in _nodes(n.index))]


def _nodes(e: Expr):
    todo, seen = [e], set()
    while todo:
        n = todo.pop()
        if id(n) not in seen:
            seen.add(id(n))
            yield n
            todo.extend(n.children())


def windows(offsets: list[int], max_n: int) -> list[tuple[int, int]]:
    """(start, n) windows of n = 2, 4, ... up to max_n elements, each starting and ending at
    an offset that is read, covering as many of the offsets as it can (greedily, in order)."""
    have = sorted(set(offsets))
    out, i = [], 0
    while i < len(have):
        start = have[i]
        n = max_n
        while n >= 2 and start + n - 1 not in have:
            n //= 2
        if n < 2:
            i += 1
            continue
        out.append((start, n))
        while i < len(have) and have[i] < start + n:
            i += 1
    return out


def transpose(cg, st, rows: list, n: int) -> list:
    """rows: L vectors of n elements (lane l's window); the n vectors of L lanes (column j:
    element j of every lane's window), by concatenating rows l, l + n, l + 2n, ... and then
    unpacking within each chunk of n lanes (n = 2: one unpack; n = 4: two rounds, the 4x4
    transpose of _MM_TRANSPOSE4_PS in every 128-bit chunk)."""
    b = st.b
    L = len(rows)
    a = [cg.concat(st, rows[k::n]) for k in range(n)]

    def unpack(x, y, half: int, width: int):
        # per chunk of n lanes: width-lane blocks of x and y alternately, from the chunk's
        # first half (half = 0) or second half (half = 1)
        mask = []
        for m in range(0, L, n):
            base = m + half * n // 2
            for i in range(0, n // 2, width):
                mask += [base + i + j for j in range(width)] + [L + base + i + j for j in range(width)]
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(_I32, L), mask))
    if n == 2:
        return [unpack(a[0], a[1], 0, 1), unpack(a[0], a[1], 1, 1)]
    t = [unpack(a[0], a[1], 0, 1), unpack(a[0], a[1], 1, 1), unpack(a[2], a[3], 0, 1), unpack(a[2], a[3], 1, 1)]
    return [unpack(t[0], t[2], 0, 2), unpack(t[0], t[2], 1, 2), unpack(t[1], t[3], 0, 2), unpack(t[1], t[3], 1, 2)]


def prepare(cg, st, value: Expr) -> int:
    """Load the gathers of `value` that read neighbouring elements together, and its strided
    loads that overlap from shared vectors, leaving each member's vector in st.cache (where
    generating the load finds it). Returns how many loads were so made (for tests)."""
    value_of = _value_of(st)
    on_every_lane = every_lane(value)
    loads = [ld for ld in candidates(on_every_lane) if cg.cached(st, ld) is None]
    made = 0
    for members in _sets(loads, value_of):
        made += _load_windows(cg, st, members[0][0].buffer, members)
    if not cg.avx512bw and not cg.SHARE_STRIDED_AVX2:
        # (AVX-512 only: on AVX2, interleaved against the previous code in one process,
        # interpolate's downsampling levels took 5-14% more CPU with shared vectors; with
        # the picks made within 128-bit halves (pick), 1-2% more: CodeGenCPU.SHARE_STRIDED_AVX2)
        # On AVX2 only the phases of one stride are shared (x * 2 and x * 2 + 1: the same
        # dense vectors, each loaded once; CodeGenCPU.SHARE_PHASES)
        if not cg.SHARE_PHASES:
            return made
        return made + _strided_groups(cg, st, on_every_lane, value_of, phases_only=True)
    return made + _strided_groups(cg, st, on_every_lane, value_of)


def prepare_lets(cg, st, values: list[Expr]) -> int:
    """The strided loads that consecutive lets bind (`values`, each a load), where they are
    phases of one stride (camera_pipe's deinterleave: x * 2 and x * 2 + 1 of two rows), read
    from shared vectors as in prepare. Returns how many loads were so made."""
    if not cg.SHARE_PHASES:
        return 0
    return _strided_groups(cg, st, [v for v in values if not v.type.is_bool()], _value_of(st), phases_only=True)


def _value_of(st):
    """value_of(name) of polynomial: a variable's constant value in st, or None."""
    syms = st.syms

    def value_of(name):
        v = syms.get(name)
        return None if v is None or isinstance(v[0], (Ramp, Interleave)) else const_int(v[0])
    return value_of


def _sets(loads, value_of) -> list:
    """Loads of one buffer and type whose indices differ by constants: [[(load, offset)]]."""
    sets: list[tuple[tuple, dict, list]] = []
    for ld in loads:
        p = polynomial(ld.index, value_of)
        if p is None:
            continue
        for key, ref, members in sets:
            d = _difference(p, ref) if key == (ld.buffer, ld.type) else None
            if d is not None:
                members.append((ld, d))
                break
        else:
            sets.append(((ld.buffer, ld.type), p, [(ld, 0)]))
    return [members for _, _, members in sets if len(members) > 1]


def _strided_groups(cg, st, on_every_lane: list[Load], value_of, phases_only: bool = False) -> int:
    """Strided loads (constant stride s of 2 to 8) of one buffer whose first lanes differ by
    constants (a [1 2 1] downsampling's taps at 2x - 1, 2x and 2x + 1) read shared dense
    vectors: each tap's lanes lie in n = ceil((s (L - 1) + 1) / L) consecutive vectors, and
    where the taps' spans overlap their vectors are placed on a common grid, as far as
    the span all of them cover allows (its first and last elements are read by the first
    and last tap; every vector lies inside it). Three taps of stride 2 read 4 vectors of
    L lanes instead of 6 (Halide reads 4 too). phases_only: only sets whose first lanes lie
    within one stride (different phases of the same elements, as a deinterleave's x * 2 and
    x * 2 + 1), which then read the same vectors, each the vectors it would read alone or
    their neighbours on the grid. Returns how many loads were so made."""
    b = st.b
    loads = []
    if phases_only:
        # (found before any index is generated, so that the code of a statement without such
        # loads is made in the same order as without sharing)
        on_every_lane = _phase_sets(st, [ld for ld in on_every_lane if cg.cached(st, ld) is None], value_of)
    for ld in on_every_lane:
        if cg.cached(st, ld) is not None:
            continue
        iv = cg.expr(st, ld.index, keep_ramp=True)
        if isinstance(iv, Ramp) and isinstance(iv.stride, int) and 2 <= iv.stride <= 8 and iv.lanes >= 2:
            loads.append((ld, iv))
    if len(loads) < 2:
        return 0
    ramp_of = {id(ld): iv for ld, iv in loads}
    made = 0
    for members in _sets([ld for ld, _ in loads], value_of):
        s, lanes = ramp_of[id(members[0][0])].stride, ramp_of[id(members[0][0])].lanes
        if any(ramp_of[id(ld)].stride != s or ramp_of[id(ld)].lanes != lanes for ld, _ in members):
            continue
        lo = min(o for _, o in members)
        members = [(ld, o - lo) for ld, o in members]
        if phases_only and max(o for _, o in members) >= s:
            continue
        span = s * (lanes - 1) + 1
        n = -(-span // lanes)
        total = max(r for _, r in members) + span
        ranges = {id(ld): range(max(0, r + span - n * lanes), min(r, total - n * lanes) + 1) for ld, r in members}
        counts: dict[int, int] = {}
        for rg in ranges.values():
            for c in rg:
                counts[c] = counts.get(c, 0) + 1
        first = next(ld for ld, r in members if r == 0)
        t = first.type
        mt = llvm_type(t, True)
        vt = ir.VectorType(mt, lanes)
        ptr, ramp = cg.hoisted_access(st, cg.buffer_ptr(st, first.buffer), mt,
                                      cg.wide_ramp(st, first.index, ramp_of[id(first)]))
        start = b.gep(ptr, [ramp.base], source_etype=mt)
        chunks: dict[int, object] = {}

        def chunk(pos):
            if pos not in chunks:
                ptr = start if pos == 0 else b.gep(start, [ir.Constant(_I32, pos)], source_etype=mt)
                chunks[pos] = b.load(ptr, typ=vt, align=max(1, t.bits // 8))
            return chunks[pos]
        for ld, r in members:
            rg = ranges[id(ld)]
            if not rg:
                continue                              # (its own strided load)
            c = max(rg, key=lambda k: (counts[k], -k))
            v = pick(cg, st, [chunk(c + k * lanes) for k in range(n)], [r + s * i - c for i in range(lanes)])
            st.cache[id(ld)] = (ld, v, st.clock)
            made += 1
    return made


def _phase_sets(st, loads: list[Load], value_of) -> list[Load]:
    """The loads of `loads` in sets of one buffer whose members have one constant lane
    stride s (2 to 8, lane_stride) and first lanes less than s apart."""
    strides = {id(ld): lane_stride(st, ld.index) for ld in loads}
    out = []
    for members in _sets([ld for ld in loads if strides[id(ld)] in range(2, 9)], value_of):
        s = {strides[id(ld)] for ld, _ in members}
        offs = [o for _, o in members]
        if len(s) == 1 and max(offs) - min(offs) < min(s):
            out += [ld for ld, _ in members]
    return out


def lane_stride(st, e: Expr) -> int | None:
    """How much integer index e grows from one lane to the next, read from the vectorized
    loop's ramps that st.syms binds, where that is a constant; else None."""
    if isinstance(e, Const):
        return 0
    if isinstance(e, Var):
        v = st.syms.get(e.name)
        if v is None:
            return None
        if isinstance(v[0], Ramp):
            return v[0].stride if isinstance(v[0].stride, int) else None
        return None if isinstance(v[0], Interleave) or isinstance(v[0].type, ir.VectorType) else 0
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = lane_stride(st, e.a), lane_stride(st, e.b)
        return None if a is None or b is None else (a + b if e.op == "+" else a - b)
    if isinstance(e, BinOp) and e.op == "*":
        a, b = lane_stride(st, e.a), lane_stride(st, e.b)
        if isinstance(e.b, Const) and a is not None:
            return a * int(e.b.value)
        if isinstance(e.a, Const) and b is not None:
            return b * int(e.a.value)
        return 0 if a == 0 and b == 0 else None
    # (any other node: the same on every lane where its operands are)
    return 0 if all(lane_stride(st, c) == 0 for c in e.children()) else None


def _load_windows(cg, st, buffer: str, members: list) -> int:
    b = st.b
    t = members[0][0].type
    eb = t.bits // 8
    made = 0
    for start, n in windows([o for _, o in members], 16 // eb):
        inside = [(ld, o) for ld, o in members if start <= o < start + n]
        first = next(ld for ld, o in inside if o == start)
        iv = cg.expr(st, first.index, keep_ramp=True)
        if isinstance(iv, (Ramp, Interleave)) or not isinstance(iv.type, ir.VectorType) or iv.type.element != _I32:
            continue                               # (a dense or strided load, or one lane)
        lanes = iv.type.count
        if lanes % n or lanes < n:
            continue
        mt = llvm_type(t, True)
        base = cg.buffer_ptr(st, buffer)
        rt = ir.VectorType(mt, n)
        rows = []
        for k in range(lanes):
            off = b.sext(b.extract_element(iv, ir.Constant(_I32, k)), _I64)
            rows.append(b.load(b.gep(base, [off], source_etype=mt), typ=rt, align=eb))
        cols = transpose(cg, st, rows, n)
        for ld, o in inside:
            st.cache[id(ld)] = (ld, cols[o - start], st.clock)
            made += 1
    return made


def span_chunks(lanes: int, stride: int) -> tuple[list[int], list[int]]:
    """Where a strided load of `lanes` lanes reads: the offsets of the dense vectors of
    `lanes` elements covering exactly its span (the last overlapping its neighbour, so that
    nothing past the last lane is read), and each lane's position in their concatenation."""
    span = (lanes - 1) * stride + 1
    n = -(-span // lanes)
    offsets = [k * lanes for k in range(n - 1)] + [span - lanes]

    def where(el):
        k = min(el // lanes, n - 1)
        return k * lanes + el - offsets[k]
    return offsets, [where(i * stride) for i in range(lanes)]


def in_lane_order(positions: list[int], lanes: int, bits: int) -> list[int] | None:
    """For picking `positions` out of two 256-bit vectors of `lanes` elements of `bits`
    bits: an order of the result's lanes in which each lane comes from its source's own
    128-bit half, half by half the first lanes from the first vector and the rest from the
    second, with the same selectors in both halves for 32-bit elements (one vshufps; one
    vshufpd for 64-bit). order[i] is the result lane that lane i of that in-half pick holds.
    None: no such order, or it is already the result's (no second step needed)."""
    if lanes * bits != 256 or bits not in (32, 64) or len(positions) != lanes:
        return None
    e = lanes // 2
    halves: list[list[int]] = [[], []]
    for j, k in enumerate(positions):
        halves[(k % lanes) // e].append(j)
    order = []
    sels = []
    for h in (0, 1):
        if len(halves[h]) != e:
            return None
        first = [j for j in halves[h] if positions[j] < lanes]
        second = [j for j in halves[h] if positions[j] >= lanes]
        if len(first) != e // 2:
            return None
        order += first + second
        sels.append([positions[j] % e for j in first + second])
    if bits == 32 and sels[0] != sels[1]:
        return None
    return None if order == list(range(lanes)) else order


def pick(cg, st, chunks: list, positions: list[int]):
    """The lanes at `positions` of the concatenated chunks (vectors of one type): one shuffle.
    On 256-bit targets without two-source cross-half permutes (cg.in_lane_picks) a pick of
    two chunks that in_lane_order allows is made as a pick within 128-bit halves, then a
    one-source shuffle of its lanes into order: a strided load's taps (x*2 - 1, x*2, x*2 + 1)
    then share one order, LLVM's instcombine moves that shuffle past the lane-wise
    arithmetic that combines them (op(shuffle(a, M), shuffle(b, M)) -> shuffle(op(a, b), M)),
    and one cross-half permute per result vector replaces one per tap."""
    b = st.b
    packed = _phase_pack(cg, st, chunks, positions)
    if packed is not None:
        return packed
    sel = ir.Constant(ir.VectorType(_I32, len(positions)), positions)
    if len(chunks) == 2:
        vt = chunks[0].type
        order = (in_lane_order(positions, vt.count, vt.element.width if isinstance(vt.element, ir.IntType)
                               else {ir.FloatType: 32, ir.DoubleType: 64}.get(type(vt.element), 0))
                 if getattr(cg, "in_lane_picks", False) else None)
        if order is None:
            return b.shuffle_vector(chunks[0], chunks[1], sel)
        inner = b.shuffle_vector(chunks[0], chunks[1], ir.Constant(sel.type, [positions[j] for j in order]))
        back = [order.index(j) for j in range(len(order))]
        return b.shuffle_vector(inner, ir.Constant(vt, ir.Undefined), ir.Constant(sel.type, back))
    cat = cg.concat(st, chunks) if len(chunks) > 1 else chunks[0]
    return b.shuffle_vector(cat, ir.Constant(cat.type, ir.Undefined), sel)


def _phase_pack(cg, st, chunks: list, positions: list[int]):
    """Phase r (0 or 1) of stride 2 of 16-bit (8-bit) elements, positions r, r + 2, ...
    of chunks that hold twice as many elements, on AVX2 (cg.phase_packs), or None: per 256
    bits of result, its two source vectors as 32-bit (16-bit) lanes, each masked to its low
    half (r = 0) or shifted right by half (r = 1), packed with unsigned saturation (vpackusdw,
    vpackuswb: exact, the values fit), then the pack's 64-bit quarters put in order (vpermq;
    the pack works within 128-bit halves). Two ALU operations, one pack and one permute per
    256 bits of result, where LLVM's lowering of the shuffle takes 4 shuffles for phase 0
    and 6 for phase 1 (camera_pipe's deinterleave)."""
    if not getattr(cg, "phase_packs", False) or not chunks:
        return None
    vt = chunks[0].type
    el = vt.element
    if not isinstance(el, ir.IntType) or el.width not in (8, 16) or any(c.type != vt for c in chunks):
        return None
    lanes = len(positions)
    per = 256 // el.width                         # elements per 256 bits
    r = positions[0]
    if r not in (0, 1) or positions != [r + 2 * i for i in range(lanes)] or lanes % per \
            or vt.count * len(chunks) != 2 * lanes:
        return None
    b = st.b
    cat = cg.concat(st, chunks) if len(chunks) > 1 else chunks[0]
    wide = ir.IntType(2 * el.width)
    wt = ir.VectorType(wide, per // 2)
    half = ir.Constant(wt, [(1 << el.width) - 1] * (per // 2))
    shift = ir.Constant(wt, [el.width] * (per // 2))
    name = "llvm.x86.avx2.packusdw" if el.width == 16 else "llvm.x86.avx2.packuswb"
    pt = ir.VectorType(el, per)
    pack = cg.decl(name, pt, [wt, wt])
    q = ir.VectorType(_I64, 4)
    out = []
    for g in range(lanes // per):
        srcs = []
        for k in (0, 1):
            lo = (2 * g + k) * per
            v = b.shuffle_vector(cat, ir.Constant(cat.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(_I32, per), list(range(lo, lo + per))))
            v = b.bitcast(v, wt)
            srcs.append(b.and_(v, half) if r == 0 else b.lshr(v, shift))
        p = b.bitcast(b.call(pack, srcs), q)
        p = b.shuffle_vector(p, ir.Constant(q, ir.Undefined), ir.Constant(ir.VectorType(_I32, 4), [0, 2, 1, 3]))
        out.append(b.bitcast(p, pt))
    return cg.concat(st, out) if len(out) > 1 else out[0]


def masked_strided_load(cg, st, ptr, stride: int, mask, vt, align: int):
    """Lanes ptr[0], ptr[stride], ... of vt where `mask` is set (0 elsewhere): the dense
    vectors that CodeGenCPU.strided_load reads, each loaded under the mask of the elements
    that set lanes read (no other element is touched: the lanes of a clamped strided index
    that the clamp leaves alone), then one shuffle."""
    b = st.b
    lanes = vt.count
    offsets, positions = span_chunks(lanes, stride)
    false = ir.Constant(mask.type, [0] * lanes)
    f = cg.decl(f"llvm.masked.load.{_suffix(vt)}.p0", vt, [ptr.type, _I32, mask.type, vt])
    chunks = []
    for o in offsets:
        sel = [(o + j) // stride if (o + j) % stride == 0 else lanes for j in range(lanes)]
        m = b.shuffle_vector(mask, false, ir.Constant(ir.VectorType(_I32, lanes), sel))
        p = ptr if o == 0 else b.gep(ptr, [ir.Constant(_I32, o)], source_etype=vt.element)
        chunks.append(b.call(f, [p, ir.Constant(_I32, align), m, K(vt, 0)]))
    return pick(cg, st, chunks, positions)
