package registry

import (
	"fmt"
	"regexp"
)

// Filter decides which entries of a registry are offered. Expressions
// match the whole entry name (they are anchored), deny wins over allow,
// and an empty allow list allows everything.
type Filter struct {
	allow []*regexp.Regexp
	deny  []*regexp.Regexp
}

// NewFilter compiles allow and deny expressions. An invalid expression is
// an error naming it: a filter that silently matches nothing would hide (or
// mark for deletion) a whole registry.
func NewFilter(allow, deny []string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.allow, err = compileAll("allow", allow); err != nil {
		return nil, err
	}
	if f.deny, err = compileAll("deny", deny); err != nil {
		return nil, err
	}
	return f, nil
}

func compileAll(field string, exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for i, e := range exprs {
		re, err := regexp.Compile(`^(?:` + e + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q is not a valid regular expression: %w", field, i, e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Allows reports whether an entry name passes the filter. A nil filter
// allows everything.
func (f *Filter) Allows(name string) bool {
	if f == nil {
		return true
	}
	for _, re := range f.deny {
		if re.MatchString(name) {
			return false
		}
	}
	if len(f.allow) == 0 {
		return true
	}
	for _, re := range f.allow {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}
