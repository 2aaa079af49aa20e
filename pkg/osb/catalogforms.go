package osb

// The forms the catalog is served in: the JSON body as rendered
// (identity) and that body gzip-compressed, each with its own ETag, both
// made once per revision at render time and checked against the largest
// response the deployment can send. A catalog form over that limit is
// refused, never cut: Cloud Run ends a response over its limit with an
// error, so a truncated catalog would reach the platform as a failure at
// best and as a partial catalog at worst.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/web"
)

// DefaultMaxCatalogBytes is the largest catalog body served when none is
// configured: Cloud Run's limit on a response that is not streamed (32 MiB
// for HTTP/1 servers, which Cloud Run functions are; see docs/deploy.md,
// "How large a catalog this deployment serves"). The body is what counts;
// the status line and headers are a few hundred bytes beside it.
const DefaultMaxCatalogBytes = 32 << 20

// gzipSuffix marks the gzip form's ETag: the identity tag with "-gz"
// before its closing quote, so the two forms of one body never share a
// tag (RFC 9110: a strong tag names one sequence of bytes) and a cache
// holding one form never gets a 304 for the other.
const gzipSuffix = "-gz"

// encodeForms makes what is served of one rendered body: its tag, its
// gzip form and that form's tag, and the check of both against limit.
// It is the step after catalog.AssembleBody for any list of services
// (the whole catalog today; a credential's filtered view goes through
// the same step with its own body). A form over limit is not held: only
// its size, for the refusal. The body itself is the pieces' bytes: the
// tag and the gzip form are made from them as they are written.
func encodeForms(rev int64, body *catalog.Body, limit int64) (*Rendered, error) {
	if limit <= 0 {
		limit = DefaultMaxCatalogBytes
	}
	r := &Rendered{Revision: rev, body: body, ETag: body.ETag(rev), Services: body.Services(), Limit: limit}
	var buf bytes.Buffer
	// Default compression: a catalog's services repeat the same schema
	// keys, so even the default level shrinks it many times over, and it
	// runs once per revision, not per request. No name and no time in
	// the header, so one body always compresses to the same bytes.
	zw := gzip.NewWriter(&buf)
	bw := bufio.NewWriterSize(zw, 64<<10) // a piece is a few kB; the compressor likes more at once
	if _, err := body.WriteTo(bw); err != nil {
		return nil, fmt.Errorf("compress catalog: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("compress catalog: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress catalog: %w", err)
	}
	r.GzipBytes = int64(buf.Len())
	if r.GzipBytes <= limit {
		r.Gzip = bytes.Clone(buf.Bytes()) // the buffer's spare capacity is not held
		r.GzipETag = strings.TrimSuffix(r.ETag, `"`) + gzipSuffix + `"`
	}
	return r, nil
}

// TooLarge reports whether the identity (uncompressed) form is over the
// limit, and so refused to every client that does not take gzip.
func (r *Rendered) TooLarge() bool { return int64(r.body.Len()) > r.Limit }

// GzipTooLarge reports whether the gzip form is over the limit too: then
// the catalog cannot be served at all.
func (r *Rendered) GzipTooLarge() bool { return r.GzipBytes > r.Limit }

// logSize says, at render time, that a form of this render is refused:
// an ERROR with stable fields (event catalog_too_large, bytes,
// gzip_bytes, limit) that a log-based metric and an alert can count.
func (r *Rendered) logSize(log *slog.Logger) {
	if !r.TooLarge() {
		return
	}
	refused := "identity"
	if r.GzipTooLarge() {
		refused = "identity and gzip"
	}
	log.Error("catalog too large to serve", logging.FieldEvent, logging.EventCatalogTooLarge,
		logging.FieldRevision, r.Revision, logging.FieldServices, r.Services, logging.FieldBytes, r.body.Len(),
		logging.FieldGzipBytes, r.GzipBytes, logging.FieldLimit, r.Limit, logging.FieldRefused, refused)
}

// Problem is the operator's sentence for a catalog with a refused form,
// "" when every form fits (the status page shows it).
func (r *Rendered) Problem() string {
	switch {
	case r.GzipTooLarge():
		return fmt.Sprintf("the catalog (revision %d, %d services) is %d bytes, %d gzip-compressed, both over the limit of %d bytes: every GET /v2/catalog is refused with 500 until it is smaller",
			r.Revision, r.Services, r.body.Len(), r.GzipBytes, r.Limit)
	case r.TooLarge():
		return fmt.Sprintf("the catalog (revision %d, %d services) is %d bytes, over the limit of %d bytes: it is served gzip-compressed only (%d bytes), clients that do not accept gzip are refused with 500",
			r.Revision, r.Services, r.body.Len(), r.Limit, r.GzipBytes)
	}
	return ""
}

// encodingWeights reads Accept-Encoding (RFC 9110 12.5.3): the q-values
// of gzip (or x-gzip) and of identity, each by name or else by "*".
// gzip not named is not acceptable (0); identity not named is (1). A
// q-value that does not parse makes its coding unacceptable: the
// identity form is the safe answer to a header this broker cannot read.
func encodingWeights(h http.Header) (gzipQ, identityQ float64) {
	gzipQ, identityQ, starQ := -1.0, -1.0, -1.0
	for _, v := range h.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding == "" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(name), "q") {
					q = qvalue(strings.TrimSpace(val))
				}
			}
			switch coding {
			case "gzip", "x-gzip":
				gzipQ = max(gzipQ, q)
			case "identity":
				identityQ = max(identityQ, q)
			case "*":
				starQ = max(starQ, q)
			}
		}
	}
	if gzipQ < 0 {
		gzipQ = max(starQ, 0)
	}
	if identityQ < 0 {
		identityQ = 1
		if starQ >= 0 {
			identityQ = starQ
		}
	}
	return gzipQ, identityQ
}

// qvalue parses an RFC 9110 weight: 0 to 1 with at most three decimals;
// anything else is 0.
func qvalue(s string) float64 {
	if len(s) == 0 || len(s) > 5 || (s[0] != '0' && s[0] != '1') || len(s) > 1 && s[1] != '.' {
		return 0
	}
	q, err := strconv.ParseFloat(s, 64)
	if err != nil || q < 0 || q > 1 {
		return 0
	}
	return q
}

// serveCatalog writes the form of cat the request accepts, a 304 when
// the request already holds that form (If-None-Match against that
// form's tag), or the refusal of a form over the limit. Every answer
// says Vary: Accept-Encoding, so a cache between the platform and the
// broker keeps the two forms apart.
func serveCatalog(w http.ResponseWriter, r *http.Request, cat *Rendered) {
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	h.Set(api.RevisionHeader, strconv.FormatInt(cat.Revision, 10))
	// The gzip form when gzip weighs at least as much as identity (a tie
	// goes to the smaller body); when identity is over the limit, to
	// whoever accepts gzip at all.
	gzipQ, identityQ := encodingWeights(r.Header)
	gz := gzipQ > 0 && (gzipQ >= identityQ || cat.TooLarge() && !cat.GzipTooLarge())
	etag := cat.ETag
	if gz {
		etag = cat.GzipETag
	}
	if gz && cat.GzipTooLarge() || !gz && cat.TooLarge() {
		refuseTooLarge(w, cat, gz)
		return
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	// A length, not chunks: Cloud Run limits a streamed response far
	// lower than one whose length it knows (docs/deploy.md).
	if gz {
		h.Set("Content-Length", strconv.Itoa(len(cat.Gzip)))
	} else {
		h.Set("Content-Length", strconv.Itoa(cat.body.Len()))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if gz {
		_, _ = w.Write(cat.Gzip)
		return
	}
	// The identity form from the pieces, through a buffer so that a
	// write carries many of them.
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	_, _ = cat.body.WriteTo(bw)
	_ = bw.Flush()
	bw.Reset(nil)
	writers.Put(bw)
}

// writers are the buffers identity answers are written through.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// refuseTooLarge answers a request whose form is over the limit: an OSB
// error (500: the broker cannot send its catalog; not 503, which invites
// a retry that would meet the same catalog) that says the sizes and what
// would help.
func refuseTooLarge(w http.ResponseWriter, cat *Rendered, gz bool) {
	if cat.GzipTooLarge() {
		web.WriteError(w, http.StatusInternalServerError, "CatalogTooLarge",
			"the catalog (revision %d, %d services) is %d bytes, %d bytes gzip-compressed: both over the %d-byte limit of a response from this deployment, so it is not served (never cut); the operator must make it smaller (fewer services or registries)",
			cat.Revision, cat.Services, cat.body.Len(), cat.GzipBytes, cat.Limit)
		return
	}
	web.WriteError(w, http.StatusInternalServerError, "CatalogTooLarge",
		"the catalog (revision %d, %d services) is %d bytes, over the %d-byte limit of a response from this deployment; it is served gzip-compressed (%d bytes) to requests with Accept-Encoding: gzip",
		cat.Revision, cat.Services, cat.body.Len(), cat.Limit, cat.GzipBytes)
}
