"""The HTTP transport seam: the slots a recorder, preparer or responder fills, one exchange, the
recorded call, and the hooks of each HTTP library (registered into the seam here, so that the
seam never imports them).
"""

from rewind.exporter.capture import (
    aiohttp_hook,
    httpclient_hook,
    lm15_hook,
    requests_hook,
    transport,
)

for _hook in (aiohttp_hook, requests_hook, httpclient_hook, lm15_hook):
    transport.register(_hook.install, _hook.uninstall)
