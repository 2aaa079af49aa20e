package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/specsync/specsync/pkg/registry"
)

func TestAuthValidate(t *testing.T) {
	t.Parallel()
	valid := []registry.Auth{
		{},
		{Type: "anonymous"},
		{Type: "basic", Username: "u", PasswordEnv: "P"},
		{Type: "basic", UsernameEnv: "U", PasswordFile: "/secrets/p"},
		{Type: "token", TokenEnv: "T"},
		{Type: "token", TokenFile: "/secrets/t"},
	}
	for _, a := range valid {
		if err := a.Validate(); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	invalid := map[string]registry.Auth{
		"unknown type":              {Type: "oauth"},
		"anonymous with a password": {PasswordEnv: "P"},
		"anonymous with a token":    {Type: "anonymous", TokenFile: "/t"},
		"basic without user":        {Type: "basic", PasswordEnv: "P"},
		"basic with two users":      {Type: "basic", Username: "u", UsernameEnv: "U", PasswordEnv: "P"},
		"basic without password":    {Type: "basic", Username: "u"},
		"basic with two passwords":  {Type: "basic", Username: "u", PasswordEnv: "P", PasswordFile: "/p"},
		"basic with a token":        {Type: "basic", Username: "u", PasswordEnv: "P", TokenEnv: "T"},
		"token without source":      {Type: "token"},
		"token with two sources":    {Type: "token", TokenEnv: "T", TokenFile: "/t"},
		"token with a user":         {Type: "token", TokenEnv: "T", Username: "u"},
	}
	for what, a := range invalid {
		if err := a.Validate(); err == nil {
			t.Errorf("%s: %v validated", what, a)
		}
		if _, err := a.Authenticator(); err == nil {
			t.Errorf("%s: Authenticator succeeded", what)
		}
	}
}

func TestAuthAuthenticatorReadsSecretsLate(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	a := registry.Auth{Type: "basic", UsernameEnv: "SPECSYNC_AUTH_USER", PasswordFile: pw}

	_, err := a.Authenticator()
	if err == nil || !strings.Contains(err.Error(), "SPECSYNC_AUTH_USER") {
		t.Errorf("unset user variable: %v", err)
	}
	t.Setenv("SPECSYNC_AUTH_USER", "")
	if _, err := a.Authenticator(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty user variable: %v", err)
	}
	t.Setenv("SPECSYNC_AUTH_USER", "carol")
	if _, err := a.Authenticator(); err == nil || !strings.Contains(err.Error(), pw) {
		t.Errorf("missing password file: %v", err)
	}
	if err := writeFile(pw, "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticator(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty password file: %v", err)
	}
	// A rotated secret is picked up at the next call.
	for _, secret := range []string{"first-pw", "second-pw"} {
		if err := writeFile(pw, secret+"\r\n"); err != nil {
			t.Fatal(err)
		}
		au, err := a.Authenticator()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := authn.Authorization(context.Background(), au)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != "carol" || cfg.Password != secret {
			t.Errorf("got %s / %s, want carol / %s", cfg.Username, cfg.Password, secret)
		}
	}

	t.Setenv("SPECSYNC_AUTH_TOKEN", "tok-value")
	au, err := registry.Auth{Type: "token", TokenEnv: "SPECSYNC_AUTH_TOKEN"}.Authenticator()
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := authn.Authorization(context.Background(), au); cfg.RegistryToken != "tok-value" || cfg.Password != "" {
		t.Errorf("token auth config %+v", cfg)
	}
	if au, err := (registry.Auth{}).Authenticator(); err != nil || au != authn.Anonymous {
		t.Errorf("anonymous: %v %v", au, err)
	}
}

func TestAuthPrintsNoSecret(t *testing.T) {
	t.Setenv("SPECSYNC_PRINT_PW", "hunter2-value")
	a := registry.Auth{Type: "basic", Username: "dave", PasswordEnv: "SPECSYNC_PRINT_PW"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("registry", "auth", a)
	js, _ := json.Marshal(a)
	for _, out := range []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), logged.String(), string(js)} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("printed a secret: %s", out)
		}
		if !strings.Contains(out, "SPECSYNC_PRINT_PW") {
			t.Errorf("%s does not say where the password comes from", out)
		}
	}
}
