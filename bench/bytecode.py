"""Rewind's own modules byte-compiled before a benchmark starts fresh processes, as installing a
package does: openai, httpx and vcrpy have their bytecode from their install, and a checkout run
with ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile Rewind from source in every process
it measures (~35 ms a process here).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def compile_bytecode() -> None:
    import rewind.collector
    import rewind.exporter
    import rewind.replay

    folders = [str(Path(m.__file__).parent) for m in (rewind.exporter, rewind.collector,
                                                       rewind.replay)]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True,
                   stdout=subprocess.DEVNULL)
    print("rewind's modules byte-compiled first, as an install does\n")
