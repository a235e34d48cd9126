"""hdsl emits CPU code without LLVM's Loop Strength Reduction (runtime/jit.py's
CODEGEN_OPTIONS, a compile-time choice measured in docs/compiler.md), and only its own code:
LLVM's options are process-wide, and another llvmlite user in the process (numba) keeps
LLVM's defaults."""
from __future__ import annotations

from llvmlite import binding as llvm

from hdsl.runtime import jit

# a loop reading a[3i] and writing b[3i + 7]: with LSR the addresses become one pointer
# stepped by 12 bytes; without it each iteration multiplies i by 12 (two LEAs)
STRIDED_LOOP = r"""
define i32 @f(ptr %a, ptr %b, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %s = phi i32 [0, %entry], [%s1, %loop]
  %k = mul i64 %i, 3
  %p = getelementptr i32, ptr %a, i64 %k
  %v = load i32, ptr %p
  %k2 = add i64 %k, 7
  %q = getelementptr i32, ptr %b, i64 %k2
  store i32 %v, ptr %q
  %s1 = add i32 %s, %v
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret i32 %s1
}
"""


def _plain(tm, options=()):
    for o in options:
        llvm.set_option("test", o)
    try:
        return tm.emit_assembly(llvm.parse_assembly(STRIDED_LOOP))
    finally:
        for o in options:
            llvm.set_option("test", o.split("=")[0] + "=false")


def test_hdsl_code_is_emitted_without_loop_strength_reduction():
    tm = jit.target_machine("x86-64-avx2", "static")
    with_lsr = _plain(tm)
    without = _plain(tm, ["-disable-lsr"])
    assert with_lsr != without          # (the loop is one LSR changes)
    assert jit.machine_code(tm, llvm.parse_assembly(STRIDED_LOOP), assembly=True) == without
    obj = jit.machine_code(tm, llvm.parse_assembly(STRIDED_LOOP))
    assert obj[:4] == b"\x7fELF"


def test_the_options_are_put_back_for_other_llvm_users():
    tm = jit.target_machine("x86-64-avx2", "static")
    before = _plain(tm)
    jit.machine_code(tm, llvm.parse_assembly(STRIDED_LOOP))
    jit.assembly(STRIDED_LOOP, "x86-64-avx2")
    assert _plain(tm) == before
