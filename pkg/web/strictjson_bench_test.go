package web

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// BenchmarkStrictKeys is what the key check adds to a body's decode:
// decode is encoding/json alone into the provision's shape, keys the
// check alone, on a typical provision body and on one whose context fills
// the default body limit (64 KiB, 2,000 keys).
func BenchmarkStrictKeys(b *testing.B) {
	type body struct {
		ServiceID        string          `json:"service_id"`
		PlanID           string          `json:"plan_id"`
		OrganizationGUID string          `json:"organization_guid"`
		SpaceGUID        string          `json:"space_guid"`
		Context          json.RawMessage `json:"context"`
		Parameters       json.RawMessage `json:"parameters"`
	}
	var big strings.Builder
	for i := range 2000 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `"key-%04d":"value-%s"`, i, strings.Repeat("x", 12))
	}
	for name, raw := range map[string]string{
		"typical": `{"service_id":"4a750f86-83f1-556b-9be6-8d51c09359b3","plan_id":"8f21da49-1eea-5133-94f3-259039d58d00","organization_guid":"org-1","space_guid":"space-1","context":{"platform":"kubernetes","namespace":"apps"},"parameters":{"size_gb":3}}`,
		"64KiB":   `{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s","context":{` + big.String() + `}}`,
	} {
		data := []byte(raw)
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var v body
				if err := json.Unmarshal(data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/keys", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			t := reflect.TypeFor[*body]()
			for b.Loop() {
				if err := checkKeys(data, t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
