"""What a feedback page shows of a learner's notebook: outputs and markdown.

What nbconvert would put into a page from a learner's notebook, reduced to what a page
without script can show honestly: every output keeps the data it can show and nothing
else (no field nbconvert's template would copy into the page unchecked, such as an
image's width and height); what cannot be shown is replaced by a note that says so
(:func:`shown_outputs`). Markdown is rendered as nbconvert renders it, pasted images
(the cells' attachments) embedded as data: images or replaced by a note where one
cannot be read (:func:`markdown_html`). The page's sanitiser
(:mod:`classroom.reporting.sanitiser`) does not rely on any of this.
"""
from __future__ import annotations

import base64
import binascii
import html

from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

from andrea_ref.i18n import N_, gettext

IMAGE_MIMES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",),
               "image/gif": (b"GIF87a", b"GIF89a"), "image/webp": (b"RIFF",), "image/svg+xml": ()}
SHOWN_MIMES = ("text/html", "text/markdown", "text/latex", "image/svg+xml", "image/png", "image/jpeg",
               "text/plain")
SCRIPT_NOTE = N_("(an output that needs JavaScript is not shown here: feedback pages run no script)")
IMAGE_NOTE = N_("(an image that could not be read is not shown here)")
ATTACHMENT_NOTE = N_("[the pasted image {name} could not be shown]")
MAX_SIDE = 10000  # pixels: an image's width or height from its metadata, at most


def _text(value) -> str:
    return "".join(map(str, value)) if isinstance(value, list) else str(value)


def image_bytes(mime: str, data) -> bytes | None:
    """The decoded image of base64 ``data`` if it is a readable ``mime`` image (its bytes
    start as that format's do), else None. SVG is XML text, kept as it is."""
    if mime not in IMAGE_MIMES or not isinstance(data, (str, list)):
        return None
    text = _text(data)
    if mime == "image/svg+xml":
        raw = text.encode("utf-8", "replace")
        if text.lstrip().startswith(("PD94", "PHN2")):  # base64 of "<?x" or "<sv"
            try:
                raw = base64.b64decode("".join(text.split()), validate=True)
            except (binascii.Error, ValueError):
                return None
        return raw if b"<svg" in raw[:4096] else None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(IMAGE_MIMES[mime]) or (mime == "image/webp" and raw[8:12] != b"WEBP"):
        return None
    return raw


def data_uri(mime: str, raw: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


def _note(message: str, **fields) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": gettext(message).format(**fields) + "\n"}


def image_side(value) -> int | None:
    try:
        n = int(str(value).strip().removesuffix("px"))
    except (TypeError, ValueError):
        return None
    return n if 0 < n <= MAX_SIDE else None


def shown_outputs(outputs: list) -> list[dict]:
    """``outputs`` as a page without script shows them (see the section's comment)."""
    shown = []
    for o in outputs:
        kind = o.get("output_type")
        if kind == "stream":
            shown.append({"output_type": "stream", "name": "stderr" if o.get("name") == "stderr" else "stdout",
                          "text": _text(o.get("text", ""))})
        elif kind == "error":
            shown.append({"output_type": "error", "ename": _text(o.get("ename", "")),
                          "evalue": _text(o.get("evalue", "")),
                          "traceback": [_text(t) for t in o.get("traceback", []) if isinstance(t, (str, list))]})
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            kept, meta, unreadable = {}, {}, False
            for mime in SHOWN_MIMES:
                if mime not in data:
                    continue
                if mime in IMAGE_MIMES:
                    raw = image_bytes(mime, data[mime])
                    if raw is None:
                        unreadable = True
                        continue
                    kept[mime] = raw.decode("utf-8", "replace") if mime == "image/svg+xml" else base64.b64encode(raw).decode()
                    given = (o.get("metadata") or {}).get(mime)
                    if isinstance(given, dict):
                        size = {k: image_side(given.get(k)) for k in ("width", "height")}
                        size = {k: v for k, v in size.items() if v is not None}
                        if isinstance(given.get("alt"), str):
                            size["alt"] = given["alt"][:500]
                        if size:
                            meta[mime] = size
                else:
                    kept[mime] = _text(data[mime])
            if set(kept) <= {"text/plain"} and unreadable:
                shown.append(_note(IMAGE_NOTE))
            elif not kept:
                if data:
                    shown.append(_note(SCRIPT_NOTE))
            else:
                out = {"output_type": kind, "data": kept, "metadata": meta}
                if kind == "execute_result":
                    out["execution_count"] = o.get("execution_count") if isinstance(o.get("execution_count"), int) else None
                shown.append(out)
    return shown


def keep_metadata(cell) -> None:
    """A cell's metadata less what nbconvert's template would copy into the page
    (``alt``, ``tags``, ...): nbgrader's own keys stay (restored from the gradebook)."""
    meta = cell.get("metadata", {})
    cell["metadata"] = {k: v for k, v in meta.items() if k in ("nbgrader", "deletable", "editable")}


def markdown_html(source: str, attachments=None) -> str:
    """Markdown as nbconvert renders it, with each pasted image (``attachment:NAME``)
    embedded when the cell holds a readable image under that name, and a note otherwise."""
    attachments = attachments if isinstance(attachments, dict) else {}

    class Renderer(IPythonRenderer):
        def image(self, text, url, title=None):
            if url.startswith("attachment:"):
                name = url[len("attachment:"):]
                bundle = attachments.get(name)
                found = None
                if isinstance(bundle, dict):
                    found = next((data_uri(m, raw) for m in IMAGE_MIMES if m in bundle
                                  for raw in [image_bytes(m, bundle[m])] if raw is not None), None)
                if found is None:
                    note = html.escape(gettext(ATTACHMENT_NOTE).format(name=name[:200]))
                    return f'<span class="andrea-note">{note}</span>'
                url = found
            return super().image(text, url, title)

    return MarkdownWithMath(renderer=Renderer(escape=False)).render(source)
