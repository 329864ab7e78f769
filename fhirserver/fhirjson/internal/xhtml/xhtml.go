// Package xhtml checks the XHTML of a FHIR R4 narrative (Narrative.div, the
// xhtml data type, invariants txt-1 and txt-2). Viewers render narrative as
// HTML, so a narrative that slips script past the server is stored XSS.
//
// The allow-lists are the txt-1 XPath of the R4 Narrative StructureDefinition
// (https://hl7.org/fhir/R4/narrative-definitions.html), plus what its prose
// ("chapters 7-11 (except section 4 of chapter 9) and 15 of the HTML 4.0
// standard, <a> elements, images") covers and the XPath omits: address,
// bdo, kbd, map and area, with usemap and ismap, and xml:lang, the XHTML
// form of lang. ins and del are HTML 4.0 §9.4 and so are excluded.
//
// Beyond txt-1, constructs that an HTML parser reads differently from an
// XML parser are refused, since the checks below see the XML reading and a
// browser the HTML one: CDATA sections, comments containing '<' or '>' or
// starting with '-', DOCTYPEs and processing instructions. Entities other
// than XML's five are not well-formed without a DTD (encoding/xml in Strict
// mode rejects them).
package xhtml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// OperationOutcome issue-type codes of the problems found.
const (
	CodeInvalid  = "invalid"
	CodeSecurity = "security"
)

const (
	xhtmlNS = "http://www.w3.org/1999/xhtml"
	xmlNS   = "http://www.w3.org/XML/1998/namespace"
	// maxXHTMLDepth bounds element nesting: encoding/xml keeps a heap
	// stack per open element, and real narratives nest a few dozen deep.
	maxXHTMLDepth = 100
)

var allowedElements = toSet(
	// R4 txt-1 XPath
	"a", "abbr", "acronym", "b", "big", "blockquote", "br", "caption", "cite",
	"code", "col", "colgroup", "dd", "dfn", "div", "dl", "dt", "em", "h1", "h2",
	"h3", "h4", "h5", "h6", "hr", "i", "img", "li", "ol", "p", "pre", "q", "samp",
	"small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot",
	"th", "thead", "tr", "tt", "ul", "var",
	// txt-1 prose: HTML 4.0 §7.5.6, §8.2.4, §9.2.1 and client-side image maps (§13.6)
	"address", "bdo", "kbd", "map", "area",
)

var allowedAttrs = toSet(
	// R4 txt-1 XPath
	"abbr", "accesskey", "align", "alt", "axis", "bgcolor", "border",
	"cellhalign", "cellpadding", "cellspacing", "cellvalign", "char", "charoff",
	"charset", "cite", "class", "colspan", "compact", "coords", "dir", "frame",
	"headers", "height", "href", "hreflang", "hspace", "id", "lang", "longdesc",
	"name", "nowrap", "rel", "rev", "rowspan", "rules", "scope", "shape", "span",
	"src", "start", "style", "summary", "tabindex", "title", "type", "valign",
	"value", "vspace", "width",
	// image maps (HTML 4.0 §13.6)
	"usemap", "ismap",
)

// Attributes whose value is a URL.
var urlAttrs = toSet("href", "src", "longdesc", "cite", "usemap")

// activeElements can run script, load active content, submit data or
// change how the rest of the page is read: reported as "security".
var activeElements = toSet(
	"script", "style", "iframe", "frame", "frameset", "object", "embed",
	"applet", "param", "form", "input", "button", "select", "textarea",
	"base", "link", "meta", "svg", "math", "template", "noscript", "noembed",
	"noframes", "xmp", "plaintext", "portal", "isindex", "keygen",
)

func toSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Check checks one narrative div. It returns "" when the div is acceptable,
// else an issue-type code and a message.
func Check(div []byte) (code, msg string) {
	d := xml.NewDecoder(bytes.NewReader(div)) // Strict, no Entity map
	depth, content, closed := 0, false, false
	for {
		off := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return CodeInvalid, syntaxMessage(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if closed {
				return CodeInvalid, "the narrative must be a single <div> element, but there is content after its end"
			}
			if depth == 0 && (t.Name.Local != "div" || t.Name.Space != xhtmlNS) {
				return rootMessage(t.Name)
			}
			if code, msg := checkElement(t); msg != "" {
				return code, msg
			}
			if t.Name.Local == "img" && hasAttr(t, "src") {
				content = true
			}
			if depth++; depth > maxXHTMLDepth {
				return CodeInvalid, "the narrative nests elements more than " + strconv.Itoa(maxXHTMLDepth) + " deep"
			}
		case xml.EndElement:
			depth--
			closed = depth == 0
		case xml.CharData:
			if bytes.HasPrefix(div[off:d.InputOffset()], []byte("<![CDATA[")) {
				return CodeSecurity, "the narrative contains a CDATA section, which HTML reads differently from XML; escape the text instead"
			}
			if len(bytes.Trim(t, " \t\r\n")) == 0 {
				continue
			}
			if depth == 0 {
				return CodeInvalid, "the narrative must be a single <div> element, but there is text outside it"
			}
			content = true
		case xml.Comment:
			if bytes.ContainsAny(t, "<>") || bytes.HasPrefix(t, []byte("-")) {
				return CodeSecurity, `the narrative contains a comment with "<" or ">" or starting with "-", which HTML reads differently from XML`
			}
		case xml.ProcInst:
			return CodeInvalid, "the narrative contains a processing instruction (<?" + clipString(t.Target) + " …?>), which is not allowed"
		case xml.Directive:
			return CodeSecurity, "the narrative contains a <!DOCTYPE> or another declaration, which is not allowed"
		}
	}
	if !closed {
		return CodeInvalid, `the narrative must be a <div xmlns="` + xhtmlNS + `"> element, but it has none`
	}
	if !content {
		return CodeInvalid, "the narrative has no content: it needs some non-whitespace text or an image (txt-2)"
	}
	return "", ""
}

func syntaxMessage(err error) string {
	var se *xml.SyntaxError
	if !errors.As(err, &se) {
		return "the narrative is not well-formed XML: " + clipString(err.Error())
	}
	msg := "the narrative is not well-formed XML: " + clipString(se.Msg) + " (line " + strconv.Itoa(se.Line) + " of the div)"
	if strings.Contains(se.Msg, "entity") {
		msg += "; only &amp; &lt; &gt; &quot; &apos; and numeric character references such as &#160; are allowed"
	}
	return msg
}

func rootMessage(n xml.Name) (string, string) {
	if n.Local == "div" && n.Space == "" {
		return CodeInvalid, `the narrative's root <div> must declare the XHTML namespace: <div xmlns="` + xhtmlNS + `">`
	}
	code := CodeInvalid
	if activeElements[strings.ToLower(n.Local)] {
		code = CodeSecurity
	}
	return code, `the narrative's root element must be <div xmlns="` + xhtmlNS + `">, not ` + elemName(n)
}

// elemName renders an element name for a message (namespace shown as
// given: a prefix when undeclared, else the namespace name).
func elemName(n xml.Name) string {
	if n.Space != "" && n.Space != xhtmlNS {
		return "<" + clipString(n.Space) + ":" + clipString(n.Local) + ">"
	}
	return "<" + clipString(n.Local) + ">"
}

func checkElement(t xml.StartElement) (code, msg string) {
	local := t.Name.Local
	if t.Name.Space != xhtmlNS || !allowedElements[local] {
		code = CodeInvalid
		if activeElements[strings.ToLower(local)] {
			code = CodeSecurity
		}
		what := "element"
		if t.Name.Space != xhtmlNS {
			what = "element outside the XHTML namespace"
		}
		return code, "the narrative contains " + aOrAn(elemName(t.Name)) + " " + what + ", which FHIR narrative does not allow (txt-1)"
	}
	el := func() string { return "<" + local + ">" } // only for messages
	for i, a := range t.Attr {
		n := a.Name
		for _, b := range t.Attr[:i] {
			if b.Name == n {
				return CodeInvalid, "the narrative is not well-formed XML: attribute " + quoteName([]byte(n.Local)) + " appears twice on " + el()
			}
		}
		switch {
		case n.Space == "" && n.Local == "xmlns":
			continue // the element is in the XHTML namespace, so this declares it
		case n.Space == "xmlns":
			return CodeInvalid, "the narrative declares the namespace prefix " + quoteName([]byte(n.Local)) + "; only the XHTML default namespace is allowed"
		case n.Space == xmlNS && n.Local == "lang":
			continue
		case n.Space != "" || !allowedAttrs[n.Local]:
			lower := strings.ToLower(n.Local)
			code := CodeInvalid
			if strings.HasPrefix(lower, "on") || urlAttrs[lower] || lower == "srcdoc" || lower == "formaction" || lower == "action" || lower == "base" {
				code = CodeSecurity
			}
			name := n.Local
			if n.Space == xmlNS {
				name = "xml:" + name
			} else if n.Space != "" {
				name = "(" + n.Space + ")" + name
			}
			return code, "the narrative contains the attribute " + quoteName([]byte(name)) + " on " + el() + ", which FHIR narrative does not allow (txt-1)"
		case urlAttrs[n.Local]:
			if msg := checkURL(local, n.Local, a.Value); msg != "" {
				return CodeSecurity, msg
			}
		case n.Local == "style":
			if bad := activeCSS(a.Value); bad != "" {
				return CodeSecurity, "the narrative has a style attribute on " + el() + " with " + bad + ", which is not allowed"
			}
		}
	}
	return "", ""
}

func aOrAn(s string) string {
	if len(s) > 1 && strings.IndexByte("aeiouAEIOU", s[1]) >= 0 {
		return "an " + s
	}
	return "a " + s
}

func hasAttr(t xml.StartElement, local string) bool {
	for _, a := range t.Attr {
		if a.Name.Space == "" && a.Name.Local == local {
			return true
		}
	}
	return false
}

// checkURL refuses URLs with active content: javascript: and vbscript:
// anywhere, data: except for images in <img src>. The scheme is read as a
// browser reads it: tabs and newlines anywhere are dropped, leading control
// characters and spaces are trimmed, and case does not matter. (encoding/xml
// has already decoded character references.)
func checkURL(elem, attr, v string) string {
	scheme, rest := urlScheme(v)
	switch scheme {
	case "":
		return ""
	case "javascript", "vbscript", "livescript":
		return "the narrative contains a " + scheme + ": URL in the " + attr + " attribute of <" + elem + ">, which FHIR narrative does not allow (txt-1)"
	case "data":
		if elem == "img" && attr == "src" && strings.HasPrefix(rest, "image/") && !strings.HasPrefix(rest, "image/svg") {
			return ""
		}
		return "the narrative contains a data: URL in the " + attr + " attribute of <" + elem + ">; data: URLs are only allowed for raster images in <img src>"
	}
	return ""
}

// urlScheme returns the lower-cased scheme of v ("" for a relative URL) and
// the start of what follows the colon, lower-cased and without blanks.
func urlScheme(v string) (scheme, rest string) {
	var b strings.Builder
	i := 0
	for i < len(v) && v[i] <= ' ' {
		i++
	}
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r':
		case c == ':':
			s := b.String()
			if s == "" || s[0] < 'a' || s[0] > 'z' {
				return "", ""
			}
			return s, compactLower(v[i+1:], 16)
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '-', c == '.':
			b.WriteByte(c)
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			return "", ""
		}
		if b.Len() > 32 {
			return "", "" // longer than any scheme checked here
		}
	}
	return "", ""
}

// compactLower lower-cases s without spaces and control characters, up to
// max bytes of output.
func compactLower(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < max; i++ {
		if c := s[i]; c > ' ' {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// activeCSS reports what in an inline style could run script or pull in
// behaviour (old IE expression() and behavior, Mozilla XBL bindings, script
// URLs), with comments and blanks removed so they cannot split a keyword.
// CSS escapes could hide one as well, so a backslash is refused outright.
func activeCSS(style string) string {
	if strings.IndexByte(style, '\\') >= 0 {
		return "a CSS escape (\\)"
	}
	var b strings.Builder
	for i := 0; i < len(style); i++ {
		if strings.HasPrefix(style[i:], "/*") {
			end := strings.Index(style[i+2:], "*/")
			if end < 0 {
				break
			}
			i += end + 3
			continue
		}
		if c := style[i]; c > ' ' {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
	}
	css := b.String()
	for _, bad := range []string{"expression(", "javascript:", "vbscript:", "-moz-binding", "behavior:", "@import"} {
		if strings.Contains(css, bad) {
			return strconv.Quote(bad)
		}
	}
	return ""
}

// Allowed reports whether name is an element a narrative may use.
func Allowed(name string) bool { return allowedElements[name] }

// MaxShown bounds how many bytes of the narrative a message repeats.
const MaxShown = 64

// clipString renders client text for a message: shortened, valid UTF-8,
// control characters escaped.
func clipString(s string) string {
	short := s
	if len(s) > MaxShown {
		cut := MaxShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		short = s[:cut]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(short, "\uFFFD") {
		if r < 0x20 || (0x7f <= r && r < 0xa0) {
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
			continue
		}
		b.WriteRune(r)
	}
	if len(short) < len(s) {
		b.WriteString("…")
	}
	return b.String()
}

// quoteName quotes a name for a message, shortened like clipString.
func quoteName(name []byte) string {
	return `"` + strings.ReplaceAll(clipString(string(name)), `"`, `\"`) + `"`
}
