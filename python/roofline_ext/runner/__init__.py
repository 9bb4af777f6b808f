"""Running tasks: one task or a batch, counted and timed in worker processes (docs/runner.md).

``batch.run_batch`` is the entry point; ``pool`` runs jobs in workers forked from ``forkserver``;
``worker`` and ``state`` are what runs inside a worker and what it checks after each task;
``analyze`` puts counts on the roofs, ``task_timing`` times on the GPU, ``timed`` merges the
times in and ``scoring`` scores candidates; ``isolation`` is the first versions' one subprocess
per task (``--isolation process``).
"""
