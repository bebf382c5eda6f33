package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/views"
)

// The admin pages manage users and API tokens. They are plain forms (they
// work without JavaScript); each action redirects back to its list with a
// notice, or re-renders the list with the error and a 4xx status.

const timeLayout = "2006-01-02 15:04 UTC"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

// usersPage lists the users.
func (s *Server) usersPage(c echo.Context) error {
	return s.renderUsers(c, http.StatusOK, views.NewUserForm{Role: auth.RoleViewer.String()}, "")
}

func (s *Server) renderUsers(c echo.Context, status int, form views.NewUserForm, actionErr string) error {
	users, err := s.Store.Users(c.Request().Context())
	if err != nil {
		return err
	}
	me := principal(c).Name
	v := views.UsersPage{Form: form, Error: actionErr, Users: make([]views.UserRow, len(users))}
	for i, u := range users {
		v.Users[i] = views.UserRow{ID: u.ID, Name: u.Name, Role: u.Role.String(), CreatedAt: fmtTime(u.CreatedAt),
			Disabled: u.Disabled, Self: u.Name == me}
	}
	return s.authRender(c, status, views.AuthUsers(s.pageFor(c, "Users", "users"), v))
}

// createUser adds a user with a password and a role.
func (s *Server) createUser(c echo.Context) error {
	form := views.NewUserForm{Name: c.FormValue("name"), Role: c.FormValue("role")}
	err := s.addUser(c, form.Name, c.FormValue("password"), form.Role)
	if msg, ok := formError(err); ok {
		form.Error = msg
		return s.renderUsers(c, formStatus(err), form, "")
	} else if err != nil {
		return err
	}
	s.Log.Info("user created", "user", form.Name, "role", form.Role, "by", actor(c))
	return s.backTo(c, "/admin/users", fmt.Sprintf("User %s created.", form.Name))
}

func (s *Server) addUser(c echo.Context, name, password, roleName string) error {
	role, err := auth.ParseRole(roleName)
	if err != nil {
		return job.Invalid("role", "must be viewer, operator or admin")
	}
	hash, err := newPasswordHash(password)
	if err != nil {
		return err
	}
	return s.Store.CreateUser(c.Request().Context(), name, hash, role)
}

// newPasswordHash checks a new password's length and hashes it.
func newPasswordHash(pw string) (string, error) {
	if err := auth.CheckNewPassword(pw); err != nil {
		return "", job.Invalid("password", "%v", err)
	}
	return auth.HashPassword(pw)
}

// setUserRole changes a user's role.
func (s *Server) setUserRole(c echo.Context) error {
	return s.userAction(c, "role changed", func(id int64) (string, error) {
		role, err := auth.ParseRole(c.FormValue("role"))
		if err != nil {
			return "", job.Invalid("role", "must be viewer, operator or admin")
		}
		return "Role changed to " + role.String() + ".", s.Store.SetUserRole(c.Request().Context(), id, role)
	})
}

// setUserPassword replaces a user's password.
func (s *Server) setUserPassword(c echo.Context) error {
	return s.userAction(c, "password changed", func(id int64) (string, error) {
		hash, err := newPasswordHash(c.FormValue("password"))
		if err != nil {
			return "", err
		}
		return "Password changed.", s.Store.SetUserPassword(c.Request().Context(), id, hash)
	})
}

// disableUser disables a user: its sessions stop working at their next
// request.
func (s *Server) disableUser(c echo.Context) error {
	return s.userAction(c, "user disabled", func(id int64) (string, error) {
		return "User disabled.", s.Store.SetUserDisabled(c.Request().Context(), id, true)
	})
}

// enableUser enables a disabled user.
func (s *Server) enableUser(c echo.Context) error {
	return s.userAction(c, "user enabled", func(id int64) (string, error) {
		return "User enabled.", s.Store.SetUserDisabled(c.Request().Context(), id, false)
	})
}

// userAction runs one action on the user named by :user_id, then redirects
// to the users page with a notice, or re-renders it with the error.
func (s *Server) userAction(c echo.Context, what string, do func(id int64) (string, error)) error {
	id, err := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err != nil {
		err = job.Invalid("user_id", "must be a user id")
	}
	var notice string
	if err == nil {
		notice, err = do(id)
	}
	if msg, ok := formError(err); ok {
		return s.renderUsers(c, formStatus(err), views.NewUserForm{Role: auth.RoleViewer.String()}, msg)
	} else if err != nil {
		return err
	}
	s.Log.Info(what, "user_id", id, "by", actor(c))
	return s.backTo(c, "/admin/users", notice)
}

// tokensPage lists the API tokens.
func (s *Server) tokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, views.TokensPage{Form: views.NewTokenForm{Role: auth.RoleViewer.String()}})
}

func (s *Server) renderTokens(c echo.Context, status int, v views.TokensPage) error {
	tokens, err := s.Store.Tokens(c.Request().Context())
	if err != nil {
		return err
	}
	v.Tokens = make([]views.TokenRow, len(tokens))
	for i, t := range tokens {
		v.Tokens[i] = views.TokenRow{ID: t.ID, Name: t.Name, Role: t.Role.String(), CreatedBy: t.CreatedBy,
			CreatedAt: fmtTime(t.CreatedAt), LastUsed: fmtTimePtr(t.LastUsedAt), Revoked: fmtTimePtr(t.RevokedAt)}
	}
	return s.authRender(c, status, views.AuthTokens(s.pageFor(c, "API tokens", "tokens"), v))
}

// createToken creates an API token and shows its secret, this once. The
// page is not cached anywhere.
func (s *Server) createToken(c echo.Context) error {
	form := views.NewTokenForm{Name: c.FormValue("name"), Role: c.FormValue("role")}
	role, err := auth.ParseRole(form.Role)
	if err != nil {
		form.Error = "role: must be viewer, operator or admin"
		return s.renderTokens(c, http.StatusBadRequest, views.TokensPage{Form: form})
	}
	t, secret, err := s.Store.CreateToken(c.Request().Context(), form.Name, role, actor(c))
	if msg, ok := formError(err); ok {
		form.Error = msg
		return s.renderTokens(c, formStatus(err), views.TokensPage{Form: form})
	} else if err != nil {
		return err
	}
	s.Log.Info("token created", "token", t.Name, "token_id", t.ID, "role", t.Role.String(), "by", actor(c))
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.renderTokens(c, http.StatusCreated, views.TokensPage{
		Form:    views.NewTokenForm{Role: auth.RoleViewer.String()},
		Created: &views.CreatedToken{Name: t.Name, Role: t.Role.String(), Secret: secret},
	})
}

// revokeToken revokes a token at once.
func (s *Server) revokeToken(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("token_id"), 10, 64)
	if err != nil {
		err = job.Invalid("token_id", "must be a token id")
	} else {
		err = s.Store.RevokeToken(c.Request().Context(), id)
	}
	if msg, ok := formError(err); ok {
		return s.renderTokens(c, formStatus(err), views.TokensPage{Form: views.NewTokenForm{Role: auth.RoleViewer.String()}, Error: msg})
	} else if err != nil {
		return err
	}
	s.Log.Info("token revoked", "token_id", id, "by", actor(c))
	return s.backTo(c, "/admin/tokens", "Token revoked.")
}

// backTo redirects (303) to path with a notice for the next page.
func (s *Server) backTo(c echo.Context, path, notice string) error {
	if err := s.setFlash(c, notice); err != nil {
		return fmt.Errorf("save notice: %w", err)
	}
	return c.Redirect(http.StatusSeeOther, path)
}

// formStatus is the HTTP status of a form error.
func formStatus(err error) int {
	var je *job.Error
	if errors.As(err, &je) {
		if st, ok := statusOf[je.Code]; ok {
			return st
		}
	}
	return http.StatusBadRequest
}
