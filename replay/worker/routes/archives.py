"""Worker API routes for trace files: export a stored trace as ``.rw``, import a file (a
``.rw`` file's trace, or every trace of an OTLP file).

The embedded store opens in one process at a time, so while a worker holds it the CLI imports
and exports through these routes. An upload is counted as it arrives and kept on disk past a
few MiB; the file is then decoded as a stream within ``MAX_DOCUMENT_BYTES``.
"""

from __future__ import annotations

import tempfile
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources import archive
from rewind.replay.sources.document import MAX_DOCUMENT_BYTES, DocumentTooLarge
from rewind.replay.worker.routing import DATA_HEADERS, route
from rewind.replay.worker.tenancy import TenantView

# A zstd frame is never much bigger than what it holds (incompressible data grows by under
# 1/128), so no valid file is larger than this; bodies are counted as they are read.
MAX_UPLOAD_BYTES = MAX_DOCUMENT_BYTES + MAX_DOCUMENT_BYTES // 128
IN_MEMORY_BYTES = 8 << 20  # an upload past this waits on disk, not in memory


def _too_large(size: str) -> str:
    return (f"trace file {size} is over the {MAX_UPLOAD_BYTES:,}-byte upload limit (a file "
            f"may expand to at most {MAX_DOCUMENT_BYTES:,} bytes)")


def routes() -> list[Route]:
    def export(request: Request, view: TenantView) -> Response:
        trace_id = request.path_params["trace_id"]
        try:
            data = archive.pack(trace_id, view.spans(trace_id))
        except archive.ArchiveError as error:
            # the stored trace cannot leave (a credential in it, say): not a bad request
            raise HTTPException(422, str(error)) from error
        disposition = f'attachment; filename="{trace_id}{archive.SUFFIX}"'
        return Response(data, media_type=archive.MEDIA_TYPE,
                        headers={**DATA_HEADERS, "content-disposition": disposition})

    async def import_file(request: Request, view: TenantView) -> Any:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
            raise HTTPException(413, _too_large(f"of {int(declared):,} bytes"))
        with tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES) as upload:
            received = 0
            async for chunk in request.stream():  # counted as read: chunked bodies too
                received += len(chunk)
                if received > MAX_UPLOAD_BYTES:
                    raise HTTPException(413, _too_large(f"of more than {MAX_UPLOAD_BYTES:,} "
                                                        "bytes"))
                upload.write(chunk)
            if not received:
                raise InvalidValue("empty body: send the bytes of a .rw trace file")
            try:  # stamped with the caller's tenant
                done = await run_in_threadpool(view.import_file, upload)
            except DocumentTooLarge as error:
                raise HTTPException(413, str(error)) from error
        return {"trace_id": done.trace_id, "trace_ids": list(done.trace_ids),
                "written": done.written,
                "already_present": done.already_present}

    return [
        route("/v1/import", import_file, methods=["POST"]),
        route("/v1/traces/{trace_id}/export", export),
    ]
