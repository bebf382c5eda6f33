package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"

	"github.com/dataloader/dataloader/internal/job"
)

// Accounts is the user storage the start-up bootstrap needs;
// *store.Store implements it.
type Accounts interface {
	CountUsers(ctx context.Context) (int64, error)
	CreateUser(ctx context.Context, name, passwordHash string, role Role) error
	UpsertUser(ctx context.Context, name, passwordHash string, role Role) (created bool, err error)
}

// DefaultAdmin is the name of the admin created when the database has no
// user and none is configured.
const DefaultAdmin = "admin"

// Bootstrap makes sure someone can sign in, at every start:
//
//   - With adminUser and adminPassword (DL_ADMIN_USER, DL_ADMIN_PASSWORD),
//     that user is created, or its password reset and its role set to
//     admin, so an operator who lost access regains it by restarting.
//   - Otherwise, when there is no user at all, an "admin" with a generated
//     password is created and the credentials are written once to banner
//     (stderr), never to the log.
//
// With several replicas starting on an empty database, one creates the
// admin and the others see the name taken (a job.CodeConflict error) and
// carry on.
func Bootstrap(ctx context.Context, a Accounts, adminUser, adminPassword string, banner io.Writer, log *slog.Logger) error {
	if adminUser != "" {
		hash, err := HashPassword(adminPassword)
		if err != nil {
			return fmt.Errorf("DL_ADMIN_PASSWORD: %w", err)
		}
		created, err := a.UpsertUser(ctx, adminUser, hash, RoleAdmin)
		if err != nil {
			return fmt.Errorf("DL_ADMIN_USER: %w", err)
		}
		if created {
			log.Info("admin user created from DL_ADMIN_USER", "user", adminUser)
		} else {
			log.Info("admin user from DL_ADMIN_USER updated: password reset, role admin, enabled", "user", adminUser)
		}
		return nil
	}
	if adminPassword != "" {
		log.Warn("DL_ADMIN_PASSWORD is set without DL_ADMIN_USER; no admin is created from it")
	}
	n, err := a.CountUsers(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	pw := GeneratePassword()
	hash, err := HashPassword(pw)
	if err != nil {
		return err
	}
	if err := a.CreateUser(ctx, DefaultAdmin, hash, RoleAdmin); err != nil {
		if job.ErrorCode(err) == job.CodeConflict {
			return nil // another replica created it first
		}
		return fmt.Errorf("create the first admin: %w", err)
	}
	fmt.Fprintf(banner, `
================================================================
  dataloader: no user existed, so an admin was created.

      user:      %s
      password:  %s

  Sign in at /login, then add users (and change this password)
  under Users. This password is shown only this once.
  To choose the admin yourself, set DL_ADMIN_USER and
  DL_ADMIN_PASSWORD, or run: web user add NAME --role admin
================================================================

`, DefaultAdmin, pw)
	log.Warn("created the first admin user with a generated password, printed once to stderr (not logged)",
		"user", DefaultAdmin)
	return nil
}

// GeneratePassword returns a random password of 24 URL-safe characters
// (144 bits).
func GeneratePassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
