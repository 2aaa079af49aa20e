package main

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator/stack"
)

// The banner's export line prints a credential only when the stack set
// it (the laptop defaults); one the user gave is named by where it came
// from, never printed: the banner lands in every captured log.
func TestExportLinePrintsOnlyTheStacksOwnCredentials(t *testing.T) {
	const token, pass = "users-admin-token-c4n4ry", "users-broker-p4ss-c4n4ry"
	cases := []struct {
		name string
		env  map[string]string
		// what the stack holds after Start
		admin, user, brokerPass string
		want, never             []string
	}{
		{name: "the laptop defaults", env: nil,
			admin: stack.DefaultAdminToken, user: stack.DefaultBrokerUser, brokerPass: stack.DefaultBrokerPass,
			want: []string{"SPECSYNC_ADMIN_TOKEN=" + stack.DefaultAdminToken, "SPECSYNC_BROKER_USERNAME=" + stack.DefaultBrokerUser, "SPECSYNC_BROKER_PASSWORD=" + stack.DefaultBrokerPass}},
		{name: "the user's token and password", env: map[string]string{"SPECSYNC_ADMIN_TOKEN": token, "SPECSYNC_BROKER_PASSWORD": pass},
			admin: token, user: "platform", brokerPass: pass,
			want:  []string{"SPECSYNC_BROKER_USERNAME=platform", "SPECSYNC_ADMIN_TOKEN: yours, as you set it", "SPECSYNC_BROKER_PASSWORD: yours, as you set it"},
			never: []string{token, pass, "SPECSYNC_ADMIN_TOKEN=", "SPECSYNC_BROKER_PASSWORD="}},
		{name: "the user's token in a file", env: map[string]string{"SPECSYNC_ADMIN_TOKEN_FILE": "/run/token"},
			admin: "", user: stack.DefaultBrokerUser, brokerPass: stack.DefaultBrokerPass,
			want:  []string{"the token in the file SPECSYNC_ADMIN_TOKEN_FILE names", "SPECSYNC_BROKER_PASSWORD=" + stack.DefaultBrokerPass},
			never: []string{"SPECSYNC_ADMIN_TOKEN="}},
		{name: "hashes", env: map[string]string{"SPECSYNC_ADMIN_TOKEN_SHA256": "ab", "SPECSYNC_BROKER_PASSWORD_SHA256": "cd"},
			user:  stack.DefaultBrokerUser,
			want:  []string{"the token whose hash SPECSYNC_ADMIN_TOKEN_SHA256 holds", "the password whose hash SPECSYNC_BROKER_PASSWORD_SHA256 holds"},
			never: []string{"SPECSYNC_ADMIN_TOKEN=", "SPECSYNC_BROKER_PASSWORD="}},
		{name: "views", env: map[string]string{"SPECSYNC_BROKER_VIEWS": `{"views":[]}`},
			admin: stack.DefaultAdminToken,
			want:  []string{"SPECSYNC_ADMIN_TOKEN=" + stack.DefaultAdminToken, "SPECSYNC_BROKER_USERNAME and SPECSYNC_BROKER_PASSWORD: those of a view of SPECSYNC_BROKER_VIEWS"},
			never: []string{"SPECSYNC_BROKER_PASSWORD=", "SPECSYNC_BROKER_USERNAME=", "SHA256"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			given := givenCredentials(func(k string) string { return tc.env[k] })
			line := exportLine(&stack.Stack{URL: "http://127.0.0.1:8080", AdminToken: tc.admin, BrokerUser: tc.user, BrokerPass: tc.brokerPass}, given)
			if !strings.HasPrefix(line, "export SPECSYNC_URL=http://127.0.0.1:8080") {
				t.Errorf("export line %q does not point at the stack", line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("export line %q lacks %q", line, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(line, n) {
					t.Errorf("export line %q holds %q", line, n)
				}
			}
		})
	}
}
