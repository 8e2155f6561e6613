"""Worker API routes for trace files: export a stored trace as ``.rw``, import one.

The embedded store opens in one process at a time, so while a worker holds it the CLI imports
and exports through these routes.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rewind.replay.cassette import archive
from rewind.replay.worker.routing import route
from rewind.replay.worker.tenancy import TenantView

MAX_UPLOAD_BYTES = 512 * 1024 * 1024


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
                        headers={"content-disposition": disposition})

    async def import_file(request: Request, view: TenantView) -> Any:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
            raise HTTPException(413, f"trace file of {int(declared):,} bytes is over the "
                                     f"{MAX_UPLOAD_BYTES:,}-byte limit")
        data = await request.body()
        if not data:
            raise ValueError("empty body: send the bytes of a .rw trace file")
        done = await run_in_threadpool(view.import_file, data)  # stamped with the caller's tenant
        return {"trace_id": done.trace_id, "written": done.written,
                "already_present": done.already_present}

    return [
        route("/v1/import", import_file, methods=["POST"]),
        route("/v1/traces/{trace_id}/export", export),
    ]
