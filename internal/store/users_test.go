package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func TestConcurrentDemotionsLeaveOneAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	var ids []int64
	for _, name := range []string{"a", "b"} {
		id, err := st.CreateUserID(ctx, name, "x", auth.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = st.SetUserDisabled(ctx, id, true) })
	}
	wg.Wait()
	var ok, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrLastAdmin):
			refused++
		default:
			t.Errorf("disable: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("got %d disabled and %d refused, want exactly one of each", ok, refused)
	}
}

func TestUsersAndTokensValidateAndMapErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	if err := st.CreateUser(ctx, "alice", "h", auth.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateUser(ctx, "alice", "h", auth.RoleViewer); job.ErrorCode(err) != job.CodeConflict {
		t.Errorf("duplicate name: got %v, want a conflict", err)
	}
	for _, name := range []string{"", " alice", "a\x00b", "tab\tname", string(make([]byte, 65))} {
		if err := st.CreateUser(ctx, name, "h", auth.RoleViewer); job.ErrorCode(err) != job.CodeInvalid {
			t.Errorf("name %q: got %v, want invalid", name, err)
		}
	}
	if err := st.CreateUser(ctx, "bob", "h", auth.RoleNone); job.ErrorCode(err) != job.CodeInvalid {
		t.Errorf("role none: got %v, want invalid", err)
	}
	if _, err := st.User(ctx, 424242); !errors.Is(err, store.ErrUserNotFound) {
		t.Errorf("unknown user: got %v, want ErrUserNotFound", err)
	}
	tok, secret, err := st.CreateToken(ctx, "etl", auth.RoleOperator, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.TokenBySecret(ctx, secret)
	if err != nil || got.ID != tok.ID || got.Role != auth.RoleOperator || got.LastUsedAt != nil {
		t.Fatalf("token by secret: %+v, %v", got, err)
	}
	if err := st.TouchToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ = st.TokenBySecret(ctx, secret); got.LastUsedAt == nil {
		t.Error("last_used_at not recorded")
	}
	if err := st.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TokenBySecret(ctx, secret); !errors.Is(err, store.ErrTokenNotFound) {
		t.Errorf("revoked token: got %v, want ErrTokenNotFound", err)
	}
	if err := st.RevokeToken(ctx, tok.ID); !errors.Is(err, store.ErrTokenNotFound) {
		t.Errorf("revoking twice: got %v, want ErrTokenNotFound", err)
	}
}
