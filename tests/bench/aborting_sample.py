"""A bench sample that aborts the process timing it, as a kernel that aborts would
(``bench --all``'s timing interpreter imports this module to unpickle it)."""

import os


class AbortingSample:
    """Its first use (bench.core.run_one reads ``dtype`` first) aborts the process."""

    @property
    def dtype(self):
        os.abort()
