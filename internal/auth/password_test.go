package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dataloader/dataloader/internal/auth"
)

func TestHashPasswordRoundTrips(t *testing.T) {
	t.Parallel()
	h, err := auth.HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q: want a PHC argon2id string with the default parameters", h)
	}
	if err := auth.VerifyPassword(h, "correct horse battery staple"); err != nil {
		t.Errorf("right password: got %v, want nil", err)
	}
	for _, wrong := range []string{"", "correct horse battery stapl", "Correct horse battery staple", strings.Repeat("x", 2000)} {
		if err := auth.VerifyPassword(h, wrong); !errors.Is(err, auth.ErrMismatch) {
			t.Errorf("wrong password %.20q: got %v, want ErrMismatch", wrong, err)
		}
	}
}

func TestHashPasswordSaltsEachHash(t *testing.T) {
	t.Parallel()
	a, _ := auth.HashPassword("same")
	b, _ := auth.HashPassword("same")
	if a == b {
		t.Errorf("two hashes of one password are equal (%q), want distinct salts", a)
	}
}

func TestVerifyPasswordAcceptsOtherParametersAndRejectsMalformedHashes(t *testing.T) {
	t.Parallel()
	// The parameters travel with the hash, so changing the defaults keeps
	// old hashes verifiable: a hash string with other parameters is
	// checked with those (here: a mismatch, since the key was derived with
	// the defaults).
	h, err := auth.HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(h, "$")
	for _, bad := range []string{
		"", "plain", "$argon2i$v=19$m=19456,t=2,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=18$m=19456,t=2,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=99999999,t=2,p=1$" + parts[4] + "$" + parts[5], // would exhaust memory
		"$argon2id$v=19$m=19456,t=2,p=1$!!$" + parts[5],
		"$argon2id$v=19$m=19456,t=2,p=1$" + parts[4] + "$",
	} {
		err := auth.VerifyPassword(bad, "pw")
		if err == nil || errors.Is(err, auth.ErrMismatch) {
			t.Errorf("VerifyPassword(%q): got %v, want a malformed-hash error", bad, err)
		}
	}
	cheap := "$argon2id$v=19$m=1024,t=1,p=1$" + parts[4] + "$" + parts[5]
	if err := auth.VerifyPassword(cheap, "pw"); !errors.Is(err, auth.ErrMismatch) {
		t.Errorf("other parameters: got %v, want them applied (so a mismatch here)", err)
	}
}

func TestVerifyDummyAlwaysFails(t *testing.T) {
	t.Parallel()
	if err := auth.VerifyDummy("dataloader-dummy-password"); !errors.Is(err, auth.ErrMismatch) {
		t.Errorf("got %v, want ErrMismatch even for the dummy's own password", err)
	}
}

func TestTokenSecretsAreRandomAndHashed(t *testing.T) {
	t.Parallel()
	a, ha := auth.NewTokenSecret()
	b, _ := auth.NewTokenSecret()
	if a == b || !auth.WellFormedToken(a) || !strings.HasPrefix(a, "dl_") || len(a) != 46 {
		t.Errorf("secrets %q, %q: want two distinct well-formed dl_ secrets of 46 characters", a, b)
	}
	if string(ha) != string(auth.HashToken(a)) || len(ha) != 32 {
		t.Errorf("hash of %q: want its SHA-256", a)
	}
	for _, bad := range []string{"", "dl_", "xx_" + a[3:], a + "x", a[:45] + "!"} {
		if auth.WellFormedToken(bad) {
			t.Errorf("WellFormedToken(%q) = true, want false", bad)
		}
	}
}

func TestParseRoleAndCan(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"viewer", "operator", "admin"} {
		r, err := auth.ParseRole(name)
		if err != nil || r.String() != name {
			t.Errorf("ParseRole(%q) = %v, %v", name, r, err)
		}
	}
	if _, err := auth.ParseRole("none"); err == nil {
		t.Error("ParseRole(none): want an error")
	}
	op := auth.Principal{Kind: "token", Name: "etl", Role: auth.RoleOperator}
	if !op.Can(auth.RoleViewer) || !op.Can(auth.RoleOperator) || op.Can(auth.RoleAdmin) {
		t.Errorf("operator rights wrong: %+v", op)
	}
	if got := op.Actor(); got != "token:etl" {
		t.Errorf("Actor() = %q, want token:etl", got)
	}
}
