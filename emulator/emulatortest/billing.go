package emulatortest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
)

// Billing counts what Firestore bills a client's calls for, from the wire
// (its Unary and Stream interceptors go to FirestoreVia): a document read
// (found or missing) is one read, a query one read per document it
// returns and at least one, a committed write one write, a committed
// delete one delete. It sees everything the client does, whatever the
// code counts itself.
type Billing struct {
	mu                     sync.Mutex
	reads, writes, deletes int64
}

// Counts returns the reads, writes and deletes so far.
func (b *Billing) Counts() (reads, writes, deletes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads, b.writes, b.deletes
}

// Unary counts committed writes and deletes.
func (b *Billing) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := req.(*firestorepb.CommitRequest); ok && err == nil {
		b.mu.Lock()
		for _, w := range r.GetWrites() {
			if w.GetDelete() != "" {
				b.deletes++
			} else {
				b.writes++
			}
		}
		b.mu.Unlock()
	}
	return err
}

// Stream counts the documents reads and queries return.
func (b *Billing) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	return &billedStream{ClientStream: s, b: b, query: strings.HasSuffix(method, "/RunQuery")}, nil
}

type billedStream struct {
	grpc.ClientStream
	b     *Billing
	query bool
	docs  int
	done  bool
}

func (s *billedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err == nil {
		switch r := m.(type) {
		case *firestorepb.BatchGetDocumentsResponse:
			if r.GetFound() != nil || r.GetMissing() != "" {
				s.b.reads++
			}
		case *firestorepb.RunQueryResponse:
			if r.GetDocument() != nil {
				s.docs++
				s.b.reads++
			}
		}
		return nil
	}
	if errors.Is(err, io.EOF) && s.query && s.docs == 0 && !s.done {
		s.b.reads++ // a query that returns nothing is billed one read
	}
	s.done = true
	return err
}
