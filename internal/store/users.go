package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// MaxUserNameLen bounds user and token names.
const MaxUserNameLen = 64

// ErrUserNotFound is returned when a user does not exist.
var ErrUserNotFound = &job.Error{Code: job.CodeNotFound, Message: "user not found"}

// ErrLastAdmin refuses to demote or disable the last enabled admin, which
// would lock everyone out of user management.
var ErrLastAdmin = &job.Error{Code: job.CodeConflict, Message: "the last enabled admin cannot be demoted or disabled"}

// ValidName checks a user or token name: 1–64 printable characters, no
// leading or trailing space.
func ValidName(field, name string) error {
	if name == "" {
		return job.Invalid(field, "is required")
	}
	if err := job.ValidText(field, name, MaxUserNameLen); err != nil {
		return err
	}
	if strings.TrimSpace(name) != name {
		return job.Invalid(field, "must not start or end with white space")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return job.Invalid(field, "must hold printable characters only")
		}
	}
	return nil
}

func validRole(r auth.Role) error {
	if r < auth.RoleViewer || r > auth.RoleAdmin {
		return job.Invalid("role", "must be viewer, operator or admin")
	}
	return nil
}

// CreateUser adds a dashboard user with an already hashed password (see
// auth.HashPassword). A taken name is a conflict.
func (s *Store) CreateUser(ctx context.Context, name, passwordHash string, role auth.Role) error {
	_, err := s.CreateUserID(ctx, name, passwordHash, role)
	return err
}

// CreateUserID is CreateUser returning the new user's id.
func (s *Store) CreateUserID(ctx context.Context, name, passwordHash string, role auth.Role) (int64, error) {
	if err := ValidName("name", name); err != nil {
		return 0, err
	}
	if err := validRole(role); err != nil {
		return 0, err
	}
	id, err := s.q.UserCreate(ctx, dbsqlc.UserCreateParams{Name: name, PasswordHash: passwordHash, Role: role.String()})
	if err != nil {
		if job.ErrorCode(mapErr(err)) == job.CodeConflict {
			return 0, &job.Error{Code: job.CodeConflict, Field: "name", Message: fmt.Sprintf("user %q already exists", name)}
		}
		return 0, fmt.Errorf("create user %q: %w", name, mapErr(err))
	}
	return id, nil
}

// UpsertUser creates a user or, when the name exists, sets its password and
// role and enables it. It reports whether the user was created.
func (s *Store) UpsertUser(ctx context.Context, name, passwordHash string, role auth.Role) (created bool, err error) {
	if err := ValidName("name", name); err != nil {
		return false, err
	}
	if err := validRole(role); err != nil {
		return false, err
	}
	row, err := s.q.UserUpsert(ctx, dbsqlc.UserUpsertParams{Name: name, PasswordHash: passwordHash, Role: role.String()})
	if err != nil {
		return false, fmt.Errorf("upsert user %q: %w", name, mapErr(err))
	}
	return row.Created, nil
}

// User returns a user by id.
func (s *Store) User(ctx context.Context, id int64) (auth.User, error) {
	row, err := s.q.UserGet(ctx, id)
	if err != nil {
		return auth.User{}, userErr(err, "get user %d", id)
	}
	return userOf(row), nil
}

// UserCredentials returns a user by name with its password hash, for
// sign-in.
func (s *Store) UserCredentials(ctx context.Context, name string) (auth.User, string, error) {
	row, err := s.q.UserGetByName(ctx, name)
	if err != nil {
		return auth.User{}, "", userErr(err, "get user %q", name)
	}
	return userOf(row), row.PasswordHash, nil
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]auth.User, error) {
	rows, err := s.q.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", mapErr(err))
	}
	out := make([]auth.User, len(rows))
	for i, r := range rows {
		out[i] = userOf(r)
	}
	return out, nil
}

// CountUsers returns how many users exist (enabled or not).
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	n, err := s.q.UserCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("count users: %w", mapErr(err))
	}
	return n, nil
}

// SetUserRole changes a user's role. Demoting the last enabled admin is
// refused with ErrLastAdmin.
func (s *Store) SetUserRole(ctx context.Context, id int64, role auth.Role) error {
	if err := validRole(role); err != nil {
		return err
	}
	return s.guardedUserUpdate(ctx, id, func(q *dbsqlc.Queries) (int64, error) {
		return q.UserSetRole(ctx, dbsqlc.UserSetRoleParams{UserID: id, Role: role.String()})
	})
}

// SetUserDisabled disables or enables a user. A disabled user's sessions
// stop working at their next request. Disabling the last enabled admin is
// refused with ErrLastAdmin.
func (s *Store) SetUserDisabled(ctx context.Context, id int64, disabled bool) error {
	return s.guardedUserUpdate(ctx, id, func(q *dbsqlc.Queries) (int64, error) {
		return q.UserSetDisabled(ctx, dbsqlc.UserSetDisabledParams{UserID: id, Disabled: disabled})
	})
}

// SetUserPassword replaces a user's password hash.
func (s *Store) SetUserPassword(ctx context.Context, id int64, passwordHash string) error {
	n, err := s.q.UserSetPassword(ctx, dbsqlc.UserSetPasswordParams{UserID: id, PasswordHash: passwordHash})
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", id, mapErr(err))
	}
	if n == 0 {
		return ErrUserNotFound
	}
	return nil
}

// guardedUserUpdate runs update in a transaction that first locks the
// enabled admins' rows, so two concurrent demotions cannot both pass the
// last-admin check, then verifies at least one enabled admin remains.
func (s *Store) guardedUserUpdate(ctx context.Context, id int64, update func(*dbsqlc.Queries) (int64, error)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := s.q.WithTx(tx)
	if _, err := q.UserLockAdmins(ctx); err != nil {
		return fmt.Errorf("lock admins: %w", mapErr(err))
	}
	n, err := update(q)
	if err != nil {
		return fmt.Errorf("update user %d: %w", id, mapErr(err))
	}
	if n == 0 {
		return ErrUserNotFound
	}
	admins, err := q.UserCountEnabledAdmins(ctx)
	if err != nil {
		return fmt.Errorf("count admins: %w", mapErr(err))
	}
	if admins == 0 {
		return ErrLastAdmin
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	return nil
}

func userErr(err error, format string, args ...any) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrUserNotFound
	}
	return fmt.Errorf(format+": %w", append(args, mapErr(err))...)
}

func userOf(r dbsqlc.DlUser) auth.User {
	role, err := auth.ParseRole(r.Role)
	if err != nil {
		role = auth.RoleNone // unreachable: the column has a CHECK constraint
	}
	return auth.User{ID: r.UserID, Name: r.Name, Role: role, CreatedAt: r.CreatedAt, Disabled: r.Disabled}
}
