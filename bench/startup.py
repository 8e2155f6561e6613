"""Start-up cost of the framework tool hooks: a process that imports the exporter and calls
``instrument()``, with the hooks (the default) and without (``REWIND_FRAMEWORK_TOOLS=off``),
and the same process then importing LangChain's tools (the import the hook waits for), both
measured in one run.

    python bench/startup.py [--rounds 60]

Each sample is a fresh interpreter timing itself from before the exporter's import to after
``instrument()`` (and after the framework's import), so interpreter start-up is not in the
figure. Variants are interleaved round by round, taking turns to go first; the figure is the
median. Targets: the hooks
add under 5 % to ``instrument()`` and under 5 % to the framework's own import, and import no
framework at ``instrument()``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bytecode import compile_bytecode

PROBE = """
import json, sys, time
started = time.perf_counter()
from opentelemetry.sdk.trace import TracerProvider
from rewind.exporter import instrument
instrument(tracer_provider=TracerProvider())
instrumented = time.perf_counter()
heavy = [m for m in ("agents", "langchain_core", "pydantic_ai", "mcp") if m in sys.modules]
import langchain_core.tools
print(json.dumps({"instrument": instrumented - started,
                  "framework": time.perf_counter() - instrumented, "heavy": heavy}))
"""


def sample(hooks: bool) -> dict:
    env = {**os.environ, "REWIND_FRAMEWORK_TOOLS": "on" if hooks else "off",
           "OTEL_SDK_DISABLED": "false"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    compile_bytecode()
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for hooks in (False, True) if round_ % 2 else (True, False):  # neither always first
            runs[hooks].append(sample(hooks))
    heavy = {m for s in runs[True] for m in s["heavy"]}
    print(f"{args.rounds} rounds, median per fresh process")
    print(f"{'phase':<28}{'no hooks ms':>12}{'hooks ms':>10}{'ratio':>8}")
    ok = not heavy
    for phase, label in (("instrument", "import + instrument()"),
                         ("framework", "import langchain_core.tools")):
        without = statistics.median(s[phase] for s in runs[False]) * 1000
        within = statistics.median(s[phase] for s in runs[True]) * 1000
        ratio = within / without
        ok = ok and ratio < 1.05
        print(f"{label:<28}{without:>12.1f}{within:>10.1f}{ratio:>7.3f}x")
    print("frameworks imported by instrument():", ", ".join(sorted(heavy)) or "none")
    print("target met" if ok else "target missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
