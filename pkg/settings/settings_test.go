package settings_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/settings"
)

func env(m map[string]string) settings.Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func hexDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const (
	brokerPassword = "a-broker-password-from-openssl-rand"
	adminToken     = "an-admin-token-from-openssl-rand"
)

var catalogBase = map[string]string{
	"GOOGLE_CLOUD_PROJECT":     "p",
	"SPECSYNC_BROKER_USERNAME": "platform",
	"SPECSYNC_BROKER_PASSWORD": brokerPassword,
	"SPECSYNC_ADMIN_TOKEN":     adminToken,
}

var bootstrapBase = map[string]string{
	"GOOGLE_CLOUD_PROJECT": "p",
	"SPECSYNC_ADMIN_TOKEN": adminToken,
}

func loadCatalog(m map[string]string) (settings.Catalog, error) { return settings.LoadCatalog(env(m)) }

// wantProblem checks that err is an Invalid configuration error naming
// every want and containing none of the secrets.
func wantProblem(t *testing.T, name string, err error, want []string, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: loads", name)
		return
	}
	if !failure.Is(err, failure.Invalid) {
		t.Errorf("%s: not an Invalid error: %v", name, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", name, err, w)
		}
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error contains a value", name)
		}
	}
}

func TestCatalogCredentialSources(t *testing.T) {
	t.Parallel()
	// Each source alone.
	c, err := loadCatalog(catalogBase)
	if err != nil {
		t.Fatal(err)
	}
	if c.BrokerPassword.Value != brokerPassword || c.Admin.Token.Value != adminToken {
		t.Errorf("plain credentials: %+v", c)
	}
	c, err = loadCatalog(with(catalogBase,
		"SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest(brokerPassword),
		"SPECSYNC_ADMIN_TOKEN", "", "SPECSYNC_ADMIN_TOKEN_SHA256", strings.ToUpper(hexDigest(adminToken))))
	if err != nil {
		t.Fatal(err)
	}
	if c.BrokerPassword.Value != "" || len(c.BrokerPassword.SHA256) != 1 || hex.EncodeToString(c.BrokerPassword.SHA256[0]) != hexDigest(brokerPassword) {
		t.Errorf("broker password digest: %v", c.BrokerPassword)
	}
	if len(c.Admin.Token.SHA256) != 1 || hex.EncodeToString(c.Admin.Token.SHA256[0]) != hexDigest(adminToken) {
		t.Errorf("admin token digest (upper-case hex): %v", c.Admin.Token)
	}
	c, err = loadCatalog(with(catalogBase, "SPECSYNC_ADMIN_TOKEN", "", "SPECSYNC_ADMIN_TOKEN_FILE", "/secrets/admin/token"))
	if err != nil || c.Admin.Token.File != "/secrets/admin/token" {
		t.Errorf("admin token file: %v, %v", c.Admin.Token, err)
	}

	digestOfEmpty := hexDigest("")
	for name, c := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"password and its digest": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest(brokerPassword)),
			[]string{"set only one of SPECSYNC_BROKER_PASSWORD, SPECSYNC_BROKER_PASSWORD_SHA256"}},
		"admin token and its file": {with(catalogBase, "SPECSYNC_ADMIN_TOKEN_FILE", "/secrets/admin/token"),
			[]string{"set only one of SPECSYNC_ADMIN_TOKEN, SPECSYNC_ADMIN_TOKEN_FILE"}},
		"admin digest and file": {with(catalogBase, "SPECSYNC_ADMIN_TOKEN", "", "SPECSYNC_ADMIN_TOKEN_SHA256", hexDigest(adminToken), "SPECSYNC_ADMIN_TOKEN_FILE", "/t"),
			[]string{"set only one of SPECSYNC_ADMIN_TOKEN_SHA256, SPECSYNC_ADMIN_TOKEN_FILE"}},
		"no password": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", ""),
			[]string{"one of SPECSYNC_BROKER_PASSWORD, SPECSYNC_BROKER_PASSWORD_SHA256 is required"}},
		"the catalog has no password file": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_FILE", "/p"),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 is required"}},
		"no admin credential": {with(catalogBase, "SPECSYNC_ADMIN_TOKEN", ""),
			[]string{"SPECSYNC_ADMIN_TOKEN_SHA256", "SPECSYNC_ADMIN_TOKEN_FILE", "SPECSYNC_SCHEDULER_AUDIENCE", "is required"}},
		"short admin token": {with(catalogBase, "SPECSYNC_ADMIN_TOKEN", "too-short"),
			[]string{"SPECSYNC_ADMIN_TOKEN must be at least 16 characters"}},
		"digest too short": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest(brokerPassword)[:63]),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 must be a SHA-256 digest: 64 hexadecimal characters"}},
		"digest not hex": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", "g"+hexDigest(brokerPassword)[1:]),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 must be a SHA-256 digest"}},
		"sha256sum's whole line": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest(brokerPassword)+"  -"),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 must be a SHA-256 digest"}},
		// The mistake that matters most: the password itself in the
		// digest's variable. It is refused, and not repeated.
		"the password as its digest": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", brokerPassword),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 must be a SHA-256 digest"}},
		"three digests": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest("a")+","+hexDigest("b")+","+hexDigest("c")),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 holds 3 digests; at most 2"}},
		"second digest bad": {with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest("a")+",nope"),
			[]string{"SPECSYNC_BROKER_PASSWORD_SHA256 (digest 2) must be a SHA-256 digest"}},
		"digest of nothing": {with(catalogBase, "SPECSYNC_ADMIN_TOKEN", "", "SPECSYNC_ADMIN_TOKEN_SHA256", digestOfEmpty),
			[]string{"SPECSYNC_ADMIN_TOKEN_SHA256 is the digest of an empty string"}},
	} {
		_, err := loadCatalog(c.env)
		wantProblem(t, name, err, c.want, brokerPassword, adminToken, digestOfEmpty, hexDigest(brokerPassword), hexDigest(adminToken))
		// A badly set credential is reported once, not also as missing.
		if err != nil && strings.Contains(c.want[0], "must be") && strings.Contains(err.Error(), "is required") {
			t.Errorf("%s: reported as missing too: %v", name, err)
		}
	}
}

func TestBootstrapAdminTokenFile(t *testing.T) {
	t.Parallel()
	b, err := settings.LoadBootstrap(env(with(bootstrapBase, "SPECSYNC_ADMIN_TOKEN", "", "SPECSYNC_ADMIN_TOKEN_FILE", "/secrets/admin/token")))
	if err != nil {
		t.Fatal(err)
	}
	if b.Admin.Token.File != "/secrets/admin/token" || b.Admin.Token.Value != "" {
		t.Errorf("admin token: %v", b.Admin.Token)
	}
	_, err = settings.LoadBootstrap(env(with(bootstrapBase, "SPECSYNC_ADMIN_TOKEN_FILE", "/secrets/admin/token")))
	wantProblem(t, "token and file", err, []string{"set only one of SPECSYNC_ADMIN_TOKEN, SPECSYNC_ADMIN_TOKEN_FILE"}, adminToken)
	// The scheduler's identity token alone is enough.
	if _, err := settings.LoadBootstrap(env(with(bootstrapBase, "SPECSYNC_ADMIN_TOKEN", "",
		"SPECSYNC_SCHEDULER_AUDIENCE", "https://f", "SPECSYNC_SCHEDULER_SERVICE_ACCOUNT", "s@p.iam.gserviceaccount.com"))); err != nil {
		t.Errorf("scheduler audience without a token: %v", err)
	}
}

// Only the functions that load the registries file read its setting.
func TestRegistriesFileIsReadWhereItIsUsed(t *testing.T) {
	t.Parallel()
	readsIt := func(load func(settings.Lookup)) bool {
		read := false
		load(func(k string) (string, bool) { read = read || k == "SPECSYNC_REGISTRIES"; return "", false })
		return read
	}
	if !readsIt(func(l settings.Lookup) { _, _ = settings.LoadBootstrap(l) }) {
		t.Error("the bootstrap does not read SPECSYNC_REGISTRIES (it fans out one message per registry)")
	}
	if !readsIt(func(l settings.Lookup) { _, _ = settings.LoadReconcile(l) }) {
		t.Error("the reconcile does not read SPECSYNC_REGISTRIES")
	}
	if !readsIt(func(l settings.Lookup) { _, _ = settings.LoadHooks(l) }) {
		t.Error("the hooks function does not read SPECSYNC_REGISTRIES (each registry's hook block)")
	}
	if readsIt(func(l settings.Lookup) { _, _ = settings.LoadCatalog(l) }) {
		t.Error("the catalog reads SPECSYNC_REGISTRIES, which it never opens")
	}
	b, err := settings.LoadBootstrap(env(with(bootstrapBase, "SPECSYNC_REGISTRIES", "/r.yaml")))
	if err != nil || b.RegistriesFile != "/r.yaml" {
		t.Errorf("bootstrap registries file %q, %v", b.RegistriesFile, err)
	}
	r, err := settings.LoadReconcile(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p"}))
	if err != nil || r.RegistriesFile != "registries.yaml" {
		t.Errorf("reconcile registries file %q (want the default), %v", r.RegistriesFile, err)
	}
}

// Printing settings never prints a credential.
func TestCredentialsDoNotPrint(t *testing.T) {
	t.Parallel()
	c, err := loadCatalog(catalogBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, c)
		if strings.Contains(out, brokerPassword) || strings.Contains(out, adminToken) {
			t.Errorf("%s prints a credential: %s", verb, out)
		}
		if !strings.Contains(out, "credential(value, redacted)") {
			t.Errorf("%s: the credentials are not shown as redacted: %s", verb, out)
		}
	}
}

// While a credential rotates, its _SHA256 holds the new digest and the
// retiring one.
func TestTwoDigestsWhileRotating(t *testing.T) {
	c, err := loadCatalog(with(catalogBase, "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_PASSWORD_SHA256", hexDigest("new-password")+", "+hexDigest("old-password")))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.BrokerPassword.SHA256) != 2 || hex.EncodeToString(c.BrokerPassword.SHA256[1]) != hexDigest("old-password") {
		t.Fatalf("digests %x", c.BrokerPassword.SHA256)
	}
}

// The webhooks' coalescing window: a default, a positive duration, and a
// bound, since a request that joins a window waits for it.
func TestHooksWindow(t *testing.T) {
	t.Parallel()
	base := map[string]string{"GOOGLE_CLOUD_PROJECT": "p"}
	h, err := settings.LoadHooks(env(base))
	if err != nil || h.Window != settings.DefaultHookWindow {
		t.Fatalf("default window %s, %v", h.Window, err)
	}
	if h, err = settings.LoadHooks(env(with(base, "SPECSYNC_HOOK_WINDOW", "250ms"))); err != nil || h.Window.Milliseconds() != 250 {
		t.Fatalf("250ms: %s, %v", h.Window, err)
	}
	for _, bad := range []string{"0s", "-1s", "soon", "31s"} {
		_, err := settings.LoadHooks(env(with(base, "SPECSYNC_HOOK_WINDOW", bad)))
		wantProblem(t, "SPECSYNC_HOOK_WINDOW="+bad, err, []string{"SPECSYNC_HOOK_WINDOW"})
	}
}

// keysRead is the set of variables a loader asks for.
func keysRead(load func(settings.Lookup)) []string {
	var keys []string
	load(func(k string) (string, bool) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		return "", false
	})
	slices.Sort(keys)
	return keys
}

// The hooks function is public and opens no Firestore: it reads its
// project, logs and traces, the registries file, the topic and the
// window, and nothing else (no Firestore database, no admin credential).
// The webhooks moved to it, so the bootstrap no longer reads the window.
func TestHooksReadOnlyWhatTheyUse(t *testing.T) {
	t.Parallel()
	got := keysRead(func(l settings.Lookup) { _, _ = settings.LoadHooks(l) })
	want := []string{"GOOGLE_CLOUD_PROJECT", "LOG_LEVEL", "SPECSYNC_HOOK_WINDOW", "SPECSYNC_REGISTRIES", "SPECSYNC_TOPIC", "SPECSYNC_TRACE", "SPECSYNC_TRACE_SAMPLE_RATIO"}
	if !slices.Equal(got, want) {
		t.Errorf("LoadHooks reads %v, want %v", got, want)
	}
	h, err := settings.LoadHooks(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "SPECSYNC_TOPIC": "t", "SPECSYNC_REGISTRIES": "gs://b/registries.json"}))
	if err != nil || h.Topic != "t" || h.RegistriesFile != "gs://b/registries.json" || h.Project != "p" {
		t.Errorf("hooks settings %+v, %v", h, err)
	}
	if h, err := settings.LoadHooks(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p"})); err != nil || h.Topic != settings.DefaultTopic {
		t.Errorf("default topic %q, %v", h.Topic, err)
	}
	_, err = settings.LoadHooks(env(map[string]string{}))
	wantProblem(t, "no project", err, []string{"hooks configuration", "GOOGLE_CLOUD_PROJECT is required"})
	if slices.Contains(keysRead(func(l settings.Lookup) { _, _ = settings.LoadBootstrap(l) }), "SPECSYNC_HOOK_WINDOW") {
		t.Error("the bootstrap reads SPECSYNC_HOOK_WINDOW; the webhooks are the hooks function's")
	}
}

// The event cooldown and clock skew default to a second each, take Go
// durations, and a bad value names its variable.
func TestEventSettings(t *testing.T) {
	t.Parallel()
	r, err := settings.LoadReconcile(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p"}))
	if err != nil || r.EventCooldown != time.Second || r.EventClockSkew != time.Second {
		t.Fatalf("defaults: cooldown %s, skew %s, %v", r.EventCooldown, r.EventClockSkew, err)
	}
	r, err = settings.LoadReconcile(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "SPECSYNC_EVENT_COOLDOWN": "2500ms", "SPECSYNC_EVENT_CLOCK_SKEW": "250ms"}))
	if err != nil || r.EventCooldown != 2500*time.Millisecond || r.EventClockSkew != 250*time.Millisecond {
		t.Fatalf("set: cooldown %s, skew %s, %v", r.EventCooldown, r.EventClockSkew, err)
	}
	_, err = settings.LoadReconcile(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "SPECSYNC_EVENT_COOLDOWN": "soon", "SPECSYNC_EVENT_CLOCK_SKEW": "-1s"}))
	if err == nil || !strings.Contains(err.Error(), "SPECSYNC_EVENT_COOLDOWN") || !strings.Contains(err.Error(), "SPECSYNC_EVENT_CLOCK_SKEW") {
		t.Fatalf("bad values: %v", err)
	}
}

// SPECSYNC_BROKER_VIEWS replaces the broker's one credential: each view's
// password is read from the variable it names, by the same three sources.
func TestCatalogBrokerViews(t *testing.T) {
	t.Parallel()
	views := with(catalogBase, "SPECSYNC_BROKER_USERNAME", "", "SPECSYNC_BROKER_PASSWORD", "", "SPECSYNC_BROKER_VIEWS", "/etc/specsync/views.yaml")
	c, err := loadCatalog(views)
	if err != nil || c.BrokerViews != "/etc/specsync/views.yaml" || c.BrokerUsername != "" {
		t.Fatalf("views alone: %+v %v", c, err)
	}
	_, err = loadCatalog(with(views, "SPECSYNC_BROKER_USERNAME", "platform"))
	wantProblem(t, "views and a username", err, []string{"set either SPECSYNC_BROKER_VIEWS or SPECSYNC_BROKER_USERNAME"})
	_, err = loadCatalog(with(views, "SPECSYNC_BROKER_PASSWORD", brokerPassword))
	wantProblem(t, "views and a password", err, []string{"set either SPECSYNC_BROKER_VIEWS"}, brokerPassword)
	_, err = loadCatalog(with(catalogBase, "SPECSYNC_BROKER_USERNAME", ""))
	wantProblem(t, "neither", err, []string{"SPECSYNC_BROKER_USERNAME is required (or SPECSYNC_BROKER_VIEWS)"})

	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"value":  {map[string]string{"V": "pw"}, ""},
		"sha256": {map[string]string{"V_SHA256": hexDigest("pw")}, ""},
		"file":   {map[string]string{"V_FILE": "/secrets/v/password"}, ""},
		"none":   {map[string]string{}, "one of V, V_SHA256, V_FILE is required"},
		"two":    {map[string]string{"V": "pw", "V_FILE": "/f"}, "set only one of V, V_FILE"},
	} {
		cred, err := settings.ReadCredential(env(c.env), "V")
		if c.want == "" && (err != nil || !cred.IsSet()) {
			t.Errorf("%s: %+v %v", name, cred, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// Tracing is off by default with a small sampling ratio; every function
// reads it; otlp without an endpoint is Google's Telemetry API, with one
// the traces' own endpoint and protocol win; a bad exporter, ratio or
// protocol names its variable.
func TestTracingSettings(t *testing.T) {
	t.Parallel()
	b, err := settings.LoadBootstrap(env(bootstrapBase))
	if err != nil || b.Tracing.Exporter != "off" || b.Tracing.SampleRatio != settings.DefaultTraceSampleRatio {
		t.Fatalf("defaults: %+v, %v", b.Tracing, err)
	}
	r, err := settings.LoadReconcile(env(map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "SPECSYNC_TRACE": "CloudTrace", "SPECSYNC_TRACE_SAMPLE_RATIO": "0.25"}))
	if err != nil || r.Tracing.Exporter != "cloudtrace" || r.Tracing.SampleRatio != 0.25 {
		t.Fatalf("set: %+v, %v", r.Tracing, err)
	}
	c, err := loadCatalog(with(catalogBase, "SPECSYNC_TRACE", "otlp"))
	if err != nil || c.Tracing != (settings.Tracing{Exporter: "otlp", SampleRatio: settings.DefaultTraceSampleRatio}) {
		t.Fatalf("otlp to Google: %+v, %v", c.Tracing, err)
	}
	c, err = loadCatalog(with(catalogBase, "SPECSYNC_TRACE", "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"))
	if err != nil || c.Tracing.OTLPEndpoint != "http://collector:4317" || c.Tracing.OTLPProtocol != "grpc" {
		t.Fatalf("otlp to a collector: %+v, %v", c.Tracing, err)
	}
	for _, bad := range []struct{ kv []string }{
		{[]string{"SPECSYNC_TRACE", "jaeger"}},
		{[]string{"SPECSYNC_TRACE_SAMPLE_RATIO", "2"}},
		{[]string{"SPECSYNC_TRACE_SAMPLE_RATIO", "some"}},
		{[]string{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "SPECSYNC_TRACE", "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}},
	} {
		_, err := loadCatalog(with(catalogBase, bad.kv...))
		wantProblem(t, strings.Join(bad.kv, "="), err, []string{bad.kv[0]})
	}
}
