"""What the tests share, kept apart from the tests themselves.

Nothing in this package is collected (no ``test_*`` module lives here), and no test module
imports another test module: what two test modules need goes here, fixtures go in
``tests/conftest.py``. pytest rewrites the asserts of this package too (``conftest.py``
registers it), so a helper's failed check reads like a test's.

- ``harness``: the one recording harness: ``rewind serve`` on free ports, an agent script
  recorded through it against the fake LLM, the shared support-desk recording, and the weather
  agent recorded in process for the time-travel tests.
- ``ports``: the one free loopback port helper.
- ``framework_runs``: agents on real frameworks (OpenAI Agents SDK, LangGraph, pydantic-ai,
  MCP) recorded with ``rewind record``, their tools counting their calls, and the checks the
  ``test_replay_framework_*`` modules share.
- ``cli``: the ``rewind`` commands run as a user runs them (a subprocess in a 100-column
  terminal), for the ``test_cli_*`` modules, and the weather agent's run as a store or file.
- ``weather_agent``: the agent the time-travel tests record (also run as a child process).
- ``collector_client``: what the collector tests send (SDK spans, raw OTLP) and expect stored.
- ``collector_process``: the real ``rewind collector`` as a child process, started and stopped.
- ``otlp_sender``: a service exporting through the SDK's OTLP exporters, run as a child
  process by the soak test (valid spans, optionally poison mixed in).
- ``tenants``: a store with receivers and worker sharing tokens of two tenants and an
  operator, and runs sent with each tenant's token, for the tenancy tests.
- ``wiretap``: a byte-level witness between an SDK and the fake LLM, for the exporter tests.
- ``grafana_macros``: Grafana's and the ClickHouse plugin's query expansion, for the dashboards.
- ``dashboards``: the provisioned dashboards' panels, and a panel's SQL run on a store with
  every variable at All.
- ``deploy_commands``: deploy files' command lines checked against the CLI's own definitions.
"""
