"""Generated cases: inputs made from each kernel's schema and the constraint table
(etops.ops.generation), combined pairwise across shape classes, dtype combinations,
scalar classes and value classes, and judged exactly as OpInfo's samples are
(``etops check --generated``, ``etops dev``: task ids ``gen:<kernel>``).

classes.py: the classes and how a class becomes values; pairwise.py: the covering
rows and their coverage; cases.py: one kernel's plan and its cases, each rebuilt
from its key; kept.py: the cases a process keeps (made once, kept on disk by etops
dev); run.py: the runner's task source. The runner imports run.py (one of
its task sources); nothing here imports the runner.
"""

from __future__ import annotations

from .cases import DEFAULT_BUDGET, Case, NoGeneratedCases, case_key, case_of, coverage_line, coverage_of, coverage_summary, plan
from .run import TASK_PREFIX, generated_tasks, run_generated_task, sample_key, task_id, why_none

__all__ = ["DEFAULT_BUDGET", "TASK_PREFIX", "Case", "NoGeneratedCases", "case_key", "case_of", "coverage_line", "coverage_of",
           "coverage_summary", "generated_tasks",
           "plan", "run_generated_task", "sample_key", "task_id", "why_none"]
