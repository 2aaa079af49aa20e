package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// assembled is Assemble over the offerings' pieces.
func assembled(offs []Offering) ([]byte, error) {
	pieces := make([]*Piece, len(offs))
	for i, o := range offs {
		pieces[i] = NewPiece(o)
	}
	return Assemble(pieces)
}

// wantSameAsRender checks Assemble against RenderOfferings encoded, the
// catalog the broker served before pieces existed: the same bytes and the
// same problems, in the same order.
func wantSameAsRender(t *testing.T, offs []Offering) {
	t.Helper()
	cat, rerr := RenderOfferings(offs)
	want := mustJSON(t, cat)
	got, aerr := assembled(offs)
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled body differs from the render:\n%s\nwant\n%s", got, want)
	}
	var rd, ad *DropError
	errors.As(rerr, &rd)
	errors.As(aerr, &ad)
	if (rd == nil) != (ad == nil) || (rd != nil && !reflect.DeepEqual(rd.Problems, ad.Problems)) {
		t.Fatalf("problems differ:\nassembled %v\nrendered  %v", aerr, rerr)
	}
	if (rerr == nil) != (aerr == nil) {
		t.Fatalf("errors differ: assembled %v, rendered %v", aerr, rerr)
	}
	// AssembleBody: the same bytes, never in one buffer, and its length.
	pieces := make([]*Piece, len(offs))
	for i, o := range offs {
		pieces[i] = NewPiece(o)
	}
	body, berr := AssembleBody(pieces)
	if got := body.Bytes(); !bytes.Equal(got, want) || body.Len() != len(want) {
		t.Fatalf("AssembleBody is %d bytes (Len %d):\n%s\nwant %d:\n%s", len(got), body.Len(), got, len(want), want)
	}
	if got, want := body.ETag(7), BodyETag(7, want); got != want {
		t.Fatalf("Body.ETag %s, BodyETag %s", got, want)
	}
	var bd *DropError
	errors.As(berr, &bd)
	if (rd == nil) != (bd == nil) || (rd != nil && !reflect.DeepEqual(rd.Problems, bd.Problems)) || body.Services() != len(cat.Services) {
		t.Fatalf("AssembleBody: problems %v, %d services; rendered %v, %d", berr, body.Services(), rerr, len(cat.Services))
	}
}

func offerings(specs []*spec.Spec, gen int64) []Offering {
	offs := make([]Offering, 0, len(specs))
	for _, s := range specs {
		offs = append(offs, Offering{Spec: s, Generation: gen})
	}
	return offs
}

func TestAssembleIsRenderOfferings(t *testing.T) {
	t.Run("fixtures", func(t *testing.T) { wantSameAsRender(t, offerings(fixtures(), 3)) })
	t.Run("empty", func(t *testing.T) {
		wantSameAsRender(t, nil)
		if got, _ := assembled(nil); string(got) != `{"services":[]}` {
			t.Fatalf("empty catalog %s", got)
		}
	})
	for _, tc := range problemCases() {
		if slices.Contains(tc.specs, nil) {
			continue // a cache never has a nil spec; Assemble names nil pieces instead
		}
		t.Run(tc.name, func(t *testing.T) { wantSameAsRender(t, offerings(tc.specs, 1)) })
	}
	// Random catalogs drawn from a few names, ids and plan ids, so that
	// every kind of conflict happens, in random orders: the first claim
	// wins in both.
	r := rand.New(rand.NewPCG(7, 13))
	fx := fixtures()
	for round := range 200 {
		var offs []Offering
		for range 1 + r.IntN(12) {
			var s *spec.Spec
			if r.IntN(4) == 0 {
				c := *fx[r.IntN(len(fx))]
				s = &c
			} else {
				plans := make([]string, r.IntN(3))
				for i := range plans {
					plans[i] = fmt.Sprintf("plan-%d", r.IntN(6))
				}
				s = problemSpec(fmt.Sprintf("name-%d", r.IntN(4)), fmt.Sprintf("id-%d", r.IntN(6)), plans...)
			}
			offs = append(offs, Offering{Spec: s, Generation: int64(r.IntN(3))})
		}
		t.Run(fmt.Sprintf("random-%d", round), func(t *testing.T) { wantSameAsRender(t, offs) })
	}
}

// TestAssembleNilPiece: a nil piece is reported, not a panic.
func TestAssembleNilPiece(t *testing.T) {
	body, err := Assemble([]*Piece{nil, NewPiece(Offering{Spec: fixtures()[0]})})
	var de *DropError
	if !errors.As(err, &de) || len(de.Problems) != 1 || de.Problems[0].Reason != "pieces[0] is nil" {
		t.Fatalf("error %v, want one problem naming pieces[0]", err)
	}
	if !bytes.Contains(body, []byte(fixtures()[0].ID)) {
		t.Fatalf("the other piece is missing: %s", body)
	}
}

func BenchmarkAssemble(b *testing.B) {
	specs := benchSpecs(200)
	pieces := make([]*Piece, len(specs))
	for i, s := range specs {
		pieces[i] = NewPiece(Offering{Spec: s, Generation: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Assemble(pieces); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBodyETagIsETag(t *testing.T) {
	body, _ := assembled(offerings(fixtures(), 1))
	for _, b := range [][]byte{nil, {}, []byte("plain-1.0_x"), []byte(`{"services":[]}`), body} {
		for _, rev := range []int64{0, 7} {
			if got, want := BodyETag(rev, b), ETag(rev, string(b)); got != want {
				t.Errorf("BodyETag(%d, %q) = %s, ETag gives %s", rev, b, got, want)
			}
		}
	}
}

// TestAssembleAgain: pieces assembled once (now sharing the first body)
// assemble into the same bytes again, and the first body is untouched
// by the second assembly.
func TestAssembleAgain(t *testing.T) {
	offs := offerings(fixtures(), 2)
	pieces := make([]*Piece, len(offs))
	for i, o := range offs {
		pieces[i] = NewPiece(o)
	}
	first, err := Assemble(pieces)
	if err != nil {
		t.Fatal(err)
	}
	kept := bytes.Clone(first)
	second, err := Assemble(pieces[1:])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, kept) {
		t.Fatal("a second assembly changed the first body")
	}
	want, _ := assembled(offs[1:])
	if !bytes.Equal(second, want) {
		t.Fatalf("reassembled pieces differ:\n%s\nwant\n%s", second, want)
	}
	third, _ := Assemble(pieces)
	if !bytes.Equal(third, first) {
		t.Fatal("the pieces do not assemble into the first body again")
	}
}
