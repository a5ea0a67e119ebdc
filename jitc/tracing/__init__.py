"""Tracing: tracers that stand in for arrays, the trace being recorded, pytrees and the errors
that point at the user's source line."""
