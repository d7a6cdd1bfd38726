"""``python -m thaw rerun --lineage N [--outputs 0,3]``: reruns a
:func:`thaw.lineage.step` as its lineage recorded it (the command the step
records; the master's workflow manager runs it to rebuild lost files, telling
it which outputs in ``THAW_REBUILD_OUTPUTS``: a narrow step runs on those
partitions alone). Not ``python -m thaw.lineage``: the
package imports that module, and running it again as ``__main__`` would make a
second copy of it."""

from __future__ import annotations

import sys

from .lineage import main

if __name__ == "__main__":
    sys.exit(main())
