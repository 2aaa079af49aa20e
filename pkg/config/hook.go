package config

import (
	"errors"
	"fmt"
	"regexp"
)

// Hook configures a registry's webhook: POST /hooks/NAME on the bootstrap
// function, where the registry (a distribution registry's notification
// endpoint, Harbor, GitHub) says what changed so that it is reconciled in
// about a second instead of at the next scheduled bootstrap. A registry
// without a hook block has no webhook.
//
// Like registry credentials, the secret is only named here: the
// environment variable or file that holds it is read when a request is
// checked, never at load time, so it is in no configuration, document,
// message or log.
type Hook struct {
	// Type is how a request proves it comes from the registry:
	//   - "bearer": an Authorization: Bearer SECRET header, what a
	//     distribution registry's notification endpoint sends from its
	//     configured headers and what Harbor sends as its auth header;
	//   - "hmac": an X-Hub-Signature-256: sha256=HEX header, the
	//     HMAC-SHA256 of the raw body keyed with the secret (GitHub's
	//     webhook signature);
	//   - "basic": an Authorization: Basic header whose password is the
	//     secret, any user name: what Quay sends from the user
	//     information of a webhook URL (it sends no header of its own).
	//   - "gitlab_token": an X-Gitlab-Token header equal to the secret
	//     (GitLab's secret token).
	Type string `json:"type"`
	// SecretEnv and SecretFile say where the secret is: an environment
	// variable of the bootstrap function, or a file (a Secret Manager
	// volume, re-read every 30 s so a rotated version is picked up).
	// Exactly one is set.
	SecretEnv  string `json:"secret_env,omitempty"`
	SecretFile string `json:"secret_file,omitempty"`
}

// Hook types.
const (
	HookBearer = "bearer"
	HookHMAC   = "hmac"
	HookBasic  = "basic"
	// HookGitLabToken is GitLab's secret token header.
	HookGitLabToken = "gitlab_token"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks a hook block without reading its secret. The messages
// name the fields as the registries file writes them (hook.type,
// hook.secret_env), so `config check` reports them at their lines.
func (h Hook) Validate() error {
	switch h.Type {
	case HookBearer, HookHMAC, HookBasic, HookGitLabToken:
	case "":
		return errors.New("hook.type is required (bearer, hmac, basic or gitlab_token)")
	default:
		return fmt.Errorf("hook.type %q is not one of bearer, hmac, basic, gitlab_token", h.Type)
	}
	switch {
	case h.SecretEnv == "" && h.SecretFile == "":
		return errors.New("hook.secret_env or hook.secret_file is required: the hook needs a secret")
	case h.SecretEnv != "" && h.SecretFile != "":
		return errors.New("hook.secret_env and hook.secret_file: set only one")
	case h.SecretEnv != "" && !envName.MatchString(h.SecretEnv):
		return fmt.Errorf("hook.secret_env %q is not an environment variable name", h.SecretEnv)
	}
	return nil
}

// String says how the hook authenticates and where its secret is, never
// what it is.
func (h Hook) String() string {
	if h.SecretEnv != "" {
		return h.Type + "(secret from env " + h.SecretEnv + ")"
	}
	return h.Type + "(secret from file " + h.SecretFile + ")"
}
