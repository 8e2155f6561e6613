"""The recording proxy: LLM calls of programs Python hooks cannot reach (a shell script's
``curl``, a Node agent, any language) recorded and replayed at an HTTP endpoint instead.

The program reaches it through the base-URL variables its SDK reads (``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``), set for it to ``http://127.0.0.1:PORT/
<provider>/...``; :mod:`.upstreams` maps each prefix back to where the variable pointed before.
Recording (:mod:`.forwarding`) sends every request on and hands the exchange to the exporter's
own ``Recorder`` and ``Exchange`` (the same spans, redaction and match key as in-process
capture); replaying (:mod:`.answering`) asks a ``ReplaySession`` (the same matching and
divergences). :mod:`.listener` serves either on loopback; :mod:`.proxy_runs` runs a command
through one (``rewind record --proxy``, ``rewind-replay`` of a run recorded through one).
"""
