"""The sanitiser of every page the grader writes.

One policy for every page (feedback pages, the chapters shipped with them, the page that
stands in for one that could not be built, the class view), applied to the page's whole
body after everything else has been done to it. Only what the pages need is allowed:
document markup, the SVG and MathML that MathJax writes for formulas (and the class
view's charts), images only as data: images, links only to http(s) addresses, to a place
on the page itself or to a page shipped beside it. No script, event handler, form, frame,
object, base, meta or style element survives, and the pages' Content-Security-Policy
forbids script of any kind (``script-src 'none'``), so nothing a learner wrote can run
where a page is read.
"""
from __future__ import annotations

import html
import re
from urllib.parse import quote, unquote

import nh3

from andrea_lab import LINK_PREFIX
from andrea_ref.i18n import N_, gettext

from .outputs import IMAGE_MIMES, image_bytes, image_side

HTML_TAGS = {
    "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup",
    "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "footer", "h1", "h2",
    "h3", "h4", "h5", "h6", "header", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q",
    "s", "samp", "section", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
    "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr", "article", "aside", "main", "nav",
}
MATHJAX_TAGS = {"mjx-container", "mjx-assistive-mml"}
SVG_TAGS = {"svg", "g", "path", "rect", "line", "text", "title"}
MATHML_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
    "mroot", "mstyle", "merror", "mpadded", "mphantom", "menclose", "munder", "mover", "munderover",
    "mtable", "mtr", "mtd", "mlabeledtr", "mmultiscripts", "mprescripts", "none", "semantics",
}
TAGS = HTML_TAGS | MATHJAX_TAGS | SVG_TAGS | MATHML_TAGS
# removed with everything inside them (the others lose their tags and keep their text)
CONTENT_DROPPED = {"script", "style", "template", "textarea", "select", "iframe", "object", "embed",
                   "noscript", "noembed", "noframes", "xmp", "plaintext", "title", "button", "applet",
                   "frameset", "frame", "annotation", "annotation-xml", "foreignObject", "audio", "video",
                   "canvas", "option", "datalist", "head"} - TAGS
_SVG_PAINT = {"fill", "stroke", "stroke-width", "stroke-dasharray", "stroke-linecap", "stroke-linejoin",
              "fill-rule", "clip-rule", "transform", "opacity", "fill-opacity", "stroke-opacity"}
# what MathJax marks its output with (the node, the character, the TeX class, ...)
_MJX_DATA = {"data-mml-node", "data-c", "data-mjx-texclass", "data-variant", "data-background", "data-frame",
             "data-line", "data-table", "data-mjx-variant", "data-mjx-alternate", "data-mjx-pseudoscript",
             "data-mjx-auto-op", "data-semantic-type", "data-semantic-role", "data-mjx-error", "data-bgcolor",
             "data-hitbox", "pointer-events"}
_MATHML = {"display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence",
           "separator", "accent", "accentunder", "lspace", "rspace", "width", "height", "depth",
           "linethickness", "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines",
           "rowlines", "frame", "framespacing", "equalrows", "equalcolumns", "notation", "scriptlevel",
           "displaystyle", "minsize", "maxsize", "movablelimits", "largeop", "symmetric", "form", "voffset",
           "columnwidth", "rowspan", "columnspan", "align", "side", "minlabelspacing", "bevelled",
           "numalign", "denomalign", "texclass", "href"} | _MJX_DATA
ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir", "style", "role", "aria-label", "aria-hidden",
          "aria-describedby", "aria-labelledby"},
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align", "scope"},
    "col": {"span"}, "colgroup": {"span"}, "ol": {"start", "type", "reversed"}, "li": {"value"},
    "details": {"open"}, "time": {"datetime"},
    "mjx-container": {"jax", "display", "justify", "width"},
    "mjx-assistive-mml": {"display", "unselectable"},
    "svg": {"xmlns", "x", "y", "width", "height", "viewBox", "focusable", "preserveAspectRatio", "version"}
           | _SVG_PAINT | _MJX_DATA,
    "g": _SVG_PAINT | _MJX_DATA,
    "path": _SVG_PAINT | _MJX_DATA | {"d"},
    "rect": _SVG_PAINT | _MJX_DATA | {"x", "y", "width", "height", "rx", "ry"},
    "line": _SVG_PAINT | _MJX_DATA | {"x1", "y1", "x2", "y2"},
    "text": _SVG_PAINT | _MJX_DATA | {"x", "y", "font-size", "font-family", "font-weight", "font-style",
                                      "text-anchor"},
    "title": set(),
    **{t: set(_MATHML) for t in MATHML_TAGS},
}
ATTRIBUTES["math"] = ATTRIBUTES["math"] | {"xmlns", "alttext"}
# style="..." keeps only these properties: no position, no transform of a box, no
# pictures from elsewhere (a learner's output cannot cover or restyle the grader's text)
STYLE_PROPERTIES = {
    "color", "background-color", "font-weight", "font-style", "font-size", "font-family", "font-variant",
    "text-align", "text-decoration", "text-transform", "vertical-align", "white-space", "word-break",
    "overflow-wrap", "width", "height", "min-width", "min-height", "max-width", "max-height",
    "margin", "margin-top", "margin-right", "margin-bottom", "margin-left", "margin-inline",
    "padding", "padding-top", "padding-right", "padding-bottom", "padding-left", "border", "border-top",
    "border-right", "border-bottom", "border-left", "border-color", "border-style", "border-width",
    "border-collapse", "border-spacing", "border-radius", "line-height", "letter-spacing", "list-style-type",
    "overflow", "overflow-x", "overflow-y", "display", "opacity", "table-layout", "caption-side",
    "position",  # relative only (MathJax's formulas): nothing is taken out of the page's flow
}
SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]")
# a chapter link as the notebooks write it (andrea_lab.chapter_link, in any edition) or as
# older releases did (a relative path to the built page or to the source); group 1: the
# edition's folder, 2: the chapter, 3: a fragment
CHAPTER_LINK = re.compile(r"^(?:(?:\.\./)+(?:_build/html/)?|" + re.escape(LINK_PREFIX)
                          + r")(?:(de|ka)/)?book/([\w.-]+?)\.(?:html|md)(#[\w.-]*)?$")


class Links:
    """Where the links of one page may point: ``http(s)`` addresses, a fragment of the page
    itself, and the relative paths in ``shipped`` (pages shipped beside it). ``chapter``
    maps a chapter link (:data:`CHAPTER_LINK`'s groups) to its address on this page, or
    None to leave the link out. ``keep_relative``: keep every relative link (a step
    before the page is made, where the page's own policy decides later)."""

    def __init__(self, chapter=None, shipped: set | None = None, keep_relative: bool = False):
        self.chapter, self.keep_relative = chapter, keep_relative
        self.shipped = shipped if shipped is not None else set()  # the caller may add to it

    def href(self, value: str) -> str | None:
        url = _URL_NOISE.sub("", value or "").replace("\\", "/")
        m = CHAPTER_LINK.match(url)
        if m and self.chapter is not None:
            return self.chapter(m.group(1) or "en", m.group(2), m.group(3) or "")
        scheme = SCHEME.match(url)
        if scheme:
            return value if scheme.group(1).lower() in ("http", "https") and url[len(scheme.group(0)):].startswith("//") else None
        if url.startswith("#"):
            return value
        if url.startswith("//"):
            return None
        if self.keep_relative or url.split("#", 1)[0] in self.shipped:
            return value
        return None


IMAGE_PLACEHOLDER = N_("image not shown")


def placeholder_image() -> str:
    """A data: image that stands where an image could not be shown (it says so)."""
    text = html.escape(gettext(IMAGE_PLACEHOLDER))
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="220" height="36">'
           '<rect x="0.5" y="0.5" width="219" height="35" fill="#f6f6f6" stroke="#999" stroke-dasharray="4 3"/>'
           f'<text x="110" y="23" font-family="sans-serif" font-size="13" fill="#555" text-anchor="middle">{text}</text>'
           "</svg>")
    return "data:image/svg+xml," + quote(svg)


def _image_src(value: str) -> str | None:
    m = re.match(r"^data:(image/[a-z0-9.+-]+)(;[^,]*)?,(.*)$", value.strip(), re.S | re.I)
    if not m:
        return None
    mime, params, payload = m.group(1).lower(), (m.group(2) or "").lower(), m.group(3)
    if mime not in IMAGE_MIMES:
        return None
    if ";base64" in params:
        return value.strip() if image_bytes(mime, payload) is not None else None
    if mime == "image/svg+xml":  # percent-encoded SVG, as data: URLs in CSS and our placeholder
        return value.strip() if "<svg" in unquote(payload)[:4096] else None
    return None


def _style(value: str) -> str | None:
    """An inline style with only :data:`STYLE_PROPERTIES`, and no value that refers to
    anything (``url()``, ``image-set()``, ``expression()``, escapes, ``@`` rules)."""
    kept = []
    for declaration in value.split(";"):
        prop, sep, val = declaration.partition(":")
        prop = prop.strip().lower()
        if prop == "position" and val.strip().lower() not in ("relative", "static"):
            continue
        if sep and prop in STYLE_PROPERTIES and not re.search(r"[\\@<>]|url|image|expression|script|var\(",
                                                             val, re.I):
            kept.append(f"{prop}: {val.strip()}")
    return "; ".join(kept) or None


def sanitise(html: str, links: Links | None = None) -> str:
    """``html`` (a fragment: a page's body) with only what the policy above allows."""
    links = links or Links()
    placeholder = []

    def attribute(tag: str, name: str, value: str) -> str | None:
        if name == "href":
            return links.href(value)
        if tag == "img" and name == "src":
            src = _image_src(value)
            if src is None:
                if not placeholder:
                    placeholder.append(placeholder_image())
                return placeholder[0]
            return src
        if tag == "img" and name in ("width", "height"):
            return str(image_side(value)) if image_side(value) else None
        if name == "style":
            return _style(value)
        return value

    clean = nh3.clean(html, tags=TAGS, clean_content_tags=CONTENT_DROPPED, attributes=ATTRIBUTES,
                      attribute_filter=attribute, url_schemes={"http", "https", "data"},
                      filter_style_properties=STYLE_PROPERTIES, strip_comments=True,
                      link_rel="noopener noreferrer nofollow")

    def no_src(m):  # an image left without a source (only srcset, say) says it is not shown
        if any(name == "src" for name in _ATTRIBUTE_NAME.findall(m.group(1))):
            return m.group(0)
        if not placeholder:
            placeholder.append(placeholder_image())
        return f'<img src="{placeholder[0]}"{m.group(1)}>'

    return _IMG_TAG.sub(no_src, clean)


# an <img> as the sanitiser writes it: every attribute value in double quotes, with no
# double quote inside (written &quot;)
_IMG_TAG = re.compile(r'<img((?:\s+[^\s="\'>/]+(?:="[^"]*")?)*)\s*/?>')
_ATTRIBUTE_NAME = re.compile(r'\s+([^\s="\'>/]+)(?:="[^"]*")?')
