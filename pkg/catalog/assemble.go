package catalog

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Piece is one offering rendered and encoded on its own, with what the
// checks across services need (its name, its id and its plans' ids). A
// catalog assembled from pieces is byte for byte the JSON encoding of
// what RenderOfferings returns for their offerings in the same order, so
// a cache that keeps the pieces of its catalog renders only the offerings
// that changed, and still resolves conflicts over all of them: when the
// spec that held a name leaves, the next one in order takes it.
//
// A piece holds no reference to its spec: it is the encoded service and
// its claims, nothing else.
type Piece struct {
	claim claim
	json  []byte // the encoded Service; nil when err is set
	err   error  // why RenderService could not render it
}

// NewPiece renders and encodes one offering (o.Spec must not be nil).
func NewPiece(o Offering) *Piece {
	if o.Spec == nil {
		return &Piece{err: fmt.Errorf("no spec")}
	}
	p := &Piece{claim: claimOf(o.Spec)}
	svc, err := RenderService(o)
	if err == nil {
		// Encoded alone, a service is exactly the bytes encoding/json
		// writes for it inside the catalog's list.
		p.json, err = json.Marshal(svc)
	}
	if err != nil {
		p.json, p.err = nil, err
	}
	return p
}

// SpecID is the id of the spec the piece was rendered from.
func (p *Piece) SpecID() string { return p.claim.id }

// Assemble is RenderOfferings over pieces, encoded: the pieces are
// checked in the order given (the first to claim a name or an id keeps
// it, so pass established specs first), and the result is the catalog's
// JSON body, {"services":[...]} sorted by name, then id. Left-out pieces
// are reported in a *DropError next to a body that is valid without them.
//
// The pieces kept share their bytes with the body from then on: the body
// must not be modified, and Assemble must not run on the same pieces
// from two goroutines at once.
func Assemble(pieces []*Piece) ([]byte, error) {
	kept, size, err := keep(pieces)
	body := make([]byte, 0, size)
	body = append(body, `{"services":[`...)
	offsets := make([]int, len(kept))
	for i, p := range kept {
		if i > 0 {
			body = append(body, ',')
		}
		offsets[i] = len(body)
		body = append(body, p.json...)
	}
	body = append(body, "]}"...)
	// Each kept piece now points at its bytes in the body, so a cache
	// holding both holds each service once.
	for i, p := range kept {
		end := offsets[i] + len(p.json)
		p.json = body[offsets[i]:end:end]
	}
	return body, err
}

// keep checks pieces in order and returns those kept, sorted as the
// catalog lists them, the size of their body, and a *DropError for the
// others.
func keep(pieces []*Piece) ([]*Piece, int, error) {
	var problems []Problem
	taken := newClaims(len(pieces))
	kept := make([]*Piece, 0, len(pieces))
	size := len(`{"services":[]}`)
	for i, p := range pieces {
		if p == nil {
			problems = append(problems, Problem{Reason: fmt.Sprintf("pieces[%d] is nil", i)})
			continue
		}
		if pr, bad := taken.conflict(p.claim); bad {
			problems = append(problems, pr)
			continue
		}
		if p.err != nil {
			problems = append(problems, Problem{SpecID: p.claim.id, Name: p.claim.name, Reason: p.err.Error()})
			continue
		}
		taken.take(p.claim)
		kept = append(kept, p)
		size += len(p.json) + 1
	}
	if len(kept) > 0 {
		size-- // n services, n-1 commas
	}
	slices.SortFunc(kept, func(a, b *Piece) int {
		return cmp.Or(strings.Compare(a.claim.name, b.claim.name), strings.Compare(a.claim.id, b.claim.id))
	})
	if len(problems) > 0 {
		return kept, size, &DropError{Problems: problems}
	}
	return kept, size, nil
}

// Body is a catalog body as Assemble's bytes would be, held as the kept
// pieces' own encodings in order and never copied into one buffer: a
// cache that keeps the pieces holds each service once, and a body of
// tens of megabytes is written (or compressed, or hashed) from them as
// it goes. It is immutable: pieces are never modified once encoded.
type Body struct {
	parts [][]byte // each kept piece's JSON, in catalog order
	size  int
}

// AssembleBody is Assemble without the one buffer: the same checks, the
// same *DropError, the same bytes through WriteTo. Unlike Assemble it
// leaves the pieces as they are, so it may run on pieces another body
// holds.
func AssembleBody(pieces []*Piece) (*Body, error) {
	kept, size, err := keep(pieces)
	b := &Body{parts: make([][]byte, len(kept)), size: size}
	for i, p := range kept {
		b.parts[i] = p.json
	}
	return b, err
}

// Len is the body's size in bytes.
func (b *Body) Len() int { return b.size }

// Services is how many services the body lists.
func (b *Body) Services() int { return len(b.parts) }

// WriteTo writes the body to w, a piece at a time (give it a buffered
// writer: a piece is a few kilobytes).
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	var n int64
	write := func(p []byte) error {
		k, err := w.Write(p)
		n += int64(k)
		return err
	}
	if err := write([]byte(`{"services":[`)); err != nil {
		return n, err
	}
	for i, p := range b.parts {
		if i > 0 {
			if err := write([]byte{','}); err != nil {
				return n, err
			}
		}
		if err := write(p); err != nil {
			return n, err
		}
	}
	return n, write([]byte("]}"))
}

// ETag is BodyETag(revision, b.Bytes()) without the one buffer: a
// catalog body is never plain (it starts with '{'), so its tag is its
// SHA-256's, hashed as it is written.
func (b *Body) ETag(revision int64) string {
	h := sha256.New()
	_, _ = b.WriteTo(h)
	return `"c` + strconv.Itoa(FormatVersion) + "-" + strconv.FormatInt(revision, 10) + "-" + hex.EncodeToString(h.Sum(nil)[:8]) + `"`
}

// Bytes is the body in one new buffer: for tests and tools, not for
// serving (which writes it with WriteTo).
func (b *Body) Bytes() []byte {
	buf := bytes.NewBuffer(make([]byte, 0, b.size))
	_, _ = b.WriteTo(buf)
	return buf.Bytes()
}
