package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/web"
)

// browser is a cookie-keeping client that does not follow redirects, so
// tests see each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, ts *httptest.Server) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *ts.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, base: ts.URL, c: &c}
}

func (e *apiEnv) browser(t *testing.T) *browser { return newBrowser(t, e.ts) }

// send does one request; hdr holds header name/value pairs.
func (b *browser) send(method, path string, body io.Reader, hdr ...string) response {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return response{method: method, path: path, status: res.StatusCode, header: res.Header, body: raw}
}

func (b *browser) get(path string, hdr ...string) response {
	b.t.Helper()
	return b.send(http.MethodGet, path, nil, hdr...)
}

func (b *browser) post(path string, form url.Values, hdr ...string) response {
	b.t.Helper()
	return b.send(http.MethodPost, path, strings.NewReader(form.Encode()),
		append([]string{"Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

// csrf returns the CSRF token of a page's layout.
func csrfOf(t *testing.T, r response) string {
	t.Helper()
	m := csrfMeta.FindSubmatch(r.body)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("%s: no csrf-token meta tag", r)
	}
	return string(m[1])
}

// csrf fetches a page to read the session's CSRF token: /admin/tokens,
// which admins see and others get a 403 page for — both in the layout.
func (b *browser) csrf() string {
	b.t.Helper()
	return csrfOf(b.t, b.get("/admin/tokens"))
}

// signIn posts the sign-in form and returns the answer.
func (b *browser) signIn(name, pw string, extra ...string) response {
	b.t.Helper()
	page := b.get("/login")
	form := url.Values{"_csrf": {csrfOf(b.t, page)}, "username": {name}, "password": {pw}}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}
	return b.post("/login", form)
}

// mustSignIn signs in and fails the test unless it worked.
func (b *browser) mustSignIn(name, pw string) {
	b.t.Helper()
	if r := b.signIn(name, pw); r.status != http.StatusSeeOther {
		b.t.Fatalf("sign in as %s: %s, want 303", name, r)
	}
}

// user creates a user with role and returns its password.
func (e *apiEnv) user(name string, role auth.Role) string {
	e.t.Helper()
	pw := "pw-of-" + name
	hash, err := auth.HashPassword(pw)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.CreateUser(context.Background(), name, hash, role); err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	return pw
}

// tokenOf creates an API token with role and returns its secret.
func (e *apiEnv) tokenOf(role auth.Role) string {
	e.t.Helper()
	_, secret, err := e.st.CreateToken(context.Background(), "t-"+role.String(), role, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

func cookieOf(r response, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func wantRedirect(t *testing.T, r response, to string) {
	t.Helper()
	if r.status != http.StatusSeeOther || r.header.Get("Location") != to {
		t.Errorf("%s: got %d Location %q, want 303 to %q", r, r.status, r.header.Get("Location"), to)
	}
}

func TestSignInWithTheRightPasswordStartsASession(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleAdmin)
	b := e.browser(t)
	wantRedirect(t, b.get("/admin/users"), "/login?next=%2Fadmin%2Fusers")

	r := b.signIn("alice", pw, "next", "/admin/users")
	wantRedirect(t, r, "/admin/users")
	c := cookieOf(r, web.SessionCookie)
	if c == nil {
		t.Fatalf("%s: no %s cookie", r, web.SessionCookie)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" || c.MaxAge != 12*3600 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP, Path=/, Max-Age 12 h", c)
	}
	page := b.get("/admin/users")
	if page.status != http.StatusOK || !strings.Contains(string(page.body), `data-user="alice"`) {
		t.Errorf("%s: want the users page listing alice", page)
	}
	// Signed in, the sign-in page goes straight on.
	wantRedirect(t, b.get("/login?next=/admin/tokens"), "/admin/tokens")
}

func TestSignInRefusesAWrongPasswordAndAnUnknownUserAlike(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.user("alice", auth.RoleAdmin)
	e.user("dora", auth.RoleAdmin)
	if _, err := e.pool.Exec(context.Background(), `UPDATE dl_users SET disabled = true WHERE name = 'dora'`); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	var bodies []string
	for _, try := range [][2]string{{"alice", "wrong"}, {"nobody", "pw-of-alice"}, {"dora", "pw-of-dora"}, {"", ""}} {
		r := b.signIn(try[0], try[1])
		if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "invalid username or password") {
			t.Errorf("sign in %q/%q: %s, want 401 invalid username or password", try[0], try[1], r)
		}
		bodies = append(bodies, regexp.MustCompile(`value="[^"]*"`).ReplaceAllString(string(r.body), ""))
	}
	if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Error("wrong password, unknown user and disabled user answer differently, want the same page")
	}
	wantRedirect(t, b.get("/admin/users"), "/login?next=%2Fadmin%2Fusers")
}

func TestSignInRedirectsOnlyToLocalPaths(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleViewer)
	for next, want := range map[string]string{
		"/jobs?queue=a b": "/jobs?queue=a b",
		"//evil.example":  "/",
		"https://evil":    "/",
		"/\\evil.example": "/",
		"javascript:x":    "/",
		"":                "/",
	} {
		b := e.browser(t)
		wantRedirect(t, b.signIn("alice", pw, "next", next), want)
	}
}

func TestSignInIsThrottledAfterRepeatedFailures(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleViewer)
	b := e.browser(t)
	for i := range 5 { // the fifth failure locks alice out from this address for 1 s
		if r := b.signIn("alice", "wrong"); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %s, want 401", i+1, r)
		}
	}
	for _, p := range []string{"wrong", pw} {
		r := b.signIn("alice", p)
		if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "invalid username or password") {
			t.Errorf("after 5 failures: %s, want 429 with the same message", r)
		}
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("Retry-After %q, want the seconds to wait", ra)
		}
	}
	// Another name from the same address is not locked yet (the address
	// alone gets more attempts).
	if r := b.signIn("bob", "wrong"); r.status != http.StatusUnauthorized {
		t.Errorf("another user: %s, want 401", r)
	}
	// Lock-out lengths and expiry: TestThrottleLocksOutExponentiallyAndForgets.
}

func TestSessionCookieIsSecureUnderTLSOrAForwardedHTTPS(t *testing.T) {
	t.Parallel()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		auth    web.AuthConfig
		tls     bool
		forward bool
		want    bool
	}{
		{"plain HTTP", web.AuthConfig{TrustedProxies: loopback}, false, false, false},
		{"TLS", web.AuthConfig{}, true, false, true},
		{"forwarded https from a trusted proxy", web.AuthConfig{TrustedProxies: loopback}, false, true, true},
		{"forwarded https from an untrusted peer", web.AuthConfig{}, false, true, false},
		{"forced on", web.AuthConfig{CookieSecure: web.CookieSecureAlways}, false, false, true},
		{"forced off under TLS", web.AuthConfig{CookieSecure: web.CookieSecureNever}, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newAPIEnv(t, func(d *web.Deps) { d.Auth = tt.auth })
			ts := e.ts
			if tt.tls {
				ts = httptest.NewTLSServer(e.srv)
				t.Cleanup(ts.Close)
			}
			b := newBrowser(t, ts)
			var hdr []string
			if tt.forward {
				hdr = []string{"X-Forwarded-Proto", "https"}
			}
			r := b.get("/login", hdr...)
			c := cookieOf(r, web.SessionCookie)
			if c == nil {
				t.Fatalf("%s: no session cookie", r)
			}
			if c.Secure != tt.want || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("cookie Secure %v HttpOnly %v SameSite %v, want Secure %v, HttpOnly, Lax", c.Secure, c.HttpOnly, c.SameSite, tt.want)
			}
			if hsts := r.header.Get("Strict-Transport-Security"); (hsts != "") != (tt.tls || tt.forward && tt.auth.TrustedProxies != nil) {
				t.Errorf("Strict-Transport-Security %q: want it exactly over HTTPS", hsts)
			}
		})
	}
}

func TestSessionKeysRotate(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	e := newAPIEnv(t, func(d *web.Deps) { d.Auth.SessionKeys = [][]byte{oldKey} })
	pw := e.user("alice", auth.RoleAdmin)
	r := e.browser(t).signIn("alice", pw)
	cookie := cookieOf(r, web.SessionCookie)
	if cookie == nil {
		t.Fatalf("%s: no session cookie", r)
	}
	serverWith := func(keys ...[]byte) *httptest.Server {
		s := web.New(web.Deps{Store: e.st, Metrics: metrics.New(), Log: discardLogger(), Auth: web.AuthConfig{SessionKeys: keys}})
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		return ts
	}
	page := func(ts *httptest.Server) int {
		b := newBrowser(t, ts)
		return b.get("/admin/users", "Cookie", web.SessionCookie+"="+cookie.Value).status
	}
	if got := page(serverWith(newKey, oldKey)); got != http.StatusOK {
		t.Errorf("old key second in the list: got %d, want 200 (the cookie still opens)", got)
	}
	if got := page(serverWith(newKey)); got != http.StatusSeeOther {
		t.Errorf("old key removed: got %d, want 303 to sign-in", got)
	}
	// New cookies are sealed with the first key.
	rotated := serverWith(newKey, oldKey)
	r = newBrowser(t, rotated).signIn("alice", pw)
	cookie = cookieOf(r, web.SessionCookie)
	if got := page(serverWith(newKey)); got != http.StatusOK {
		t.Errorf("cookie issued after rotation on a new-key-only server: got %d, want 200", got)
	}
}

func TestCSRFTokenIsRequiredForStateChangingBrowserRequests(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleAdmin)
	b := e.browser(t)
	b.mustSignIn("alice", pw)
	tok := b.csrf()
	form := func(csrf string) url.Values {
		return url.Values{"name": {"ci"}, "role": {"viewer"}, "_csrf": {csrf}}
	}
	if r := b.post("/admin/tokens", url.Values{"name": {"ci"}, "role": {"viewer"}}); r.status != http.StatusForbidden {
		t.Errorf("no token: %s, want 403", r)
	}
	if r := b.post("/admin/tokens", form(tok+"x")); r.status != http.StatusForbidden {
		t.Errorf("wrong token: %s, want 403", r)
	}
	if r := b.post("/admin/tokens", form(tok), "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
		t.Errorf("right token from another site: %s, want 403", r)
	}
	if r := b.post("/admin/tokens", form(tok), "Origin", "https://evil.example"); r.status != http.StatusForbidden {
		t.Errorf("right token with a foreign Origin: %s, want 403", r)
	}
	if r := b.post("/admin/tokens", form(tok), "Sec-Fetch-Site", "same-origin"); r.status != http.StatusCreated {
		t.Errorf("right token: %s, want 201", r)
	}
	if r := b.post("/admin/tokens", url.Values{"name": {"ci2"}, "role": {"viewer"}}, "X-CSRF-Token", tok); r.status != http.StatusCreated {
		t.Errorf("token in X-CSRF-Token: %s, want 201", r)
	}

	// The API with a session cookie follows the same rule (htmx or fetch
	// send X-CSRF-Token); with a bearer token there is no cookie to abuse.
	body := strings.NewReader(`{"queue":"q","task":"t","lock_key":"k"}`)
	if r := b.send(http.MethodPost, "/api/v1/jobs/trigger", body, "Content-Type", "application/json"); r.status != http.StatusForbidden {
		t.Errorf("API with a session and no CSRF token: %s, want 403", r)
	} else {
		wantError(t, r, http.StatusForbidden, "forbidden", "")
	}
	body = strings.NewReader(`{"queue":"q","task":"t","lock_key":"k"}`)
	if r := b.send(http.MethodPost, "/api/v1/jobs/trigger", body, "Content-Type", "application/json", "X-CSRF-Token", tok); r.status != http.StatusCreated {
		t.Errorf("API with a session and its CSRF token: %s, want 201", r)
	}

	// Signing in needs the token too (no login CSRF), and starts a new one.
	anon := e.browser(t)
	anon.get("/login")
	if r := anon.post("/login", url.Values{"username": {"alice"}, "password": {pw}}); r.status != http.StatusForbidden {
		t.Errorf("sign-in without the token: %s, want 403", r)
	}
	before := csrfOf(t, anon.get("/login"))
	anon.mustSignIn("alice", pw)
	if after := anon.csrf(); after == before {
		t.Error("the CSRF token survived sign-in, want a new one")
	}
}

func TestAPIAuthenticatesBearerTokensByRole(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	viewer, operator := e.tokenOf(auth.RoleViewer), e.tokenOf(auth.RoleOperator)
	b := e.browser(t)
	trigger := func(hdr ...string) response {
		return b.send(http.MethodPost, "/api/v1/jobs/trigger", strings.NewReader(`{"queue":"q","task":"t","lock_key":"k"}`),
			append([]string{"Content-Type", "application/json"}, hdr...)...)
	}

	r := trigger()
	wantError(t, r, http.StatusUnauthorized, "unauthorized", "")
	if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want Bearer", got)
	}
	for _, bad := range []string{"Bearer dl_nope", "Basic YWxpY2U6cHc=", "Bearer " + viewer + "x", "Bearer " + auth.TokenPrefix + strings.Repeat("A", 43)} {
		r := trigger("Authorization", bad)
		wantError(t, r, http.StatusUnauthorized, "unauthorized", "")
	}
	wantError(t, trigger("Authorization", "Bearer "+viewer), http.StatusForbidden, "forbidden", "")
	if r := b.get("/api/v1/jobs", "Authorization", "Bearer "+viewer); r.status != http.StatusOK {
		t.Errorf("viewer lists jobs: %s, want 200", r)
	}
	if r := trigger("Authorization", "bearer "+operator); r.status != http.StatusCreated {
		t.Errorf("operator triggers: %s, want 201", r)
	}
	var used *time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT last_used_at FROM dl_api_tokens WHERE name = 't-operator'`).Scan(&used); err != nil || used == nil {
		t.Errorf("last_used_at %v (%v), want set after use", used, err)
	}

	if _, err := e.pool.Exec(context.Background(), `UPDATE dl_api_tokens SET revoked_at = now() WHERE name = 't-operator'`); err != nil {
		t.Fatal(err)
	}
	r = trigger("Authorization", "Bearer "+operator)
	wantError(t, r, http.StatusUnauthorized, "unauthorized", "")
	if got := r.header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate %q, want error=invalid_token for a revoked token", got)
	}
}

func TestDisabledOrDemotedUsersLoseTheirRightsAtOnce(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.user("root", auth.RoleAdmin)
	pw := e.user("alice", auth.RoleAdmin)
	b := e.browser(t)
	b.mustSignIn("alice", pw)
	if r := b.get("/admin/users"); r.status != http.StatusOK {
		t.Fatalf("%s, want 200", r)
	}
	ctx := context.Background()
	u, _, _ := e.st.UserCredentials(ctx, "alice")
	if err := e.st.SetUserRole(ctx, u.ID, auth.RoleViewer); err != nil {
		t.Fatal(err)
	}
	r := b.get("/admin/users")
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), `data-testid="forbidden"`) {
		t.Errorf("demoted to viewer: %s, want the 403 page", r)
	}
	if err := e.st.SetUserDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, b.get("/admin/users"), "/login?next=%2Fadmin%2Fusers")
	if err := e.st.SetUserDisabled(ctx, u.ID, false); err != nil {
		t.Fatal(err)
	}
	// The session was ended, not just refused: enabling the user again does
	// not bring it back.
	wantRedirect(t, b.get("/admin/users"), "/login?next=%2Fadmin%2Fusers")
}

func TestHTMXRequestsWithoutASessionAreToldToSignIn(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	r := e.browser(t).get("/admin/users", "HX-Request", "true", "HX-Current-URL", e.ts.URL+"/admin/tokens?x=1")
	if r.status != http.StatusUnauthorized || r.header.Get("HX-Redirect") != "/login?next=%2Fadmin%2Ftokens%3Fx%3D1" {
		t.Errorf("%s: got HX-Redirect %q, want 401 with HX-Redirect to sign-in coming back", r, r.header.Get("HX-Redirect"))
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleAdmin)
	b := e.browser(t)
	b.mustSignIn("alice", pw)
	tok := b.csrf()
	if r := b.post("/logout", url.Values{}); r.status != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %s, want 403", r)
	}
	r := b.post("/logout", url.Values{"_csrf": {tok}})
	wantRedirect(t, r, "/login")
	if c := cookieOf(r, web.SessionCookie); c == nil || c.MaxAge >= 0 {
		t.Errorf("logout cookie %+v, want it deleted", c)
	}
	wantRedirect(t, b.get("/admin/users"), "/login?next=%2Fadmin%2Fusers")
}

var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "same-origin",
	"X-Frame-Options":        "DENY",
}

func TestSecurityHeadersAreOnEveryResponse(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleAdmin)
	b := e.browser(t)
	var rs []response
	rs = append(rs, b.get("/login"), b.get("/health"), b.get("/api/v1/jobs"), b.get("/no/such/page"), b.get("/admin/users"))
	b.mustSignIn("alice", pw)
	rs = append(rs, b.get("/admin/users"), b.get("/admin/tokens"))
	for _, r := range rs {
		for h, want := range securityHeaders {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s %s: %s = %q, want %q", r.method, r.path, h, got, want)
			}
		}
	}
	// No inline script anywhere in our pages (the CSP would block it).
	for _, r := range rs[len(rs)-2:] {
		if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`).Match(r.body) || strings.Contains(string(r.body), " onclick=") {
			t.Errorf("%s %s holds inline script", r.method, r.path)
		}
	}
}

// Every route outside this list must refuse anonymous requests; the list is
// the public surface, each entry justified in auth.go.
var publicRoutes = map[string]bool{
	"GET /health": true, "GET /status": true, "GET /metrics": true, "GET /api/v1/openapi.json": true,
	"GET /login": true, "POST /login": true, "POST /logout": true,
}

func isPublic(route string) bool {
	_, path, _ := strings.Cut(route, " ")
	return publicRoutes[route] || strings.HasPrefix(path, "/static")
}

var routeParam = regexp.MustCompile(`:[A-Za-z_]+|\*`)

func concretePath(path string) string {
	return routeParam.ReplaceAllStringFunc(path, func(p string) string {
		switch p {
		case ":job_id":
			return "0190b3d4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"
		case ":user_id", ":token_id":
			return "1"
		}
		return "x"
	})
}

func TestEveryRouteRefusesAnonymousRequests(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("alice", auth.RoleAdmin)
	admin := e.browser(t)
	admin.mustSignIn("alice", pw)
	var checked int
	for _, route := range e.srv.Routes() {
		if isPublic(route) {
			continue
		}
		checked++
		method, path, _ := strings.Cut(route, " ")
		p := concretePath(path)
		anon := e.browser(t)
		r := anon.send(method, p, strings.NewReader(""), "Content-Type", "application/x-www-form-urlencoded")
		if strings.HasPrefix(path, "/api/") {
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s (as %s): anonymous got %d, want 401", route, p, r.status)
			}
		} else if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Errorf("%s (as %s): anonymous got %d Location %q, want 303 to /login", route, p, r.status, r.header.Get("Location"))
		}
		if method != http.MethodGet && method != http.MethodHead {
			// Signed in, but without the CSRF token: refused before the handler runs.
			r := admin.send(method, p, strings.NewReader(""), "Content-Type", "application/x-www-form-urlencoded")
			if r.status != http.StatusForbidden {
				t.Errorf("%s (as %s): admin session without CSRF token got %d, want 403", route, p, r.status)
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked %d protected routes, want the whole table (at least the API's)", checked)
	}
}

func TestViewersAndOperatorsCannotOpenAdminPages(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator} {
		pw := e.user(role.String(), role)
		b := e.browser(t)
		b.mustSignIn(role.String(), pw)
		tok := b.csrf()
		for _, r := range []response{b.get("/admin/users"), b.get("/admin/tokens"),
			b.post("/admin/users", url.Values{"_csrf": {tok}, "name": {"x"}, "password": {"password-x"}, "role": {"admin"}}),
			b.post("/admin/tokens", url.Values{"_csrf": {tok}, "name": {"x"}, "role": {"admin"}})} {
			if r.status != http.StatusForbidden {
				t.Errorf("%s: %s %s got %d, want 403", role, r.method, r.path, r.status)
			}
		}
	}
	if n, _ := e.st.CountUsers(context.Background()); n != 2 {
		t.Errorf("%d users, want 2: nothing created by non-admins", n)
	}
}
