package emulatortest

import (
	"context"
	"strings"
	"sync"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TxWatch watches a Firestore client's gRPC calls (its Unary and Stream
// interceptors go to FirestoreVia) for the transactions that touch one
// document: read it (BatchGetDocuments in the transaction) or write it
// (the transaction's Commit). It counts them exactly, how many of them
// were aborted and retried (the client begins the retry naming the
// aborted transaction), and writes of the document outside any
// transaction. It sees what went over the wire, not what the code meant.
type TxWatch struct {
	doc string // "/documents/" + path, the suffix of the document's name

	mu       sync.Mutex
	touching map[string]bool // transaction id -> touched the document
	counts   TxCounts
}

// TxCounts is what a TxWatch saw.
type TxCounts struct {
	// Transactions is how many transactions touched the document.
	Transactions int
	// Retried is how many of them were aborted and retried.
	Retried int
	// Aborted is how many of their commits were refused with ABORTED.
	Aborted int
	// Commits is how many of them committed.
	Commits int
	// PlainWrites are writes of the document outside a transaction.
	PlainWrites int
}

// NewTxWatch watches the document at path (e.g. "meta/catalog").
func NewTxWatch(path string) *TxWatch {
	return &TxWatch{doc: "/documents/" + strings.Trim(path, "/"), touching: map[string]bool{}}
}

// Counts returns what the watch saw so far.
func (w *TxWatch) Counts() TxCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts
}

func (w *TxWatch) is(name string) bool { return strings.HasSuffix(name, w.doc) }

// touch records that transaction tx touched the document.
func (w *TxWatch) touch(tx []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.touching[string(tx)] {
		w.touching[string(tx)] = true
		w.counts.Transactions++
	}
}

// Unary is the unary interceptor: BeginTransaction (retries), Commit.
func (w *TxWatch) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch r := req.(type) {
	case *firestorepb.BeginTransactionRequest:
		if retry := r.GetOptions().GetReadWrite().GetRetryTransaction(); len(retry) > 0 {
			w.mu.Lock()
			if w.touching[string(retry)] {
				w.counts.Retried++
			}
			w.mu.Unlock()
		}
	case *firestorepb.CommitRequest:
		writes := false
		for _, wr := range r.GetWrites() {
			writes = writes || w.is(wr.GetUpdate().GetName()) || w.is(wr.GetDelete()) || w.is(wr.GetTransform().GetDocument())
		}
		if writes && len(r.GetTransaction()) == 0 {
			w.mu.Lock()
			w.counts.PlainWrites++
			w.mu.Unlock()
		}
		if writes && len(r.GetTransaction()) > 0 {
			w.touch(r.GetTransaction())
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		w.mu.Lock()
		if w.touching[string(r.GetTransaction())] && len(r.GetTransaction()) > 0 {
			switch status.Code(err) {
			case codes.OK:
				w.counts.Commits++
			case codes.Aborted:
				w.counts.Aborted++
			}
		}
		w.mu.Unlock()
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Stream is the stream interceptor: reads in a transaction.
func (w *TxWatch) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	return &watchedStream{ClientStream: s, w: w}, nil
}

type watchedStream struct {
	grpc.ClientStream
	w *TxWatch
}

func (s *watchedStream) SendMsg(m any) error {
	if r, ok := m.(*firestorepb.BatchGetDocumentsRequest); ok && len(r.GetTransaction()) > 0 {
		for _, d := range r.GetDocuments() {
			if s.w.is(d) {
				s.w.touch(r.GetTransaction())
			}
		}
	}
	return s.ClientStream.SendMsg(m)
}
