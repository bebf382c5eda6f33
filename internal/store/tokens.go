package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// ErrTokenNotFound is returned when a token does not exist, is revoked or
// its secret is unknown.
var ErrTokenNotFound = &job.Error{Code: job.CodeNotFound, Message: "token not found"}

// CreateToken stores a new API token and returns it with its secret. The
// secret is not stored (only its SHA-256) and cannot be shown again.
func (s *Store) CreateToken(ctx context.Context, name string, role auth.Role, createdBy string) (auth.Token, string, error) {
	if err := ValidName("name", name); err != nil {
		return auth.Token{}, "", err
	}
	if err := validRole(role); err != nil {
		return auth.Token{}, "", err
	}
	secret, hash := auth.NewTokenSecret()
	row, err := s.q.TokenCreate(ctx, dbsqlc.TokenCreateParams{Name: name, TokenHash: hash, Role: role.String(), CreatedBy: createdBy})
	if err != nil {
		return auth.Token{}, "", fmt.Errorf("create token %q: %w", name, mapErr(err))
	}
	return auth.Token{ID: row.TokenID, Name: name, Role: role, CreatedBy: createdBy, CreatedAt: row.CreatedAt}, secret, nil
}

// TokenBySecret returns the unrevoked token whose secret is secret.
func (s *Store) TokenBySecret(ctx context.Context, secret string) (auth.Token, error) {
	row, err := s.q.TokenGetByHash(ctx, auth.HashToken(secret))
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.Token{}, ErrTokenNotFound
		}
		return auth.Token{}, fmt.Errorf("look up token: %w", mapErr(err))
	}
	return tokenOf(row), nil
}

// TouchToken records that a token was used. The statement writes at most
// once a minute per token.
func (s *Store) TouchToken(ctx context.Context, id int64) error {
	if err := s.q.TokenTouch(ctx, id); err != nil {
		return fmt.Errorf("touch token %d: %w", id, mapErr(err))
	}
	return nil
}

// Tokens lists every token, active ones first, newest first.
func (s *Store) Tokens(ctx context.Context) ([]auth.Token, error) {
	rows, err := s.q.TokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapErr(err))
	}
	out := make([]auth.Token, len(rows))
	for i, r := range rows {
		out[i] = tokenOf(r)
	}
	return out, nil
}

// RevokeToken revokes a token at once. Revoking a revoked or unknown token
// is ErrTokenNotFound.
func (s *Store) RevokeToken(ctx context.Context, id int64) error {
	n, err := s.q.TokenRevoke(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke token %d: %w", id, mapErr(err))
	}
	if n == 0 {
		return ErrTokenNotFound
	}
	return nil
}

func tokenOf(r dbsqlc.DlApiToken) auth.Token {
	role, err := auth.ParseRole(r.Role)
	if err != nil {
		role = auth.RoleNone // unreachable: the column has a CHECK constraint
	}
	return auth.Token{ID: r.TokenID, Name: r.Name, Role: role, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}
}
