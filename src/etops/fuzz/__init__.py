"""Property-based fuzzing of every registered kernel's call path.

- ``strategies``: Hypothesis strategies built from a kernel's schema plan: valid
  calls (shapes, dtypes, dim orders, scalars and lists within the schema) and
  invalid ones (one mutation of a valid call: wrong types, counts, ranks, sizes,
  devices, outs ...). A case is plain picklable data.
- ``classes``: the adversarial classes, derived deterministically from a
  call a kernel accepts for every argument they apply to: integer extremes and
  INT_MIN / -1, zero-size dims, wrong-dtype, too-small and overlapping outs, sizes
  that overflow.
- ``sequences``: many cases in one process per kernel under glibc's malloc checking
  (``make fuzz-sequences``), a death bisected and classified.
- ``worker``: materializes a case in a worker process, runs it through etops and
  through ATen, and checks the properties (see ``worker.run_case``).
- ``runner``: the isolated runner (worker processes forked, etops.child_process,
  from this one once it warmed up, restarted when a kernel kills one), per-kernel Hypothesis drivers
  and the long campaign (``python -m etops.fuzz``, ``make fuzz``).

Only ``etops.fuzz.strategies`` needs Hypothesis; nothing else in etops imports this
package.

May import: the core, etops.guard and etops.checkout (its load, for --load); nothing imports it but its own command (python -m etops.fuzz, etops fuzz).
"""
