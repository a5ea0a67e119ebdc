"""The CPU backend: host machine code compiled in-process with llvmlite (see docs/cpu.md)."""
