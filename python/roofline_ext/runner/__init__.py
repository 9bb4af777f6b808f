"""Running tasks: one task or a batch, counted and timed in worker processes (docs/runner.md).

``batch.run_tasks`` (typed results) and ``batch.run_batch`` (their JSON dicts) are the entry points;
``pool`` runs jobs in workers forked from ``forkserver``; ``worker`` and ``process_state`` are what
runs inside a worker and what it checks after each task; ``analyze`` counts a task where no worker
did, ``timing_jobs`` are the timing worker's jobs (a task built by ``tasks.building``, timed by
``measure.task_timing``, judged by ``judge``), ``timed`` turns a candidate's reply into a typed
record; every result is assembled by ``model.assess.assess``; ``isolation`` is the first versions'
one subprocess per task (``--isolation process``).
"""
