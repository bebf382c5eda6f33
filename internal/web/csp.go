package web

import "github.com/labstack/echo/v4"

// contentSecurityPolicy allows scripts, styles, fetches and forms from this
// origin only: no inline script or style, no eval, no plugins, no framing.
// An attacker who gets markup into a page (say, through a job's args) can
// therefore not run anything even if escaping were missed somewhere.
// img-src allows data: URLs for small inline icons.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// securityHeaders sets the security headers on every response, API and
// errors included. Strict-Transport-Security is sent only over HTTPS, where
// it means something and cannot lock a plain-HTTP development set-up out.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.isHTTPS(c.Request()) {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		return next(c)
	}
}
