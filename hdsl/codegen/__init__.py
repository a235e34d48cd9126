"""Back ends: LLVM IR for the host."""
