package web

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// Who may do what (SPEC §9) is decided in one place: every route of the
// table in routes.go is either public (below) or wrapped in requireRole.
//
// Public routes, and why:
//   - /health, /status: probes of load balancers and orchestrators, which
//     carry no credentials; they reveal liveness, versions and counts, no
//     job data.
//   - /metrics: scraped by Prometheus without credentials; aggregate
//     numbers only. (A scrape token could be required later.)
//   - /api/v1/openapi.json: the API's public contract.
//   - /static/*: CSS and JavaScript, the same for everyone.
//   - GET/POST /login, POST /logout: signing in and out (CSRF-checked).
//
// TestEveryRouteRefusesAnonymousRequests walks the route table so that a new
// route cannot be added unprotected by accident.

// principalKey is where the authentication middleware stores the request's
// auth.Principal in the echo context.
const principalKey = "principal"

// Echo context keys of the auth middleware.
const (
	ctxSession = "dl.session"  // *sessions.Session, decoded once per request
	ctxAuthVia = "dl.auth_via" // viaSession or viaToken
	ctxServer  = "dl.server"   // *Server, for csrfToken
)

// How a request authenticated. Only session requests carry ambient
// credentials (the cookie), so only they need CSRF checks.
const (
	viaSession = "session"
	viaToken   = "token"
)

// authState is the server's authentication machinery.
type authState struct {
	cfg      AuthConfig
	cookies  *sessions.CookieStore
	throttle *throttle
	// kdf bounds concurrent password checks: each holds ~19 MiB and a core
	// for tens of milliseconds, so a burst of sign-ins must queue rather
	// than exhaust memory.
	kdf chan struct{}
	cop *http.CrossOriginProtection
	// touched remembers when this process last wrote a token's last_used_at,
	// so a busy token costs one write a minute, not one per request.
	touched sync.Map // token id → time.Time
}

func newAuthState(cfg AuthConfig) *authState {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	if cfg.CookieSecure == "" {
		cfg.CookieSecure = CookieSecureAuto
	}
	return &authState{
		cfg:      cfg,
		cookies:  newCookieStore(cfg.SessionKeys, cfg.SessionTTL),
		throttle: newThrottle(),
		kdf:      make(chan struct{}, max(2, runtime.NumCPU())),
		cop:      http.NewCrossOriginProtection(),
	}
}

// principal returns who the request acts as.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// authRoutes sets up authentication (session cookies, client addresses,
// security headers) and registers sign-in, sign-out, users and tokens.
func (s *Server) authRoutes() {
	s.auth = newAuthState(s.Auth)
	s.e.IPExtractor = ipExtractor(s.Auth.TrustedProxies)
	s.e.Use(s.securityHeaders, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(ctxServer, s) // for csrfToken, which handlers call without the server
			return next(c)
		}
	})

	s.e.GET("/login", s.loginPage)
	s.e.POST("/login", s.login)
	s.e.POST("/logout", s.logout)

	admin := s.requireRole(auth.RoleAdmin)
	s.e.GET("/admin/users", s.usersPage, admin)
	s.e.POST("/admin/users", s.createUser, admin)
	s.e.POST("/admin/users/:user_id/role", s.setUserRole, admin)
	s.e.POST("/admin/users/:user_id/password", s.setUserPassword, admin)
	s.e.POST("/admin/users/:user_id/disable", s.disableUser, admin)
	s.e.POST("/admin/users/:user_id/enable", s.enableUser, admin)
	s.e.GET("/admin/tokens", s.tokensPage, admin)
	s.e.POST("/admin/tokens", s.createToken, admin)
	s.e.POST("/admin/tokens/:token_id/revoke", s.revokeToken, admin)
}

// requireRole refuses requests whose principal lacks role r. A request
// authenticates with an API token (Authorization: Bearer dl_…) or a session
// cookie; session requests that change state must also pass the CSRF check.
// Refusals: no or bad credentials → 401 for the API (WWW-Authenticate:
// Bearer), a redirect to /login for pages (HX-Redirect for htmx); a missing
// CSRF token or too low a role → 403.
func (s *Server) requireRole(r auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, via, err := s.authenticate(c)
			if err != nil {
				return err
			}
			if p.Role == auth.RoleNone {
				return s.unauthenticated(c, via == viaToken)
			}
			if via == viaSession && !safeMethod(c.Request().Method) {
				if err := s.checkCSRF(c); err != nil {
					return s.forbidden(c, err.Error())
				}
			}
			if !p.Can(r) {
				return s.forbidden(c, fmt.Sprintf("this needs the %s role; you are %s", r, p.Role))
			}
			return next(c)
		}
	}
}

// authenticate finds the request's principal (RoleNone when anonymous) and
// how it authenticated, and records both in the context.
func (s *Server) authenticate(c echo.Context) (auth.Principal, string, error) {
	if via, ok := c.Get(ctxAuthVia).(string); ok {
		return principal(c), via, nil
	}
	var p auth.Principal
	var via string
	var err error
	if h := c.Request().Header.Get("Authorization"); h != "" {
		via = viaToken
		p, err = s.tokenPrincipal(c, h)
	} else {
		via = viaSession
		p, err = s.sessionPrincipal(c)
	}
	if err != nil {
		return auth.Principal{}, "", err
	}
	c.Set(ctxAuthVia, via)
	if p.Role != auth.RoleNone {
		c.Set(principalKey, p)
	}
	return p, via, nil
}

// tokenPrincipal resolves an Authorization header. Anything but a known,
// unrevoked "Bearer dl_…" token is anonymous.
func (s *Server) tokenPrincipal(c echo.Context, header string) (auth.Principal, error) {
	scheme, secret, _ := strings.Cut(header, " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || !auth.WellFormedToken(secret) {
		return auth.Principal{}, nil
	}
	ctx := c.Request().Context()
	t, err := s.Store.TokenBySecret(ctx, secret)
	if errors.Is(err, store.ErrTokenNotFound) {
		return auth.Principal{}, nil
	}
	if err != nil {
		return auth.Principal{}, err
	}
	now := time.Now()
	if last, ok := s.auth.touched.Load(t.ID); !ok || now.Sub(last.(time.Time)) >= time.Minute {
		s.auth.touched.Store(t.ID, now)
		if err := s.Store.TouchToken(ctx, t.ID); err != nil {
			s.Log.Warn("record token use", "token_id", t.ID, "error", err)
		}
	}
	return t.Principal(), nil
}

// sessionPrincipal resolves the session cookie. The user is looked up on
// every request (a primary-key read) so that disabling or demoting a user
// takes effect at once rather than when the cookie expires.
func (s *Server) sessionPrincipal(c echo.Context) (auth.Principal, error) {
	sess := s.session(c)
	uid, ok := sess.Values[sessUserID].(int64)
	if !ok {
		return auth.Principal{}, nil
	}
	loginAt, _ := sess.Values[sessLoginAt].(int64)
	if time.Since(time.Unix(loginAt, 0)) > s.auth.cfg.SessionTTL {
		return auth.Principal{}, s.endSession(c, sess)
	}
	u, err := s.Store.User(c.Request().Context(), uid)
	if errors.Is(err, store.ErrUserNotFound) || err == nil && u.Disabled {
		return auth.Principal{}, s.endSession(c, sess)
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return u.Principal(), nil
}

// endSession forgets the signed-in user (keeping the CSRF token, so an
// open sign-in form still works) and rewrites the cookie.
func (s *Server) endSession(c echo.Context, sess *sessions.Session) error {
	for _, k := range []string{sessUserID, sessName, sessRole, sessLoginAt} {
		delete(sess.Values, k)
	}
	return s.saveSession(c, sess)
}

// unauthenticated answers a request without valid credentials.
func (s *Server) unauthenticated(c echo.Context, badToken bool) error {
	req := c.Request()
	if isAPI(c) {
		challenge := `Bearer realm="dataloader"`
		if badToken {
			challenge += `, error="invalid_token"`
		}
		c.Response().Header().Set("WWW-Authenticate", challenge)
		return c.JSON(http.StatusUnauthorized, errorBody{Error: errorDetail{Code: "unauthorized",
			Message: "authentication required: send Authorization: Bearer <API token>"}})
	}
	if req.Header.Get("HX-Request") == "true" {
		next := "/"
		if u, err := url.Parse(req.Header.Get("HX-Current-URL")); err == nil && localPath(u.RequestURI()) {
			next = u.RequestURI()
		}
		c.Response().Header().Set("HX-Redirect", loginURL(next))
		return c.NoContent(http.StatusUnauthorized)
	}
	next := "/"
	if safeMethod(req.Method) {
		next = req.URL.RequestURI()
	}
	return c.Redirect(http.StatusSeeOther, loginURL(next))
}

// forbidden answers a signed-in request that may not do what it asks.
func (s *Server) forbidden(c echo.Context, msg string) error {
	if isAPI(c) {
		return c.JSON(http.StatusForbidden, errorBody{Error: errorDetail{Code: "forbidden", Message: msg}})
	}
	return s.authRender(c, http.StatusForbidden, views.AuthForbidden(s.pageFor(c, "Forbidden", ""), msg))
}

// errCSRF is the refusal of a state-changing browser request without the
// session's CSRF token.
var errCSRF = errors.New("missing or invalid CSRF token: reload the page and try again")

// checkCSRF verifies a state-changing browser request: the synchronizer
// token (form field _csrf or header X-CSRF-Token) must equal the session's,
// and, as defence in depth, Sec-Fetch-Site / Origin must not name another
// site.
func (s *Server) checkCSRF(c echo.Context) error {
	req := c.Request()
	if err := s.auth.cop.Check(req); err != nil {
		return errors.New("cross-site request refused")
	}
	want, _ := s.session(c).Values[sessCSRF].(string)
	got := req.Header.Get("X-CSRF-Token")
	if got == "" && isForm(req) {
		req.Body = http.MaxBytesReader(c.Response(), req.Body, s.MaxBodyBytes)
		got = c.FormValue("_csrf")
	}
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}

// csrfToken returns the token forms and htmx requests must send back (form
// field _csrf, or header X-CSRF-Token). It is kept in the session; the
// first call for a session without one creates it and sets the cookie, so
// call it before the response is written.
func csrfToken(c echo.Context) string {
	s, ok := c.Get(ctxServer).(*Server)
	if !ok {
		return ""
	}
	sess := s.session(c)
	if tok, ok := sess.Values[sessCSRF].(string); ok && tok != "" {
		return tok
	}
	tok := randomToken()
	sess.Values[sessCSRF] = tok
	if err := s.saveSession(c, sess); err != nil {
		s.Log.Error("save session", "error", err)
	}
	return tok
}

// pageFor is the layout's view of the request: title, active navigation
// entry, the signed-in user and the CSRF token. Every dashboard page builds
// its views.Page with it.
func (s *Server) pageFor(c echo.Context, title, nav string) views.Page {
	p := principal(c)
	page := views.Page{Title: title, Nav: nav, CSRF: csrfToken(c), Flash: s.takeFlash(c)}
	if p.Role != auth.RoleNone {
		page.User = views.User{Name: p.Name, Role: p.Role.String(), CanOperate: p.Can(auth.RoleOperator),
			IsAdmin: p.Can(auth.RoleAdmin)}
	}
	return page
}

// setFlash stores a one-off notice shown by the next page (after a
// redirect).
func (s *Server) setFlash(c echo.Context, msg string) error {
	sess := s.session(c)
	sess.AddFlash(msg)
	return s.saveSession(c, sess)
}

// takeFlash returns and clears the pending notice, if any.
func (s *Server) takeFlash(c echo.Context) string {
	sess := s.session(c)
	if _, ok := sess.Values["_flash"]; !ok {
		return ""
	}
	var msgs []string
	for _, f := range sess.Flashes() {
		if m, ok := f.(string); ok {
			msgs = append(msgs, m)
		}
	}
	if err := s.saveSession(c, sess); err != nil {
		s.Log.Error("save session", "error", err)
	}
	return strings.Join(msgs, " ")
}

// authRender writes a templ component as an HTML response.
func (s *Server) authRender(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

func isAPI(c echo.Context) bool {
	return strings.HasPrefix(c.Request().URL.Path, "/api/")
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func isForm(r *http.Request) bool {
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// localPath reports whether p is a path on this site, safe to redirect to
// after sign-in: it starts with one "/" and names no other host (no "//",
// no "/\", no scheme, no control characters).
func localPath(p string) bool {
	if p == "" || p[0] != '/' || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\") {
		return false
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	u, err := url.Parse(p)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}

func loginURL(next string) string {
	if next == "" || next == "/" || !localPath(next) {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}

// formError returns the message to show in a form for err, and false for
// internal errors (which are not shown).
func formError(err error) (string, bool) {
	var je *job.Error
	if errors.As(err, &je) && je.Code != job.CodeInternal {
		return je.Error(), true
	}
	return "", false
}
