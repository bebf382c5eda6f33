package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"
)

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "dl_session"

// Cookie Secure-flag modes of AuthConfig.CookieSecure.
const (
	CookieSecureAuto   = "auto"  // Secure when the request came over TLS (directly or via a trusted proxy)
	CookieSecureAlways = "true"  // always Secure (TLS terminated by something we cannot see)
	CookieSecureNever  = "false" // never Secure (plain-HTTP development set-ups)
)

// AuthConfig is how the server authenticates browsers.
type AuthConfig struct {
	// SessionKeys sign and encrypt session cookies: the first key seals new
	// cookies, every key opens them, so a key is rotated by putting the new
	// one first and dropping the old one once the sessions it sealed have
	// expired. Empty means a random key that lives as long as the process.
	SessionKeys [][]byte
	// CookieSecure is CookieSecureAuto (the default), CookieSecureAlways or
	// CookieSecureNever.
	CookieSecure string
	// SessionTTL is how long a sign-in lasts (default 12 h); it is not
	// extended by activity.
	SessionTTL time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto headers are believed. Empty trusts no one.
	TrustedProxies []netip.Prefix
}

// defaultSessionTTL bounds a sign-in when AuthConfig.SessionTTL is zero.
const defaultSessionTTL = 12 * time.Hour

// Session value keys.
const (
	sessUserID  = "uid"
	sessName    = "name"
	sessRole    = "role"
	sessCSRF    = "csrf"
	sessLoginAt = "login_at" // unix seconds
)

// newCookieStore builds the session cookie codec from the configured keys.
// Each configured key is expanded into a signing key (HMAC-SHA-256 over a
// 64-byte key) and an AES-256 encryption key, so a leaked cookie shows
// nothing (not even the CSRF token) and one secret per rotation step is all
// an operator manages.
func newCookieStore(keys [][]byte, ttl time.Duration) *sessions.CookieStore {
	if len(keys) == 0 {
		keys = [][]byte{securecookie.GenerateRandomKey(32)}
	}
	pairs := make([][]byte, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, derive(sha512.New, k, "dataloader session signing"),
			derive(sha256.New, k, "dataloader session encryption"))
	}
	cs := sessions.NewCookieStore(pairs...)
	cs.Options = &sessions.Options{Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode}
	cs.MaxAge(int(ttl.Seconds())) // also makes the codecs refuse older cookies
	for _, c := range cs.Codecs {
		if sc, ok := c.(*securecookie.SecureCookie); ok {
			sc.MaxLength(8192)
		}
	}
	return cs
}

func derive(h func() hash.Hash, key []byte, label string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// session returns the request's session, decoding the cookie once per
// request. A cookie that does not verify (tampered, expired, sealed by a
// removed key) yields a fresh empty session.
func (s *Server) session(c echo.Context) *sessions.Session {
	if sess, ok := c.Get(ctxSession).(*sessions.Session); ok {
		return sess
	}
	sess, err := s.auth.cookies.New(c.Request(), SessionCookie)
	if err != nil {
		sess = sessions.NewSession(s.auth.cookies, SessionCookie)
		opts := *s.auth.cookies.Options
		sess.Options, sess.IsNew = &opts, true
	}
	c.Set(ctxSession, sess)
	return sess
}

// saveSession writes the session cookie with the flags of this request.
func (s *Server) saveSession(c echo.Context, sess *sessions.Session) error {
	sess.Options.Secure = s.secureRequest(c.Request())
	return sess.Save(c.Request(), c.Response())
}

// secureRequest reports whether cookies set in answer to r must be Secure.
func (s *Server) secureRequest(r *http.Request) bool {
	switch s.auth.cfg.CookieSecure {
	case CookieSecureAlways:
		return true
	case CookieSecureNever:
		return false
	}
	return s.isHTTPS(r)
}

// isHTTPS reports whether the client reached us over TLS: directly, or
// through a trusted proxy that says so in X-Forwarded-Proto.
func (s *Server) isHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !s.fromTrustedProxy(r) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// fromTrustedProxy reports whether the direct peer is a trusted proxy.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range s.auth.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ipExtractor returns the client address for throttling and logs: the
// right-most X-Forwarded-For entry not added by a trusted proxy, or the
// peer address when the peer is not trusted (headers from untrusted peers
// are ignored, so a client cannot pick its own address).
func ipExtractor(trusted []netip.Prefix) echo.IPExtractor {
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(prefixNet(p)))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
