package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// msgBadLogin is the one answer to every failed sign-in, so that it does not
// tell which names exist.
const msgBadLogin = "invalid username or password"

// maxLoginBody bounds the sign-in form.
const maxLoginBody = 16 << 10

// loginPage shows the sign-in form (or goes straight on when the visitor is
// already signed in).
func (s *Server) loginPage(c echo.Context) error {
	next := c.QueryParam("next")
	if !localPath(next) {
		next = "/"
	}
	p, _, err := s.authenticate(c)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleNone {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return s.renderLogin(c, http.StatusOK, views.LoginForm{Next: next})
}

func (s *Server) renderLogin(c echo.Context, status int, f views.LoginForm) error {
	return s.authRender(c, status, views.AuthLogin(s.pageFor(c, "Sign in", "login"), f))
}

// login checks a user name and password. Failures are throttled per client
// address and per (address, name); the password is checked, in constant
// time, even for unknown or disabled users so that timing reveals nothing.
// A success starts a new session (new CSRF token: nothing chosen before
// sign-in survives it) and goes to next when that is a local path.
func (s *Server) login(c echo.Context) error {
	req := c.Request()
	req.Body = http.MaxBytesReader(c.Response(), req.Body, maxLoginBody)
	name, pw := c.FormValue("username"), c.FormValue("password")
	next := c.FormValue("next")
	if !localPath(next) {
		next = "/"
	}
	form := views.LoginForm{Next: next, Username: name}
	if err := s.checkCSRF(c); err != nil {
		form.Error = "Your sign-in form expired. Please try again."
		return s.renderLogin(c, http.StatusForbidden, form)
	}

	ip := c.RealIP()
	keys := []string{throttleKey("u", ip, name), throttleKey("a", ip, "")}
	if wait := s.auth.throttle.wait(keys...); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		form.Error = msgBadLogin
		form.Hint = fmt.Sprintf("Too many failed attempts: try again in %d s.", secs)
		return s.renderLogin(c, http.StatusTooManyRequests, form)
	}

	u, ok, err := s.checkPassword(c, name, pw)
	if err != nil {
		return err
	}
	if !ok {
		s.auth.throttle.fail(keys...)
		known := "unknown" // a mistyped password in the name field must not reach the logs
		if u.ID != 0 {
			known = u.Name
		}
		s.Log.Info("sign-in failed", "user", known, "client_ip", ip)
		form.Error = msgBadLogin
		return s.renderLogin(c, http.StatusUnauthorized, form)
	}
	s.auth.throttle.succeed(keys[0])

	sess := s.session(c)
	sess.Values = map[any]any{
		sessUserID:  u.ID,
		sessName:    u.Name,
		sessRole:    u.Role.String(),
		sessCSRF:    randomToken(),
		sessLoginAt: time.Now().Unix(),
	}
	sess.Options.MaxAge = int(s.auth.cfg.SessionTTL.Seconds())
	if err := s.saveSession(c, sess); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	s.Log.Info("signed in", "user", u.Name, "role", u.Role.String(), "client_ip", ip)
	return c.Redirect(http.StatusSeeOther, next)
}

// checkPassword verifies name and pw. It returns the user when the name
// exists (even on a wrong password), and ok only for an enabled user with
// the right password.
func (s *Server) checkPassword(c echo.Context, name, pw string) (u auth.User, ok bool, err error) {
	ctx := c.Request().Context()
	select {
	case s.auth.kdf <- struct{}{}:
		defer func() { <-s.auth.kdf }()
	case <-ctx.Done():
		return auth.User{}, false, ctx.Err()
	}
	if name == "" || len(name) > store.MaxUserNameLen {
		_ = auth.VerifyDummy(pw) // the same time as any other failure
		return auth.User{}, false, nil
	}
	u, hash, err := s.Store.UserCredentials(ctx, name)
	if errors.Is(err, store.ErrUserNotFound) {
		_ = auth.VerifyDummy(pw)
		return auth.User{}, false, nil
	}
	if err != nil {
		return auth.User{}, false, err
	}
	if err := auth.VerifyPassword(hash, pw); err != nil {
		if !errors.Is(err, auth.ErrMismatch) {
			s.Log.Error("stored password hash unusable", "user", u.Name, "error", err)
		}
		return u, false, nil
	}
	return u, !u.Disabled, nil
}

// logout ends the session and goes to the sign-in page.
func (s *Server) logout(c echo.Context) error {
	sess := s.session(c)
	if _, signedIn := sess.Values[sessUserID]; signedIn {
		if err := s.checkCSRF(c); err != nil {
			return s.forbidden(c, err.Error())
		}
		s.Log.Info("signed out", "user", sess.Values[sessName])
	}
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	if err := s.saveSession(c, sess); err != nil {
		return fmt.Errorf("clear session: %w", err)
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}
