"""Scalar element types (Halide's Type without lanes, which only lowering adds)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Type:
    code: str      # 'int', 'uint', 'float', 'bool', or 'error' (poison: stops cascades)
    bits: int

    @property
    def name(self) -> str:
        if self.code == "bool":
            return "bool"
        if self.code == "error":
            return "<error>"
        return {"int": "i", "uint": "u", "float": "f"}[self.code] + str(self.bits)

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__

    def is_int(self) -> bool:
        return self.code == "int"

    def is_uint(self) -> bool:
        return self.code == "uint"

    def is_float(self) -> bool:
        return self.code == "float"

    def is_bool(self) -> bool:
        return self.code == "bool"

    def is_integral(self) -> bool:
        """int, uint or bool (Halide treats bool as a 1-bit uint)."""
        return self.code in ("int", "uint", "bool")

    def is_error(self) -> bool:
        return self.code == "error"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype({"bool": "bool", "error": "int32"}.get(self.code) or
                        ({"int": "int", "uint": "uint", "float": "float"}[self.code] + str(self.bits)))

    def min_value(self):
        if self.code == "bool":
            return False
        if self.code == "float":
            return -np.inf
        if self.code == "uint":
            return 0
        return -(1 << (self.bits - 1))

    def max_value(self):
        if self.code == "bool":
            return True
        if self.code == "float":
            return np.inf
        if self.code == "uint":
            return (1 << self.bits) - 1
        return (1 << (self.bits - 1)) - 1

    def can_represent(self, value: int) -> bool:
        if self.code == "float":
            return True
        if self.code == "bool":
            return value in (0, 1)
        return self.min_value() <= value <= self.max_value()

    def with_bits(self, bits: int) -> "Type":
        return Type(self.code, bits)


BOOL = Type("bool", 1)
I8, I16, I32, I64 = (Type("int", b) for b in (8, 16, 32, 64))
U8, U16, U32, U64 = (Type("uint", b) for b in (8, 16, 32, 64))
F16, F32, F64 = (Type("float", b) for b in (16, 32, 64))
ERROR = Type("error", 0)

BY_NAME: dict[str, Type] = {t.name: t for t in (BOOL, I8, I16, I32, I64, U8, U16, U32, U64, F16, F32, F64)}


def from_dtype(dtype) -> Type:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return BOOL
    code = {"i": "int", "u": "uint", "f": "float"}.get(dt.kind)
    if code is None:
        raise ValueError(f"unsupported element type {dt}")
    return Type(code, dt.itemsize * 8)
