package functions

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// strFunc adapts a function of the input string and evaluated string
// arguments.
func strFunc(nargs int, f func(s string, args []string) (value.Collection, error)) funcDef {
	return funcDef{nargs, nargs, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		s, ok, err := inputString(in, "string function")
		if err != nil || !ok {
			return nil, err
		}
		vals := make([]string, len(args))
		for i, a := range args {
			v, ok, err := ec.ArgString(a, "string function")
			if err != nil || !ok {
				return nil, err
			}
			vals[i] = v
		}
		return f(s, vals)
	}}
}

func one(v value.Value) (value.Collection, error) { return value.Collection{v}, nil }

// regexCache keeps compiled patterns (and the errors of bad ones), least
// recently used out first, so that patterns built from data cannot exhaust
// memory and a new working set still gets cached.
var regexCache = newRegexCache()

const maxRegexCache = 4096

type compiledRegex struct {
	re  *regexp.Regexp
	err error
}

func newRegexCache() *lru.Cache[string, compiledRegex] {
	c, err := lru.New[string, compiledRegex](maxRegexCache)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}

// maxSplitItems bounds the items toChars() and split() produce.
const maxSplitItems = 100_000

// compileRegex translates a FHIRPath (PCRE-like) regex to Go syntax; the
// (?s) flag matches the spec's single-line mode default.
func compileRegex(p string) (*regexp.Regexp, error) {
	if c, ok := regexCache.Get(p); ok {
		return c.re, c.err
	}
	re, err := regexp.Compile("(?s)" + p)
	if err != nil {
		err = fmt.Errorf("fhirpath: unsupported regular expression %q: %v", p, err)
		re = nil
	}
	regexCache.Add(p, compiledRegex{re, err})
	return re, err
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

var stringFuncs = map[string]funcDef{
	"matchesFull": strFunc(1, func(s string, a []string) (value.Collection, error) {
		re, err := compileRegex("^(?:" + a[0] + ")$")
		if err != nil {
			return nil, err
		}
		return value.Bools(re.MatchString(s)), nil
	}),
	"indexOf": strFunc(1, func(s string, a []string) (value.Collection, error) {
		i := strings.Index(s, a[0])
		if i >= 0 {
			i = utf8.RuneCountInString(s[:i])
		}
		return one(value.Int(int64(i)))
	}),
	"substring": {1, 2, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		s, ok, err := inputString(in, "substring")
		if err != nil || !ok {
			return nil, err
		}
		start, ok, err := ec.ArgInt(args[0])
		if err != nil || !ok {
			return nil, err
		}
		r := []rune(s)
		if start < 0 || start >= int64(len(r)) {
			return nil, nil
		}
		end := int64(len(r))
		if len(args) == 2 {
			n, ok, err := ec.ArgInt(args[1])
			if err != nil {
				return nil, err
			}
			if ok {
				if n < 0 {
					n = 0
				}
				end = min(end, start+n)
			}
		}
		return one(value.String(string(r[start:end])))
	}},
	"startsWith": strFunc(1, func(s string, a []string) (value.Collection, error) {
		return value.Bools(strings.HasPrefix(s, a[0])), nil
	}),
	"endsWith": strFunc(1, func(s string, a []string) (value.Collection, error) {
		return value.Bools(strings.HasSuffix(s, a[0])), nil
	}),
	"contains": strFunc(1, func(s string, a []string) (value.Collection, error) {
		return value.Bools(strings.Contains(s, a[0])), nil
	}),
	"upper": strFunc(0, func(s string, _ []string) (value.Collection, error) { return one(value.String(strings.ToUpper(s))) }),
	"lower": strFunc(0, func(s string, _ []string) (value.Collection, error) { return one(value.String(strings.ToLower(s))) }),
	"trim":  strFunc(0, func(s string, _ []string) (value.Collection, error) { return one(value.String(strings.TrimSpace(s))) }),
	"length": strFunc(0, func(s string, _ []string) (value.Collection, error) {
		return one(value.Int(int64(utf8.RuneCountInString(s))))
	}),
	"toChars": strFunc(0, func(s string, _ []string) (value.Collection, error) {
		if len(s) > maxSplitItems {
			return nil, value.ErrTooLarge
		}
		var out value.Collection
		for _, r := range s {
			out = append(out, value.String(string(r)))
		}
		return out, nil
	}),
	"replace": strFunc(2, func(s string, a []string) (value.Collection, error) {
		if len(a[1]) > 0 && (strings.Count(s, a[0])+1)*len(a[1])+len(s) > value.MaxStringLen {
			return nil, value.ErrTooLarge
		}
		return one(value.String(strings.ReplaceAll(s, a[0], a[1])))
	}),
	"matches": strFunc(1, func(s string, a []string) (value.Collection, error) {
		re, err := compileRegex(a[0])
		if err != nil {
			return nil, err
		}
		return value.Bools(re.MatchString(s)), nil
	}),
	"replaceMatches": strFunc(2, func(s string, a []string) (value.Collection, error) {
		if a[0] == "" {
			return one(value.String(s))
		}
		re, err := compileRegex(a[0])
		if err != nil {
			return nil, err
		}
		// PCRE-style $1 references work with Go's Expand syntax too, but
		// ${1} avoids $1x being read as a named group.
		repl := regexp.MustCompile(`\$(\d+)`).ReplaceAllString(a[1], "$${$1}")
		out := re.ReplaceAllString(s, repl)
		if len(out) > value.MaxStringLen {
			return nil, value.ErrTooLarge
		}
		return one(value.String(out))
	}),
	"split": strFunc(1, func(s string, a []string) (value.Collection, error) {
		if strings.Count(s, a[0]) > maxSplitItems {
			return nil, value.ErrTooLarge
		}
		var out value.Collection
		for _, p := range strings.Split(s, a[0]) {
			out = append(out, value.String(p))
		}
		return out, nil
	}),
	"join": {0, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		sep := ""
		if len(args) == 1 {
			s, ok, err := ec.ArgString(args[0], "join")
			if err != nil {
				return nil, err
			}
			if ok {
				sep = s
			}
		}
		// The specification: join takes a collection of strings; an empty
		// input gives an empty result. Other items are a type error, as
		// for the String input of the other string functions.
		if len(in) == 0 {
			return nil, nil
		}
		parts := make([]string, 0, len(in))
		for _, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			s, ok := value.AsString(value.ToSystem(v))
			if !ok {
				return nil, fmt.Errorf("fhirpath: join() expects String items, got %s", v.TypeName())
			}
			parts = append(parts, s)
		}
		n := 0
		for _, p := range parts {
			n += len(p) + len(sep)
		}
		if n > value.MaxStringLen {
			return nil, value.ErrTooLarge
		}
		return one(value.String(strings.Join(parts, sep)))
	}},
	"encode": strFunc(1, func(s string, a []string) (value.Collection, error) {
		// The length of the result is known before it is built: hex
		// doubles, base64 grows by 4/3.
		switch a[0] {
		case "hex":
			if hex.EncodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(hex.EncodeToString([]byte(s))))
		case "base64":
			if base64.StdEncoding.EncodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(base64.StdEncoding.EncodeToString([]byte(s))))
		case "urlbase64":
			if base64.URLEncoding.EncodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(base64.URLEncoding.EncodeToString([]byte(s))))
		}
		return nil, nil
	}),
	"decode": strFunc(1, func(s string, a []string) (value.Collection, error) {
		var b []byte
		var err error
		// Decoding shrinks; the bound applies to the (maximum) result.
		switch a[0] {
		case "hex":
			if hex.DecodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			b, err = hex.DecodeString(s)
		case "base64":
			if base64.StdEncoding.DecodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			b, err = base64.StdEncoding.DecodeString(s)
		case "urlbase64":
			if base64.URLEncoding.DecodedLen(len(s)) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			b, err = base64.URLEncoding.DecodeString(s)
		default:
			return nil, nil
		}
		if err != nil {
			return nil, nil
		}
		return one(value.String(string(b)))
	}),
	"escape": strFunc(1, func(s string, a []string) (value.Collection, error) {
		switch a[0] {
		case "html":
			if htmlEscapedLen(s) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(htmlEscaper.Replace(s)))
		case "json":
			if jsonEscapedLen(s) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			var buf strings.Builder
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			b := strings.TrimSpace(buf.String())
			return one(value.String(b[1 : len(b)-1]))
		}
		return nil, nil
	}),
	"unescape": strFunc(1, func(s string, a []string) (value.Collection, error) {
		switch a[0] {
		case "html":
			// Unescaping HTML never lengthens the text (it works in
			// place), so the result is checked once built.
			out := html.UnescapeString(s)
			if len(out) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(out))
		case "json":
			// Quoting bare double quotes at most doubles the text and
			// decoding at most triples it (an invalid byte becomes
			// U+FFFD): a bounded growth, checked once built.
			var out string
			// Quote bare double quotes so the text is a valid JSON string body.
			q := regexp.MustCompile(`(^|[^\\])"`).ReplaceAllString(s, `$1\"`)
			if err := json.Unmarshal([]byte(`"`+q+`"`), &out); err != nil {
				return nil, nil
			}
			if len(out) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return one(value.String(out))
		}
		return nil, nil
	}),
}

// htmlEscapedLen is the length of htmlEscaper.Replace(s).
func htmlEscapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '\'':
			n += 4 // &amp; &#39;
		case '<', '>':
			n += 3 // &lt; &gt;
		case '"':
			n += 5 // &quot;
		}
	}
	return n
}

// jsonEscapedLen bounds the length of s escaped as a JSON string body
// (without HTML escaping): at most six bytes for each byte or rune.
func jsonEscapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6 // \u00XX (at most)
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6 // \ufffd, \u2028, \u2029
		} else {
			n += size
		}
		i += size
	}
	return n
}
