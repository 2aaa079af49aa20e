package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/pkg/spec"
)

// Helm's media types for a chart in an OCI registry (Helm 3's `helm
// push`): the config blob is the chart's Chart.yaml as JSON, the one
// content layer the chart archive.
const (
	HelmConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	HelmContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Limits on the files of a chart that are read. A Chart.yaml is a
// spec-sized document; a values.schema.json may be bigger than a served
// schema (whitespace, descriptions later trimmed by nothing), but past
// this it cannot fit OSB's 64 kB however it is encoded.
const (
	maxChartYAMLBytes = spec.MaxSpecBytes
	maxChartSchema    = 1 << 20
)

// chartMeta is the part of a Chart.yaml specsync reads (helm's
// chart.Metadata).
type chartMeta struct {
	APIVersion  string            `json:"apiVersion"`
	Name        string            `json:"name"`
	Version     string            `json:"version"`
	Description string            `json:"description"`
	Home        string            `json:"home"`
	Icon        string            `json:"icon"`
	Keywords    []string          `json:"keywords"`
	AppVersion  string            `json:"appVersion"`
	Deprecated  bool              `json:"deprecated"`
	Type        string            `json:"type"`
	Annotations map[string]string `json:"annotations"`
}

// chartContent is what one chart version holds: its Chart.yaml and its
// values.schema.json (nil when it has none), or why they cannot be read.
// It is kept in the cache under the version's digest, raw, so that every
// fetch builds a fresh spec nobody else holds.
type chartContent struct {
	meta   chartMeta
	schema []byte
	// err is a problem of the archive itself: the same bytes would fail
	// the same way, so it is cached with them.
	err error
	// notChart marks an OCI manifest that is no chart (an image, another
	// artifact): it offers nothing.
	notChart bool
}

// readChartContent reads a chart archive (a gzipped tar whose files all
// lie in one top directory, the chart's) for its Chart.yaml and
// values.schema.json, within maxUnpacked bytes unpacked. Whatever is
// wrong with it is the content's error.
func readChartContent(archive []byte, maxUnpacked int64) chartContent {
	chartYAML, schema, err := unpackChart(archive, maxUnpacked)
	if err != nil {
		return chartContent{err: fmt.Errorf("archive: %w", err)}
	}
	meta, err := parseChartYAML(chartYAML)
	if err != nil {
		return chartContent{err: err}
	}
	return chartContent{meta: meta, schema: schema}
}

// windowsDrive is a path starting with a drive letter, which a tar
// extracted on Windows would put outside the chart.
var windowsDrive = regexp.MustCompile(`^[a-zA-Z]:`)

// unpackChart walks an archive. It refuses what helm's loader refuses and
// a little more, so that no file is ever read from outside the chart or
// twice: absolute paths, "..", drive letters, links (a link's name is in
// the chart, its content elsewhere), more than one top directory, a
// Chart.yaml or schema given twice. It reads to the end, so a truncated
// archive or one whose gzip checksum fails is an error too.
func unpackChart(archive []byte, maxUnpacked int64) (chartYAML, schema []byte, err error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, nil, fmt.Errorf("not a gzip file: %w", err)
	}
	unpacked := &limitedReader{r: gz, left: maxUnpacked, max: maxUnpacked}
	tr := tar.NewReader(unpacked)
	top := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("not a tar file: %w", unpacked.why(err))
		}
		n := strings.ReplaceAll(hdr.Name, `\`, "/")
		clean := path.Clean(n)
		switch {
		case n == "" || path.IsAbs(n) || windowsDrive.MatchString(n):
			return nil, nil, fmt.Errorf("%q: an absolute path", hdr.Name)
		case clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(n, "/../") || strings.HasSuffix(n, "/.."):
			return nil, nil, fmt.Errorf("%q: a path out of the chart", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, nil, fmt.Errorf("%q: a link (to %q); a chart archive holds files", hdr.Name, hdr.Linkname)
		default:
			return nil, nil, fmt.Errorf("%q: not a file (type %q)", hdr.Name, hdr.Typeflag)
		}
		dir, rest, ok := strings.Cut(clean, "/")
		if !ok {
			return nil, nil, fmt.Errorf("%q: a file outside the chart's directory", hdr.Name)
		}
		if top == "" {
			top = dir
		} else if dir != top {
			return nil, nil, fmt.Errorf("%q: a second top directory (the chart's is %q)", hdr.Name, top)
		}
		var into *[]byte
		limit := int64(0)
		switch rest {
		case "Chart.yaml":
			into, limit = &chartYAML, maxChartYAMLBytes
		case "values.schema.json":
			into, limit = &schema, maxChartSchema
		}
		if into == nil {
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return nil, nil, fmt.Errorf("%q: %w", hdr.Name, unpacked.why(err))
			}
			continue
		}
		if *into != nil {
			return nil, nil, fmt.Errorf("%q: %s is in the archive twice", hdr.Name, rest)
		}
		b, err := io.ReadAll(io.LimitReader(tr, limit+1))
		if err != nil {
			return nil, nil, fmt.Errorf("%q: %w", hdr.Name, unpacked.why(err))
		}
		if int64(len(b)) > limit {
			return nil, nil, fmt.Errorf("%s is more than the %d bytes allowed", rest, limit)
		}
		*into = b
	}
	// The tar ends before the gzip stream does; reading the rest checks
	// the gzip trailer (its CRC and length).
	if _, err := io.Copy(io.Discard, unpacked); err != nil {
		return nil, nil, fmt.Errorf("not a gzip file: %w", unpacked.why(err))
	}
	if chartYAML == nil {
		return nil, nil, errors.New("no Chart.yaml in the chart's directory")
	}
	return chartYAML, schema, nil
}

// limitedReader fails once more than left bytes were read, and says why.
type limitedReader struct {
	r         io.Reader
	left, max int64
	limit     bool
}

var errUnpackedTooBig = errors.New("unpacked too big")

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		l.limit = true
		return 0, errUnpackedTooBig
	}
	if int64(len(p)) > l.left {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		l.limit = true
		return n, errUnpackedTooBig
	}
	return n, err
}

// why names a read error, the limit's in words.
func (l *limitedReader) why(err error) error {
	if l.limit || errors.Is(err, errUnpackedTooBig) {
		return fmt.Errorf("it unpacks to more than the %d bytes allowed", l.max)
	}
	return err
}

// parseChartYAML reads a Chart.yaml as helm does (sigs.k8s.io/yaml: an
// unquoted number where a string is due, such as appVersion: 1.10, is
// read as its text).
func parseChartYAML(b []byte) (chartMeta, error) {
	var m chartMeta
	if err := yaml.Unmarshal(b, &m); err != nil {
		return chartMeta{}, fmt.Errorf("Chart.yaml: %w", err)
	}
	switch {
	case m.Name == "":
		return chartMeta{}, errors.New("Chart.yaml: name is missing")
	case m.Version == "":
		return chartMeta{}, errors.New("Chart.yaml: version is missing")
	}
	return m, nil
}
