package registry

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Auth says where a registry's credentials come from. It holds only the
// names of environment variables and files, never a secret: the secret is
// read when a fetch needs it, so it lives in the reconcile function's
// memory for the length of one fetch and in no configuration, document or
// message.
//
// Types:
//   - "anonymous" (or empty): no credentials.
//   - "basic": a user name (Username, or UsernameEnv) and a password
//     (PasswordEnv or PasswordFile). Against an OCI registry that
//     challenges for Bearer tokens, go-containerregistry trades them for a
//     token at the registry's realm; otherwise they are sent as HTTP Basic.
//   - "token": a bearer token used as it is (go-containerregistry's
//     AuthConfig.RegistryToken; for HTTP sources an "Authorization: Bearer"
//     header), with no exchange at any token endpoint. A Google access
//     token for Artifact Registry is one (or use basic with user
//     "oauth2accesstoken" and the token as password). The token is read at
//     every fetch, so a file that a sidecar or Secret Manager mount
//     refreshes keeps working.
//   - "google": an access token of the process's Application Default
//     Credentials (google.go), for Google's registries and Cloud Storage
//     only. It takes no other field: there is no secret to configure.
type Auth struct {
	Type         string `json:"type,omitempty"`
	Username     string `json:"username,omitempty"`
	UsernameEnv  string `json:"username_env,omitempty"`
	PasswordEnv  string `json:"password_env,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	TokenEnv     string `json:"token_env,omitempty"`
	TokenFile    string `json:"token_file,omitempty"`
}

// Auth types.
const (
	AuthAnonymous = "anonymous"
	AuthBasic     = "basic"
	AuthToken     = "token"
	// AuthGoogle is in google.go.
)

func (a Auth) kind() string {
	if a.Type == "" {
		return AuthAnonymous
	}
	return a.Type
}

// Validate checks the configuration without reading any secret: a known
// type, exactly one source for each secret it needs, and no field that the
// type would ignore (an ignored field is a misconfiguration that would
// otherwise surface only as a 401 at fetch time).
func (a Auth) Validate() error {
	set := func(pairs ...string) []string {
		var out []string
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i+1] != "" {
				out = append(out, pairs[i])
			}
		}
		return out
	}
	user := set("username", a.Username, "username_env", a.UsernameEnv)
	pass := set("password_env", a.PasswordEnv, "password_file", a.PasswordFile)
	tok := set("token_env", a.TokenEnv, "token_file", a.TokenFile)
	var probs problems
	exactlyOne := func(what string, got []string, choices string) {
		switch len(got) {
		case 0:
			probs.add(fmt.Errorf("auth type %s needs %s (one of %s)", a.kind(), what, choices))
		case 1:
		default:
			probs.add(fmt.Errorf("auth type %s: set only one of %s", a.kind(), strings.Join(got, ", ")))
		}
	}
	unused := func(fields []string) {
		if len(fields) > 0 {
			probs.add(fmt.Errorf("auth type %s does not use %s", a.kind(), strings.Join(fields, ", ")))
		}
	}
	switch a.kind() {
	case AuthAnonymous, AuthGoogle:
		unused(append(append(user, pass...), tok...))
	case AuthBasic:
		exactlyOne("a user name", user, "username, username_env")
		exactlyOne("a password", pass, "password_env, password_file")
		unused(tok)
	case AuthToken:
		exactlyOne("a token", tok, "token_env, token_file")
		unused(append(user, pass...))
	default:
		probs.add(fmt.Errorf("auth type %q is not one of anonymous, basic, token, google", a.Type))
	}
	return probs.err()
}

// validate is Validate's problems, each an error of block's auth field
// ("oci.auth: auth type basic needs a password ...").
func (a Auth) validate(block string) error {
	var probs problems
	for _, err := range joined(a.Validate()) {
		probs.add(&fieldError{block: block, err: fmt.Errorf("auth: %w", err)})
	}
	return probs.err()
}

// Authenticator reads the credentials now and returns them for
// go-containerregistry. A missing or empty variable or file is an error
// naming the variable or file, never its content.
func (a Auth) Authenticator() (authn.Authenticator, error) {
	cfg, err := a.resolve()
	if err != nil {
		return nil, err
	}
	if cfg == (authn.AuthConfig{}) {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(cfg), nil
}

// resolve reads the secrets. The zero AuthConfig means anonymous.
func (a Auth) resolve() (authn.AuthConfig, error) {
	if err := a.Validate(); err != nil {
		return authn.AuthConfig{}, err
	}
	switch a.kind() {
	case AuthBasic:
		user := a.Username
		if a.UsernameEnv != "" {
			var err error
			if user, err = readEnv(a.UsernameEnv, "user name"); err != nil {
				return authn.AuthConfig{}, err
			}
		}
		pass, err := readSecret(a.PasswordEnv, a.PasswordFile, "password")
		if err != nil {
			return authn.AuthConfig{}, err
		}
		return authn.AuthConfig{Username: user, Password: pass}, nil
	case AuthToken:
		tok, err := readSecret(a.TokenEnv, a.TokenFile, "token")
		if err != nil {
			return authn.AuthConfig{}, err
		}
		return authn.AuthConfig{RegistryToken: tok}, nil
	case AuthGoogle:
		// Its token is the source's to ask for (google.go); reading it
		// as anonymous here would send requests without credentials.
		return authn.AuthConfig{}, errors.New("auth type google: the access token comes from the source at fetch time, not from the configuration")
	}
	return authn.AuthConfig{}, nil
}

// authorization is the Authorization header value for a plain HTTP
// source, "" for anonymous, plus the secrets to keep out of errors.
func (a Auth) authorization() (header string, secrets []string, err error) {
	cfg, err := a.resolve()
	if err != nil {
		return "", nil, err
	}
	switch {
	case cfg.RegistryToken != "":
		return "Bearer " + cfg.RegistryToken, []string{cfg.RegistryToken}, nil
	case cfg.Password != "":
		enc := base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
		return "Basic " + enc, []string{cfg.Password, enc}, nil
	}
	return "", nil, nil
}

func readSecret(env, file, what string) (string, error) {
	if env != "" {
		return readEnv(env, what)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		// The path error names the file and the reason, not the content.
		return "", fmt.Errorf("reading %s file: %w", what, err)
	}
	// Files written by hand or by `echo` end in a newline that is not part
	// of the secret; Secret Manager mounts may or may not have one.
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s file %s is empty", what, file)
	}
	return v, nil
}

func readEnv(name, what string) (string, error) {
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return "", fmt.Errorf("environment variable %s (%s) is not set", name, what)
	case v == "":
		return "", fmt.Errorf("environment variable %s (%s) is empty", name, what)
	}
	return v, nil
}

// String describes where the credentials come from. Auth holds no secret,
// but printing one through %v should stay safe if it ever does.
func (a Auth) String() string {
	switch a.kind() {
	case AuthBasic:
		var b strings.Builder
		b.WriteString("basic(")
		if a.UsernameEnv != "" {
			b.WriteString("username from env " + a.UsernameEnv)
		} else {
			b.WriteString("username " + a.Username)
		}
		if a.PasswordEnv != "" {
			b.WriteString(", password from env " + a.PasswordEnv)
		} else if a.PasswordFile != "" {
			b.WriteString(", password from file " + a.PasswordFile)
		}
		b.WriteString(")")
		return b.String()
	case AuthToken:
		if a.TokenEnv != "" {
			return "token(from env " + a.TokenEnv + ")"
		}
		return "token(from file " + a.TokenFile + ")"
	case AuthAnonymous:
		return AuthAnonymous
	case AuthGoogle:
		return "google(application default credentials)"
	default:
		return fmt.Sprintf("unknown(%q)", a.Type)
	}
}

// GoString keeps %#v as safe as %v.
func (a Auth) GoString() string { return "registry.Auth{" + a.String() + "}" }

// LogValue keeps slog as safe as fmt.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// secretsOf is every form of cfg's credential a request carries, to keep
// out of errors: the password and token as they are, and the Basic
// encoding of the user and password (a registry that refuses a request
// may echo its Authorization header in the error it answers).
func secretsOf(cfg authn.AuthConfig) []string {
	out := []string{cfg.Password, cfg.RegistryToken, cfg.Auth}
	if cfg.Password != "" {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password)))
	}
	return out
}

// redact removes any secret that made its way into an error's text (a
// registry echoing a request, a library quoting a header). The wrapped
// chain is dropped with it: unwrapping must not bring the secret back.
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[REDACTED]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}
