package registry

import "errors"

// problems collects a block's problems, so that Build reports every one
// of them, not the first: errors.Join of errors that each name their
// field ("dockerhub.page_size ..."), which `config check` places each at
// its own line. A check that needs an earlier field to be right (the
// prefix needs the host) runs only when that field was.
type problems []error

// add keeps err, if any, and reports whether there was one.
func (p *problems) add(err error) bool {
	if err == nil {
		return false
	}
	*p = append(*p, err)
	return true
}

// err is every problem kept, joined; nil when there is none.
func (p problems) err() error { return errors.Join(p...) }

// joined is the errors err joins (errors.Join), or err alone.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
