package config

import (
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
)

// redacted replaces secrets in RedactDSN's output.
const redacted = "xxxxx"

var (
	// keywordPassword matches password and sslpassword in libpq
	// keyword/value form, with a quoted or unquoted (possibly
	// backslash-escaped) value.
	keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|[^\s\\])*\\?)`)
	// queryPassword matches password and sslpassword in a URL query.
	queryPassword = regexp.MustCompile(`(?i)([?&][a-z]*password=)[^&#]*`)
)

// RedactDSN returns dsn with any password replaced by "xxxxx". It handles
// the URL form (the userinfo password and password query parameters, e.g.
// postgres://app:secret@db/app?sslpassword=k) and the keyword/value form
// (password=secret or password='se cret'). It errs on the side of masking
// too much: in the URL form everything between the first ':' of the
// userinfo and the last '@' is masked.
func RedactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 && !strings.Contains(dsn[:i], "=") {
		scheme, rest := dsn[:i+3], dsn[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			userinfo := rest[:at]
			if c := strings.Index(userinfo, ":"); c >= 0 {
				rest = userinfo[:c+1] + redacted + rest[at:]
			}
		}
		return scheme + queryPassword.ReplaceAllString(rest, "${1}"+redacted)
	}
	return keywordPassword.ReplaceAllString(dsn, "${1}"+redacted)
}

// attrs lists the configuration for logging, with the DSN redacted.
func (c Config) attrs() []slog.Attr {
	workers := make([]string, len(c.Workers))
	for i, w := range c.Workers {
		workers[i] = fmt.Sprintf("%s:%d", w.Queue, w.Concurrency)
	}
	return []slog.Attr{
		slog.String("database_dsn", RedactDSN(c.DatabaseDSN)),
		slog.String("data_dir", c.DataDir),
		slog.String("listen_addr", c.ListenAddr),
		slog.String("workers", strings.Join(workers, ",")),
		slog.Duration("heartbeat", c.Heartbeat),
		slog.Duration("default_lease_ttl", c.DefaultLeaseTTL),
		slog.Duration("reaper_period", c.ReaperPeriod),
		slog.Duration("claim_backoff", c.ClaimBackoff),
		slog.Duration("poll_interval", c.PollInterval),
		slog.Duration("shutdown_grace", c.ShutdownGrace),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.String("log_level", c.LogLevel.String()),
		slog.String("log_format", c.LogFormat),
		slog.String("worker_id", c.WorkerID),
		slog.Int("session_keys", len(c.SessionKeys)), // how many, never the keys
		slog.String("cookie_secure", c.CookieSecure),
		slog.Duration("session_ttl", c.SessionTTL),
		slog.String("trusted_proxies", prefixList(c.TrustedProxies)),
		slog.String("admin_user", c.AdminUser),
		slog.Bool("admin_password_set", c.AdminPassword != ""), // never the password
	}
}

// LogValue implements slog.LogValuer: the configuration as a group, with
// the DSN password redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(c.attrs()...)
}

// String implements fmt.Stringer as space-separated key=value pairs, with
// the DSN password redacted.
func (c Config) String() string {
	var b strings.Builder
	for i, a := range c.attrs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%q", a.Key, a.Value.String())
	}
	return b.String()
}

// GoString implements fmt.GoStringer so that %#v is redacted too.
func (c Config) GoString() string {
	return "config.Config{" + c.String() + "}"
}

func prefixList(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}
