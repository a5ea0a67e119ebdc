"""The op-case table: every IR op traced from numpy code, on every backend."""
