"""Which audit log a records URL keeps (`open_audit`): a file beside a folder's records, a table
in the team's PostgreSQL, objects in its S3 bucket. The audit package chooses by the backend's
kind, so the backends know nothing of the audit log."""

from __future__ import annotations

from pathlib import Path

from stackflow.audit.filelog import FileAuditLog
from stackflow.audit.store import AuditLog, log_path
from stackflow.backends import BackendURLError, backend_for, mask_url


def open_audit(records_url: str, project: str) -> AuditLog:
    """`project`'s audit log beside the records at `records_url`.

    Raises:
        BackendURLError: a scheme no kind takes, or a kind that holds no records.
    """
    if "://" not in records_url:
        return FileAuditLog(log_path(Path(records_url).expanduser(), project))
    backend = backend_for(records_url)
    if backend.name == "file":
        from stackflow.backends.file import folder_of

        return FileAuditLog(log_path(folder_of(records_url), project))
    if backend.name == "PostgreSQL":
        from stackflow.audit.pglog import PostgresAuditLog

        return PostgresAuditLog(records_url, project)
    if backend.name == "S3":
        from stackflow.audit.s3log import S3AuditLog

        return S3AuditLog(records_url, project)
    raise BackendURLError(
        f"{mask_url(records_url)}: a {backend.name} backend holds no audit log of stackflow's; "
        "set records_url (STACKFLOW_RECORDS_URL) to a folder, s3:// or postgres:// URL"
    )
