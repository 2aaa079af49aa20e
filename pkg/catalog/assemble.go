package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
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
	slices.SortFunc(kept, func(a, b *Piece) int {
		return cmp.Or(strings.Compare(a.claim.name, b.claim.name), strings.Compare(a.claim.id, b.claim.id))
	})
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
	if len(problems) > 0 {
		return body, &DropError{Problems: problems}
	}
	return body, nil
}

// Name is the service name the piece claims.
func (p *Piece) Name() string { return p.claim.name }

// JSON is the encoded service (nil when it could not be rendered). After
// Assemble kept the piece, it is the piece's bytes inside the body: read
// it, never modify it.
func (p *Piece) JSON() []byte { return p.json }
