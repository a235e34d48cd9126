"""The reference evaluator: the executable definition of hdsl's semantics."""
