package httpserver

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
)

// compressMinSize: smaller answers (an OperationOutcome, a token) gain
// less from compression than it costs.
const compressMinSize = 1024

// compress encodes answers of compressMinSize bytes or more with gzip or
// zstd, as the request's Accept-Encoding allows. gzhttp adds
// Vary: Accept-Encoding and leaves weak ETags (all of FHIR's) as they
// are: a weak validator survives a change of content coding. gzip runs at
// its fastest level: on a search page of 50 Observations it added ~11 %
// CPU where the default level added ~30 %, for 2 % more bytes
// (BenchmarkSearchPageEncoding, docs/benchmarks.md).
func compress(next http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(gzhttp.MinSize(compressMinSize), gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic(err) // only for invalid options, fixed above
	}
	return wrap(next)
}

// decodeBody undoes a request's Content-Encoding (RFC 9110 §8.4): gzip is
// accepted, any other coding is a 415 naming what is accepted. The
// decoded stream replaces the body, so the handlers' own limits count
// decoded bytes: a small body that inflates past them (a zip bomb) is a
// 413 once the limit is read, never held in memory whole. maxWire caps the
// encoded bytes read.
func decodeBody(next http.Handler, maxWire int64, refuse func(w http.ResponseWriter, r *http.Request, status int, code, message string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		codings := r.Header.Values("Content-Encoding")
		if len(codings) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		gz := false
		for _, v := range codings {
			for _, c := range strings.Split(v, ",") {
				switch c = strings.ToLower(strings.TrimSpace(c)); c {
				case "", "identity":
				case "gzip", "x-gzip":
					if gz { // gzip twice over: nobody sends it; refusing is simpler than nesting
						refuse(w, r, http.StatusUnsupportedMediaType, "unsupported_encoding", "the body is gzip-encoded twice")
						return
					}
					gz = true
				default:
					w.Header().Set("Accept-Encoding", "gzip")
					refuse(w, r, http.StatusUnsupportedMediaType, "unsupported_encoding",
						"unsupported Content-Encoding "+quoteShort(c)+"; send the body as is or gzip-encoded")
					return
				}
			}
		}
		r.Header.Del("Content-Encoding")
		if gz && r.Body != nil && r.Body != http.NoBody {
			r.Body = &gunzipBody{wire: http.MaxBytesReader(w, r.Body, maxWire)}
			// The decoded length is unknown until it is read.
			r.ContentLength = -1
			r.Header.Del("Content-Length")
		}
		next.ServeHTTP(w, r)
	})
}

// gunzipBody decodes its wire body lazily: the gzip header is read on the
// first Read, so a malformed one is a read error the handler answers with
// its 400, like any unreadable body.
type gunzipBody struct {
	wire io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (b *gunzipBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.zr == nil {
		zr, err := gzip.NewReader(b.wire)
		if err != nil {
			b.err = wrapGzipError(err)
			return 0, b.err
		}
		b.zr = zr
	}
	n, err := b.zr.Read(p)
	if err != nil && err != io.EOF {
		err = wrapGzipError(err)
		b.err = err
	}
	return n, err
}

func (b *gunzipBody) Close() error { return b.wire.Close() }

// wrapGzipError keeps a *http.MaxBytesError (the wire limit, a 413) as it
// is and names anything else as a gzip problem.
func wrapGzipError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return &gzipError{err}
}

type gzipError struct{ err error }

func (e *gzipError) Error() string { return "invalid gzip body: " + e.err.Error() }
func (e *gzipError) Unwrap() error { return e.err }

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == 0x7f {
			return '?'
		}
		return r
	}, s) + `"`
}
