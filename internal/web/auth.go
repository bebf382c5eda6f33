package web

import (
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
)

// principalKey is where the authentication middleware stores the request's
// auth.Principal in the echo context.
const principalKey = "principal"

// principal returns who the request acts as.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// authRoutes registers sign-in, sign-out, users and tokens.
// (Placeholder until authentication lands.)
func (s *Server) authRoutes() {}

// requireRole refuses requests whose principal lacks role r.
// (Placeholder until authentication lands: everyone is an admin.)
func (s *Server) requireRole(r auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(principalKey, auth.Principal{Kind: "user", Name: "dev", Role: auth.RoleAdmin})
			return next(c)
		}
	}
}

// csrfToken returns the token forms and htmx requests must send back.
// (Placeholder until CSRF protection lands.)
func csrfToken(c echo.Context) string { return "" }
