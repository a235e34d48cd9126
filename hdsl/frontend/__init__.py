"""Front end: parse (text → AST), elaborate (AST → typed Func graph)."""
