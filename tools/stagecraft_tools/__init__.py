"""stagecraft's tools: the logic behind scripts/ (the published tables and their predictions, the
benchmarks against peers and the executor, the reports), tested by tests/tools.

Each tool is a module with a ``main(argv)`` that scripts/<name>.sh calls through scripts/tool.sh;
the tables live in data/ with their sources (tables.py reads them). Simulations go through the
project's Python module (``import stagecraft``, build/python); executions through the
``stagecraft`` command under MPI (common.py).
"""
