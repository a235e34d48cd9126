"""Lowering: algorithm + schedule → a flat loop nest (see lower.py for the pass list)."""
