"""A paper config rehearsed on a CPU, with only sizes shrunk."""
