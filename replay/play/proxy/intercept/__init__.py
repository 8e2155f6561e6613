"""HTTPS interception: the LLM calls of programs whose provider host is built in (no base URL
to point elsewhere) recorded and replayed by the same proxy, reached through mitmproxy's
``mitmdump`` run as a separate program. :mod:`.authority` is the local CA ``rewind init``
makes and the bundle a command trusts it through; :mod:`.interceptor` runs mitmdump for one
command; :mod:`.addon` is the script mitmdump runs (it imports nothing from Rewind).
"""
