"""Worker API routes for trace files: export a stored trace as ``.rw``, import one.

The embedded store opens in one process at a time, so while a worker holds it the CLI imports
and exports through these routes.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rewind.collector import reader
from rewind.collector.store import Store
from rewind.replay.cassette import archive
from rewind.replay.worker.cache import normalise_trace_id

MAX_UPLOAD_BYTES = 512 * 1024 * 1024


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def routes(store: Store) -> list[Route]:
    def export(request: Request) -> Response:
        raw = request.path_params["trace_id"]
        trace_id = normalise_trace_id(raw)
        if trace_id is None:
            return _error(400, f"trace id must be 32 hex characters, got {raw!r}")
        spans = reader.get_trace(store, trace_id)
        if not spans:
            return _error(404, f"trace {trace_id} not found in the store")
        try:
            data = archive.pack(trace_id, spans)
        except archive.ArchiveError as error:
            return _error(422, str(error))
        disposition = f'attachment; filename="{trace_id}{archive.SUFFIX}"'
        return Response(data, media_type=archive.MEDIA_TYPE,
                        headers={"content-disposition": disposition})

    async def import_file(request: Request) -> Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
            return _error(413, f"trace file of {int(declared):,} bytes is over the "
                               f"{MAX_UPLOAD_BYTES:,}-byte limit")
        data = await request.body()
        if not data:
            return _error(400, "empty body: send the bytes of a .rw trace file")
        try:
            done = await run_in_threadpool(archive.import_into, store, data)
        except archive.ArchiveError as error:
            return _error(400, str(error))
        return JSONResponse({"trace_id": done.trace_id, "written": done.written,
                             "already_present": done.already_present})

    return [
        Route("/v1/import", import_file, methods=["POST"]),
        Route("/v1/traces/{trace_id}/export", export),
    ]
