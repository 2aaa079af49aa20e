// Package gcs reads a config bundle (pkg/config's Bundle) from a Cloud
// Storage object: config.SourceOptions' OpenObject in the functions,
// where terraform writes the registries file as a bundle.
//
// It is a package of its own so that pkg/config links no cloud client:
// `specsync config check` checks registries files offline with it, and
// the operator CLI links none of the Google SDKs (cmd/specsync's
// deps_test.go).
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/specsync/specsync/pkg/config"
)

// Object is a Cloud Storage object holding a config bundle.
type Object struct {
	handle   *storage.ObjectHandle
	location string
}

// Open returns the object location (gs://BUCKET/OBJECT) names, read with
// a client signed in with Application Default Credentials (in Google
// Cloud, the function's service account); STORAGE_EMULATOR_HOST, when
// set, points it at an emulator instead. The client lives as long as
// the process: one per Source, made at cold start.
func Open(ctx context.Context, location string) (config.Object, error) {
	bucket, name, err := Split(location)
	if err != nil {
		return nil, err
	}
	// The JSON API for reads too (the XML API is the client's default):
	// one API, and the one Cloud Storage emulators serve in full.
	client, err := storage.NewClient(ctx, storage.WithJSONReads())
	if err != nil {
		return nil, fmt.Errorf("connect to Cloud Storage: %w", err)
	}
	return NewObject(client, bucket, name), nil
}

// NewObject returns the object name of bucket, read with client.
func NewObject(client *storage.Client, bucket, name string) *Object {
	return &Object{handle: client.Bucket(bucket).Object(name), location: config.ObjectScheme + bucket + "/" + name}
}

// Split returns the bucket and the object name of gs://BUCKET/OBJECT.
func Split(location string) (bucket, name string, err error) {
	rest, ok := strings.CutPrefix(location, config.ObjectScheme)
	bucket, name, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || name == "" {
		return "", "", fmt.Errorf("%q is not a Cloud Storage object: want gs://BUCKET/OBJECT", location)
	}
	return bucket, name, nil
}

// String is gs://BUCKET/OBJECT.
func (o *Object) String() string { return o.location }

// Generation reads the object's metadata: its generation, which every
// write changes.
func (o *Object) Generation(ctx context.Context) (int64, error) {
	attrs, err := o.handle.Attrs(ctx)
	if err != nil {
		return 0, o.fail("read the metadata of", err)
	}
	return attrs.Generation, nil
}

// Read reads the object, at most config.MaxBundleBytes of it, and says
// which generation it read.
func (o *Object) Read(ctx context.Context) ([]byte, int64, error) {
	r, err := o.handle.NewReader(ctx)
	if err != nil {
		return nil, 0, o.fail("read", err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, config.MaxBundleBytes+1))
	if err != nil {
		return nil, 0, o.fail("read", err)
	}
	if len(data) > config.MaxBundleBytes {
		return nil, 0, fmt.Errorf("read %s: larger than %d bytes, the most a config bundle may hold", o.location, config.MaxBundleBytes)
	}
	return data, r.Attrs.Generation, nil
}

// fail says what could not be done to which object: in words for the
// mistake a deployment makes (the object or its bucket is not there: the
// JSON API answers a read of either with one 404), else with the
// client's error.
func (o *Object) fail(what string, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%s %s: no such object, or no such bucket (terraform writes it: is SPECSYNC_REGISTRIES the object it wrote?)", what, o.location)
	}
	return fmt.Errorf("%s %s: %w", what, o.location, err)
}
