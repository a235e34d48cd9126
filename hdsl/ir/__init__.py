"""hdsl's intermediate representation: types, expressions, Funcs and analyses."""
