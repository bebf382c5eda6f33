package auth_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func run(t *testing.T, st *store.Store, stdin string, password string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = auth.Command(context.Background(), st, args, auth.CommandIO{Stdin: strings.NewReader(stdin), Stdout: &out,
		Stderr: &errb, Password: password})
	return out.String(), errb.String(), err
}

func TestUserCommandAddsAndListsUsers(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.Pool(t))
	if _, _, err := run(t, st, "stdin-password\n", "", "user", "add", "alice", "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, st, "", "env-password", "user", "add", "--role=operator", "bob"); err != nil {
		t.Fatal(err)
	}
	if !signIn(t, st, "alice", "stdin-password") || !signIn(t, st, "bob", "env-password") {
		t.Error("want alice's password from stdin and bob's from DL_ADMIN_PASSWORD")
	}
	out, _, err := run(t, st, "", "", "user", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !regexpMatch(`alice\s+admin\s+active`, out) || !regexpMatch(`bob\s+operator\s+active`, out) {
		t.Errorf("user list:\n%s\nwant alice (admin) and bob (operator)", out)
	}
	if _, _, err := run(t, st, "short\n", "", "user", "add", "carol"); err == nil {
		t.Error("a 5-character password: want refused")
	}
	if _, _, err := run(t, st, "another-password\n", "", "user", "add", "alice"); err == nil {
		t.Error("adding alice twice: want a conflict")
	}
	for _, args := range [][]string{{"user"}, {"user", "add"}, {"user", "add", "x", "--role"}, {"user", "remove", "x"},
		{"user", "add", "x", "--admin"}, {"token", "add"}} {
		if _, _, err := run(t, st, "long-enough\n", "", args...); !errors.Is(err, auth.ErrUsage) {
			t.Errorf("%v: got %v, want the usage", args, err)
		}
	}
}

func TestTokenCommandPrintsTheSecretOnceAndRevokes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	out, msg, err := run(t, st, "", "", "token", "add", "etl-prod", "--role", "operator")
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(out)
	if !auth.WellFormedToken(secret) || !strings.Contains(msg, "shown only this once") {
		t.Fatalf("stdout %q stderr %q: want the secret alone on stdout and a note on stderr", out, msg)
	}
	tok, err := st.TokenBySecret(ctx, secret)
	if err != nil || tok.Role != auth.RoleOperator || tok.CreatedBy != "cli" {
		t.Fatalf("token by secret: %+v, %v", tok, err)
	}
	list, _, _ := run(t, st, "", "", "token", "list")
	if strings.Contains(list, secret) || !regexpMatch(`etl-prod\s+operator\s+active\s+cli\s+never`, list) {
		t.Errorf("token list:\n%s\nwant the token without its secret", list)
	}
	if _, _, err := run(t, st, "", "", "token", "revoke", "x"); err == nil {
		t.Error("revoke x: want an error")
	}
	if _, _, err := run(t, st, "", "", "token", "revoke", itoa(tok.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TokenBySecret(ctx, secret); !errors.Is(err, store.ErrTokenNotFound) {
		t.Errorf("revoked token: got %v, want not found", err)
	}
}
