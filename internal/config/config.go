// Package config loads and validates the process configuration.
//
// Load is the only place in the product that reads the environment. It
// applies defaults, converts second and millisecond counts into
// time.Duration values, validates every variable and reports all problems
// at once. The variables, their defaults and their meaning are documented in
// .env.example at the repository root.
package config

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caarlos0/env/v11"
)

// Limits enforced on WORKERS_JSON entries.
const (
	// MaxQueueNameLen is the maximum length of a queue name, in characters.
	MaxQueueNameLen = 128
	// MinConcurrency is the smallest allowed concurrency of a worker pool.
	MinConcurrency = 1
	// MaxConcurrency is the largest allowed concurrency of a worker pool.
	MaxConcurrency = 1000
)

// Log output formats accepted in DL_LOG_FORMAT.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// maxSeconds bounds the *_SEC variables that must be positive so that the
// conversion to time.Duration can never overflow.
const maxSeconds = 365 * 24 * 60 * 60

// WorkerSpec is one entry of WORKERS_JSON: a pool of Concurrency workers
// consuming jobs from Queue.
type WorkerSpec struct {
	Queue       string `json:"queue"`
	Concurrency int    `json:"concurrency"`
}

// Config is the validated process configuration. Build it with Load.
//
// Config implements slog.LogValuer and fmt.Stringer; both redact the
// password in DatabaseDSN, so a Config may be logged or printed safely.
type Config struct {
	// DatabaseDSN is the PostgreSQL connection string (URL or keyword/value
	// form). Empty means: run a private embedded cluster in
	// EmbeddedClusterDir.
	DatabaseDSN string
	// DataDir is the directory for local state; the embedded cluster lives
	// in DataDir/pg.
	DataDir string
	// ListenAddr is the host:port the HTTP server (API and dashboard)
	// listens on.
	ListenAddr string
	// Workers lists the worker pools this process runs. It may be empty
	// (an API-only replica); it is never nil after Load.
	Workers []WorkerSpec
	// Heartbeat is the period at which running jobs renew their lease.
	// It is always shorter than DefaultLeaseTTL.
	Heartbeat time.Duration
	// DefaultLeaseTTL is the lease given to a claimed job when the job does
	// not specify its own.
	DefaultLeaseTTL time.Duration
	// ReaperPeriod is the period at which expired leases are reclaimed.
	ReaperPeriod time.Duration
	// ClaimBackoff is the delay before retrying after a failed claim.
	ClaimBackoff time.Duration
	// PollInterval is the safety-net poll period of worker loops, used in
	// addition to LISTEN/NOTIFY wake-ups.
	PollInterval time.Duration
	// ShutdownGrace is how long running jobs may take to finish after a
	// shutdown signal. Zero means do not wait.
	ShutdownGrace time.Duration
	// MaxBodyBytes limits the size of HTTP request bodies.
	MaxBodyBytes int64
	// LogLevel is the minimum level of emitted log records.
	LogLevel slog.Level
	// LogFormat is LogFormatJSON or LogFormatText.
	LogFormat string
	// WorkerID identifies this process in job leases. Empty means the
	// caller computes one (from host name and pid).
	WorkerID string
	// SessionKeys sign and encrypt session cookies: the first seals new
	// cookies, all open them (rotation). Each is at least 32 bytes. Empty
	// means: use the key persisted in SessionKeyFile (created when missing).
	SessionKeys [][]byte
	// CookieSecure is "auto" (Secure when the request came over HTTPS),
	// "true" or "false".
	CookieSecure string
	// SessionTTL is how long a sign-in lasts.
	SessionTTL time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto headers are believed.
	TrustedProxies []netip.Prefix
	// AdminUser and AdminPassword, when set, create that admin at start or
	// reset its password and role. AdminPassword alone is the password of
	// `web user add`. AdminPassword is never logged.
	AdminUser     string
	AdminPassword string
	// pipeline holds the raw pipeline variables (see PipelineVar); never
	// logged: DL_ETL_TARGETS_JSON holds passwords.
	pipeline map[string]string
}

// SessionKeyFile is where the generated session key is kept when
// DL_SESSION_KEYS is not set, so restarts keep sessions valid.
func (c Config) SessionKeyFile() string {
	return filepath.Join(c.DataDir, "session.key")
}

// MinSessionKeyLen is the shortest accepted session key, in bytes.
const MinSessionKeyLen = 32

// MinAdminPasswordLen is the shortest accepted DL_ADMIN_PASSWORD.
const MinAdminPasswordLen = 8

// EmbeddedClusterDir returns the data directory of the embedded PostgreSQL
// cluster, used when DatabaseDSN is empty.
func (c Config) EmbeddedClusterDir() string {
	return filepath.Join(c.DataDir, "pg")
}

// VarError is a problem with one environment variable. Load returns one
// VarError per problem, combined with errors.Join.
type VarError struct {
	// Var is the name of the offending environment variable.
	Var string
	// Msg describes the problem; it never contains DL_DB_DSN's value.
	Msg string
}

// Error returns "VAR: problem".
func (e *VarError) Error() string {
	return e.Var + ": " + e.Msg
}

// rawEnv is the environment as text, with defaults applied by the env
// library. Conversion and validation happen in Load so that every error can
// name its variable and all errors can be reported together.
type rawEnv struct {
	DatabaseDSN     string `env:"DL_DB_DSN"`
	DataDir         string `env:"DL_DATA_DIR" envDefault:".data"`
	ListenAddr      string `env:"DL_LISTEN_ADDR" envDefault:"127.0.0.1:8080"`
	WorkersJSON     string `env:"WORKERS_JSON" envDefault:"[{\"queue\":\"default\",\"concurrency\":10},{\"queue\":\"demo\",\"concurrency\":4}]"`
	HeartbeatSec    string `env:"DL_HEARTBEAT_SEC" envDefault:"10"`
	LeaseTTLSec     string `env:"DL_DEFAULT_LEASE_TTL_SEC" envDefault:"60"`
	ReaperPeriodSec string `env:"DL_REAPER_PERIOD_SEC" envDefault:"10"`
	ClaimBackoffSec string `env:"DL_CLAIM_BACKOFF_SEC" envDefault:"15"`
	PollIntervalMS  string `env:"DL_POLL_INTERVAL_MS" envDefault:"2000"`
	ShutdownSec     string `env:"DL_SHUTDOWN_GRACE_SEC" envDefault:"20"`
	MaxBodyBytes    string `env:"DL_MAX_BODY_BYTES" envDefault:"1048576"`
	LogLevel        string `env:"DL_LOG_LEVEL" envDefault:"info"`
	LogFormat       string `env:"DL_LOG_FORMAT" envDefault:"json"`
	WorkerID        string `env:"DL_WORKER_ID"`
	SessionKeys     string `env:"DL_SESSION_KEYS"`
	CookieSecure    string `env:"DL_COOKIE_SECURE" envDefault:"auto"`
	SessionTTLSec   string `env:"DL_SESSION_TTL_SEC" envDefault:"43200"`
	TrustedProxies  string `env:"DL_TRUSTED_PROXIES" envDefault:"127.0.0.0/8,::1/128"`
	AdminUser       string `env:"DL_ADMIN_USER"`
	AdminPassword   string `env:"DL_ADMIN_PASSWORD"`
	// The pipelines' variables, validated by pipeline.LoadSettings (their
	// parsers need packages config must not import).
	RetentionHours  string `env:"DL_RETENTION_HOURS" envDefault:"168"`
	AlertWebhookURL string `env:"DL_ALERT_WEBHOOK_URL"`
	AlertQueue      string `env:"DL_ALERT_QUEUE" envDefault:"alerts"`
	SchedulesJSON   string `env:"DL_SCHEDULES_JSON"`
	ETLTargetsJSON  string `env:"DL_ETL_TARGETS_JSON"`
	ETLFileDir      string `env:"DL_ETL_FILE_DIR"`
}

// PipelineVar returns the value (default applied) of one of the pipelines'
// variables, read by Load; pipeline.LoadSettings validates them at start.
func (c Config) PipelineVar(name string) string { return c.pipeline[name] }

// variables returns the names of all variables Load reads, in declaration
// order.
func variables() []string {
	params, err := env.GetFieldParams(&rawEnv{})
	if err != nil {
		panic("config: bad env tags: " + err.Error()) // programming error
	}
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Key
	}
	return names
}

// Load reads the known variables through getenv (typically os.Getenv),
// applies defaults and validates them. An unset or empty (after trimming
// white space) variable takes its default.
//
// On failure it returns a zero Config and an error joining one *VarError per
// problem, each of the form "VAR: problem", for example
//
//	DL_HEARTBEAT_SEC: must be a positive integer, got "abc"
//	WORKERS_JSON: item 2: concurrency must be between 1 and 1000, got 0
//
// WORKERS_JSON items are numbered from 1.
func Load(getenv func(string) string) (Config, error) {
	m := make(map[string]string) // non-nil: the library must not fall back to os.Environ
	for _, name := range variables() {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			m[name] = v
		}
	}

	var raw rawEnv
	if err := env.ParseWithOptions(&raw, env.Options{Environment: m}); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}

	var errs []error
	fail := func(name, format string, args ...any) {
		errs = append(errs, &VarError{Var: name, Msg: fmt.Sprintf(format, args...)})
	}

	cfg := Config{
		DatabaseDSN: raw.DatabaseDSN,
		DataDir:     raw.DataDir,
		ListenAddr:  raw.ListenAddr,
		WorkerID:    raw.WorkerID,
		pipeline: map[string]string{
			"DL_RETENTION_HOURS": raw.RetentionHours, "DL_ALERT_WEBHOOK_URL": raw.AlertWebhookURL,
			"DL_ALERT_QUEUE": raw.AlertQueue, "DL_SCHEDULES_JSON": raw.SchedulesJSON,
			"DL_ETL_TARGETS_JSON": raw.ETLTargetsJSON, "DL_ETL_FILE_DIR": raw.ETLFileDir,
		},
	}

	if msg := checkListenAddr(raw.ListenAddr); msg != "" {
		fail("DL_LISTEN_ADDR", "%s", msg)
	}

	workers, werrs := parseWorkers(raw.WorkersJSON)
	for _, msg := range werrs {
		fail("WORKERS_JSON", "%s", msg)
	}
	cfg.Workers = workers

	positiveSeconds := func(name, value string) (time.Duration, bool) {
		n, err := strconv.ParseInt(value, 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange), err == nil && n <= 0:
			fail(name, "must be a positive integer, got %q", value)
			return 0, false
		case err != nil || n > maxSeconds:
			fail(name, "must be at most %d (one year), got %q", maxSeconds, value)
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	intRange := func(name, value string, lo, hi int64) (int64, bool) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < lo || n > hi {
			fail(name, "must be an integer between %d and %d, got %q", lo, hi, value)
			return 0, false
		}
		return n, true
	}

	var hbOK, ttlOK bool
	cfg.Heartbeat, hbOK = positiveSeconds("DL_HEARTBEAT_SEC", raw.HeartbeatSec)
	cfg.DefaultLeaseTTL, ttlOK = positiveSeconds("DL_DEFAULT_LEASE_TTL_SEC", raw.LeaseTTLSec)
	if hbOK && ttlOK && cfg.Heartbeat >= cfg.DefaultLeaseTTL {
		fail("DL_HEARTBEAT_SEC", "must be less than DL_DEFAULT_LEASE_TTL_SEC (%s), got %q",
			raw.LeaseTTLSec, raw.HeartbeatSec)
	}
	cfg.ReaperPeriod, _ = positiveSeconds("DL_REAPER_PERIOD_SEC", raw.ReaperPeriodSec)
	cfg.ClaimBackoff, _ = positiveSeconds("DL_CLAIM_BACKOFF_SEC", raw.ClaimBackoffSec)

	if ms, ok := intRange("DL_POLL_INTERVAL_MS", raw.PollIntervalMS, 50, 60000); ok {
		cfg.PollInterval = time.Duration(ms) * time.Millisecond
	}
	if sec, ok := intRange("DL_SHUTDOWN_GRACE_SEC", raw.ShutdownSec, 0, 3600); ok {
		cfg.ShutdownGrace = time.Duration(sec) * time.Second
	}
	cfg.MaxBodyBytes, _ = intRange("DL_MAX_BODY_BYTES", raw.MaxBodyBytes, 1024, 1<<30)

	switch strings.ToLower(raw.LogLevel) {
	case "debug":
		cfg.LogLevel = slog.LevelDebug
	case "info":
		cfg.LogLevel = slog.LevelInfo
	case "warn":
		cfg.LogLevel = slog.LevelWarn
	case "error":
		cfg.LogLevel = slog.LevelError
	default:
		fail("DL_LOG_LEVEL", "must be one of debug, info, warn, error, got %q", raw.LogLevel)
	}

	switch f := strings.ToLower(raw.LogFormat); f {
	case LogFormatJSON, LogFormatText:
		cfg.LogFormat = f
	default:
		fail("DL_LOG_FORMAT", "must be one of json, text, got %q", raw.LogFormat)
	}

	keys, kerrs := parseSessionKeys(raw.SessionKeys)
	for _, msg := range kerrs {
		fail("DL_SESSION_KEYS", "%s", msg)
	}
	cfg.SessionKeys = keys
	switch v := strings.ToLower(raw.CookieSecure); v {
	case "auto", "true", "false":
		cfg.CookieSecure = v
	default:
		fail("DL_COOKIE_SECURE", "must be one of auto, true, false, got %q", raw.CookieSecure)
	}
	if sec, ok := intRange("DL_SESSION_TTL_SEC", raw.SessionTTLSec, 60, 30*24*3600); ok {
		cfg.SessionTTL = time.Duration(sec) * time.Second
	}
	proxies, perrs := parsePrefixes(raw.TrustedProxies)
	for _, msg := range perrs {
		fail("DL_TRUSTED_PROXIES", "%s", msg)
	}
	cfg.TrustedProxies = proxies
	cfg.AdminUser, cfg.AdminPassword = raw.AdminUser, raw.AdminPassword
	switch {
	case raw.AdminUser != "" && raw.AdminPassword == "":
		fail("DL_ADMIN_PASSWORD", "must be set when DL_ADMIN_USER is")
	case raw.AdminPassword != "" && utf8.RuneCountInString(raw.AdminPassword) < MinAdminPasswordLen:
		fail("DL_ADMIN_PASSWORD", "must be at least %d characters", MinAdminPasswordLen) // never echo it
	}
	if len(raw.AdminUser) > 64 {
		fail("DL_ADMIN_USER", "must be at most 64 bytes")
	}

	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// checkListenAddr returns a description of what is wrong with addr, or "".
func checkListenAddr(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("must be host:port (e.g. 127.0.0.1:8080 or :8080), got %q", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(n, 10) {
		return fmt.Sprintf("port must be a number between 0 and 65535, got %q", port)
	}
	return ""
}

// parseWorkers decodes and validates WORKERS_JSON. It returns the worker
// specs (never nil on success) and one message per problem.
func parseWorkers(s string) ([]WorkerSpec, []string) {
	const shape = `must be a JSON array of {"queue": string, "concurrency": int} objects`
	if !strings.HasPrefix(s, "[") {
		return nil, []string{shape}
	}
	var items []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&items); err != nil {
		return nil, []string{"invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, []string{"invalid JSON: unexpected data after the array"}
	}

	var msgs []string
	bad := func(i int, format string, args ...any) {
		msgs = append(msgs, fmt.Sprintf("item %d: ", i+1)+fmt.Sprintf(format, args...))
	}
	specs := make([]WorkerSpec, 0, len(items))
	firstSeen := make(map[string]int, len(items))
	for i, item := range items {
		if len(item) == 0 || item[0] != '{' {
			bad(i, `must be an object {"queue": string, "concurrency": int}, got %s`, item)
			continue
		}
		var ws WorkerSpec
		d := json.NewDecoder(strings.NewReader(string(item)))
		d.DisallowUnknownFields()
		if err := d.Decode(&ws); err != nil {
			bad(i, "%s", strings.TrimPrefix(err.Error(), "json: "))
			continue
		}
		ok := true
		switch n := utf8.RuneCountInString(ws.Queue); {
		case n == 0:
			bad(i, "queue must be a non-empty string")
			ok = false
		case n > MaxQueueNameLen:
			bad(i, "queue must be at most %d characters, got %d", MaxQueueNameLen, n)
			ok = false
		}
		if ws.Concurrency < MinConcurrency || ws.Concurrency > MaxConcurrency {
			bad(i, "concurrency must be between %d and %d, got %d", MinConcurrency, MaxConcurrency, ws.Concurrency)
			ok = false
		}
		if ws.Queue != "" {
			if j, dup := firstSeen[ws.Queue]; dup {
				bad(i, "duplicate queue %q (first defined in item %d)", ws.Queue, j+1)
				ok = false
			} else {
				firstSeen[ws.Queue] = i
			}
		}
		if ok {
			specs = append(specs, ws)
		}
	}
	return specs, msgs
}

// parseSessionKeys decodes DL_SESSION_KEYS: comma-separated keys, each hex
// or base64 (standard or URL alphabet, padded or not) of at least
// MinSessionKeyLen bytes. Messages never quote a key.
func parseSessionKeys(s string) ([][]byte, []string) {
	if s == "" {
		return nil, nil
	}
	var keys [][]byte
	var msgs []string
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		k, ok := decodeKey(item)
		switch {
		case item == "":
			msgs = append(msgs, fmt.Sprintf("key %d is empty", i+1))
		case !ok:
			msgs = append(msgs, fmt.Sprintf("key %d: must be hex or base64", i+1))
		case len(k) < MinSessionKeyLen:
			msgs = append(msgs, fmt.Sprintf("key %d: must be at least %d bytes, got %d (generate one with: openssl rand -hex 32)",
				i+1, MinSessionKeyLen, len(k)))
		default:
			keys = append(keys, k)
		}
	}
	return keys, msgs
}

func decodeKey(s string) ([]byte, bool) {
	if k, err := hex.DecodeString(s); err == nil {
		return k, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			return k, true
		}
	}
	return nil, false
}

// parsePrefixes decodes a comma-separated list of IP addresses and CIDR
// prefixes.
func parsePrefixes(s string) ([]netip.Prefix, []string) {
	var out []netip.Prefix
	var msgs []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		msgs = append(msgs, fmt.Sprintf("%q is not an IP address or CIDR prefix", item))
	}
	return out, msgs
}
