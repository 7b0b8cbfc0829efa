"""Documents as inputs (papers, reports): text and Markdown, and PDF when pypdf is installed."""

from __future__ import annotations

from pathlib import Path

from swarm.errors import InputError
from swarm.records import InputItem
from swarm.sources.files import read_file


def read_document(path: Path) -> InputItem:
    """A document's text; PDF through pypdf (optional dependency: `pip install pypdf`)."""
    if path.suffix.lower() == ".pdf":
        return InputItem(ref=str(path), text=_pdf_text(path))
    return read_file(path)


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise InputError(f"{path}: reading PDF needs pypdf (pip install pypdf)") from None
    try:
        reader = PdfReader(str(path))
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (OSError, PdfReadError) as exc:
        raise InputError(f"{path}: unreadable PDF ({exc})") from None
    if not text.strip():
        raise InputError(f"{path}: PDF has no extractable text")
    return text


def read_documents(paths: list[str]) -> list[InputItem]:
    """Every path as a document; InputError for the first that cannot be used."""
    if not paths:
        raise InputError("no documents given")
    return [read_document(Path(p)) for p in paths]
