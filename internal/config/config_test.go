package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envOf returns a getenv function over a fixed map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadAppliesDefaultsWhenNothingIsSet(t *testing.T) {
	got, err := Load(envOf(nil))
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	want := Config{
		DatabaseDSN:     "",
		DataDir:         ".data",
		ListenAddr:      "127.0.0.1:8080",
		Workers:         []WorkerSpec{{Queue: "default", Concurrency: 10}, {Queue: "demo", Concurrency: 4}},
		Heartbeat:       10 * time.Second,
		DefaultLeaseTTL: 60 * time.Second,
		ReaperPeriod:    10 * time.Second,
		ClaimBackoff:    15 * time.Second,
		PollInterval:    2 * time.Second,
		ShutdownGrace:   20 * time.Second,
		MaxBodyBytes:    1 << 20,
		LogLevel:        slog.LevelInfo,
		LogFormat:       LogFormatJSON,
		WorkerID:        "",
		CookieSecure:    "auto",
		SessionTTL:      12 * time.Hour,
		TrustedProxies:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		pipeline: map[string]string{"DL_RETENTION_HOURS": "168", "DL_ALERT_WEBHOOK_URL": "", "DL_ALERT_QUEUE": "alerts",
			"DL_SCHEDULES_JSON": "", "DL_ETL_TARGETS_JSON": "", "DL_ETL_FILE_DIR": ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() = %#v,\nwant %#v", got, want)
	}
	if dir := got.EmbeddedClusterDir(); dir != ".data/pg" {
		t.Errorf("EmbeddedClusterDir() = %q, want %q", dir, ".data/pg")
	}
}

func TestLoadTreatsEmptyAndBlankValuesAsUnset(t *testing.T) {
	got, err := Load(envOf(map[string]string{"DL_HEARTBEAT_SEC": "", "DL_LOG_LEVEL": "  "}))
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	if got.Heartbeat != 10*time.Second || got.LogLevel != slog.LevelInfo {
		t.Errorf("got Heartbeat %v, LogLevel %v, want 10s, INFO", got.Heartbeat, got.LogLevel)
	}
}

func TestLoadDoesNotReadTheProcessEnvironment(t *testing.T) {
	t.Setenv("DL_LISTEN_ADDR", "not an address")
	t.Setenv("DL_LOG_LEVEL", "debug")
	got, err := Load(envOf(nil))
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	if got.ListenAddr != "127.0.0.1:8080" || got.LogLevel != slog.LevelInfo {
		t.Errorf("got ListenAddr %q, LogLevel %v, want defaults 127.0.0.1:8080, INFO", got.ListenAddr, got.LogLevel)
	}
}

func TestLoadAcceptsValidOverrides(t *testing.T) {
	env := map[string]string{
		"DL_DB_DSN":                "postgres://app:secret@db:5432/app",
		"DL_DATA_DIR":              "/var/lib/dl",
		"DL_LISTEN_ADDR":           ":9090",
		"WORKERS_JSON":             ` [ {"queue":"emails","concurrency":1000} ] `,
		"DL_HEARTBEAT_SEC":         "5",
		"DL_DEFAULT_LEASE_TTL_SEC": "6",
		"DL_REAPER_PERIOD_SEC":     "1",
		"DL_CLAIM_BACKOFF_SEC":     "2",
		"DL_POLL_INTERVAL_MS":      "50",
		"DL_SHUTDOWN_GRACE_SEC":    "0",
		"DL_MAX_BODY_BYTES":        "1024",
		"DL_LOG_LEVEL":             "WARN",
		"DL_LOG_FORMAT":            "Text",
		"DL_WORKER_ID":             "w-1",
		"DL_SESSION_KEYS":          "abababababababababababababababababababababababababababababababab, +/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7",
		"DL_COOKIE_SECURE":         "TRUE",
		"DL_SESSION_TTL_SEC":       "3600",
		"DL_TRUSTED_PROXIES":       "10.1.2.3/8, 192.0.2.7",
		"DL_ADMIN_USER":            "root",
		"DL_ADMIN_PASSWORD":        "correct horse",
	}
	got, err := Load(envOf(env))
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	want := Config{
		DatabaseDSN:     "postgres://app:secret@db:5432/app",
		DataDir:         "/var/lib/dl",
		ListenAddr:      ":9090",
		Workers:         []WorkerSpec{{Queue: "emails", Concurrency: 1000}},
		Heartbeat:       5 * time.Second,
		DefaultLeaseTTL: 6 * time.Second,
		ReaperPeriod:    time.Second,
		ClaimBackoff:    2 * time.Second,
		PollInterval:    50 * time.Millisecond,
		ShutdownGrace:   0,
		MaxBodyBytes:    1024,
		LogLevel:        slog.LevelWarn,
		LogFormat:       LogFormatText,
		WorkerID:        "w-1",
		SessionKeys:     [][]byte{bytes.Repeat([]byte{0xab}, 32), bytes.Repeat([]byte{0xfb}, 33)},
		CookieSecure:    "true",
		SessionTTL:      time.Hour,
		TrustedProxies:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")},
		AdminUser:       "root",
		AdminPassword:   "correct horse",
		pipeline: map[string]string{"DL_RETENTION_HOURS": "168", "DL_ALERT_WEBHOOK_URL": "", "DL_ALERT_QUEUE": "alerts",
			"DL_SCHEDULES_JSON": "", "DL_ETL_TARGETS_JSON": "", "DL_ETL_FILE_DIR": ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() = %#v,\nwant %#v", got, want)
	}
}

func TestLoadRejectsBadValueNamingTheVariable(t *testing.T) {
	tests := []struct {
		name, value string
		wantMsg     string // full message of the single expected error
	}{
		{"DL_LISTEN_ADDR", "localhost", `DL_LISTEN_ADDR: must be host:port (e.g. 127.0.0.1:8080 or :8080), got "localhost"`},
		{"DL_LISTEN_ADDR", "localhost:http", `DL_LISTEN_ADDR: port must be a number between 0 and 65535, got "http"`},
		{"DL_LISTEN_ADDR", "localhost:65536", `DL_LISTEN_ADDR: port must be a number between 0 and 65535, got "65536"`},
		{"WORKERS_JSON", `{"queue":"a","concurrency":1}`, `WORKERS_JSON: must be a JSON array of {"queue": string, "concurrency": int} objects`},
		{"DL_HEARTBEAT_SEC", "abc", `DL_HEARTBEAT_SEC: must be a positive integer, got "abc"`},
		{"DL_HEARTBEAT_SEC", "0", `DL_HEARTBEAT_SEC: must be a positive integer, got "0"`},
		{"DL_HEARTBEAT_SEC", "60", `DL_HEARTBEAT_SEC: must be less than DL_DEFAULT_LEASE_TTL_SEC (60), got "60"`},
		{"DL_DEFAULT_LEASE_TTL_SEC", "-5", `DL_DEFAULT_LEASE_TTL_SEC: must be a positive integer, got "-5"`},
		{"DL_DEFAULT_LEASE_TTL_SEC", "99999999999999999999", `DL_DEFAULT_LEASE_TTL_SEC: must be at most 31536000 (one year), got "99999999999999999999"`},
		{"DL_REAPER_PERIOD_SEC", "1.5", `DL_REAPER_PERIOD_SEC: must be a positive integer, got "1.5"`},
		{"DL_CLAIM_BACKOFF_SEC", "31536001", `DL_CLAIM_BACKOFF_SEC: must be at most 31536000 (one year), got "31536001"`},
		{"DL_POLL_INTERVAL_MS", "49", `DL_POLL_INTERVAL_MS: must be an integer between 50 and 60000, got "49"`},
		{"DL_POLL_INTERVAL_MS", "60001", `DL_POLL_INTERVAL_MS: must be an integer between 50 and 60000, got "60001"`},
		{"DL_SHUTDOWN_GRACE_SEC", "-1", `DL_SHUTDOWN_GRACE_SEC: must be an integer between 0 and 3600, got "-1"`},
		{"DL_SHUTDOWN_GRACE_SEC", "3601", `DL_SHUTDOWN_GRACE_SEC: must be an integer between 0 and 3600, got "3601"`},
		{"DL_MAX_BODY_BYTES", "1023", `DL_MAX_BODY_BYTES: must be an integer between 1024 and 1073741824, got "1023"`},
		{"DL_MAX_BODY_BYTES", "1MB", `DL_MAX_BODY_BYTES: must be an integer between 1024 and 1073741824, got "1MB"`},
		{"DL_LOG_LEVEL", "verbose", `DL_LOG_LEVEL: must be one of debug, info, warn, error, got "verbose"`},
		{"DL_LOG_FORMAT", "xml", `DL_LOG_FORMAT: must be one of json, text, got "xml"`},
		{"DL_SESSION_KEYS", "abcd", `DL_SESSION_KEYS: key 1: must be at least 32 bytes, got 2 (generate one with: openssl rand -hex 32)`},
		{"DL_SESSION_KEYS", strings.Repeat("ab", 32) + ",not a key!", `DL_SESSION_KEYS: key 2: must be hex or base64`},
		{"DL_SESSION_KEYS", strings.Repeat("ab", 32) + ",,", "DL_SESSION_KEYS: key 2 is empty\nDL_SESSION_KEYS: key 3 is empty"},
		{"DL_COOKIE_SECURE", "yes", `DL_COOKIE_SECURE: must be one of auto, true, false, got "yes"`},
		{"DL_SESSION_TTL_SEC", "59", `DL_SESSION_TTL_SEC: must be an integer between 60 and 2592000, got "59"`},
		{"DL_TRUSTED_PROXIES", "10.0.0.0/8,proxy.local", `DL_TRUSTED_PROXIES: "proxy.local" is not an IP address or CIDR prefix`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := Load(envOf(map[string]string{tt.name: tt.value}))
			if err == nil {
				t.Fatalf("Load() error = nil, want %q", tt.wantMsg)
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("Load() error = %q, want %q", got, tt.wantMsg)
			}
			var ve *VarError
			if !errors.As(err, &ve) || ve.Var != tt.name {
				t.Errorf("errors.As(*VarError) = %v, Var %q, want Var %q", ve != nil, varOf(ve), tt.name)
			}
		})
	}
}

func varOf(ve *VarError) string {
	if ve == nil {
		return ""
	}
	return ve.Var
}

func TestLoadValidatesWorkersJSON(t *testing.T) {
	tests := []struct {
		desc    string
		value   string
		want    []WorkerSpec
		wantErr []string // substrings, one per expected error line
	}{
		{desc: "empty array is an API-only replica", value: `[]`, want: []WorkerSpec{}},
		{desc: "bad JSON", value: `[{"queue":"a",`, wantErr: []string{"WORKERS_JSON: invalid JSON"}},
		{desc: "trailing data", value: `[] []`, wantErr: []string{"WORKERS_JSON: invalid JSON: unexpected data after the array"}},
		{desc: "null", value: `null`, wantErr: []string{"WORKERS_JSON: must be a JSON array"}},
		{desc: "unknown field", value: `[{"queue":"a","concurency":1}]`, wantErr: []string{`WORKERS_JSON: item 1: unknown field "concurency"`}},
		{desc: "item not an object", value: `[{"queue":"a","concurrency":1}, 5]`, wantErr: []string{"WORKERS_JSON: item 2: must be an object"}},
		{desc: "wrong type", value: `[{"queue":"a","concurrency":"4"}]`, wantErr: []string{"WORKERS_JSON: item 1: cannot unmarshal"}},
		{desc: "zero concurrency", value: `[{"queue":"a","concurrency":1},{"queue":"b","concurrency":0}]`,
			wantErr: []string{"WORKERS_JSON: item 2: concurrency must be between 1 and 1000, got 0"}},
		{desc: "missing concurrency", value: `[{"queue":"a"}]`,
			wantErr: []string{"WORKERS_JSON: item 1: concurrency must be between 1 and 1000, got 0"}},
		{desc: "concurrency too high", value: `[{"queue":"a","concurrency":1001}]`,
			wantErr: []string{"WORKERS_JSON: item 1: concurrency must be between 1 and 1000, got 1001"}},
		{desc: "empty queue", value: `[{"queue":"","concurrency":1}]`,
			wantErr: []string{"WORKERS_JSON: item 1: queue must be a non-empty string"}},
		{desc: "queue of 128 characters", value: `[{"queue":"` + strings.Repeat("é", 128) + `","concurrency":1}]`,
			want: []WorkerSpec{{Queue: strings.Repeat("é", 128), Concurrency: 1}}},
		{desc: "queue too long", value: `[{"queue":"` + strings.Repeat("q", 129) + `","concurrency":1}]`,
			wantErr: []string{"WORKERS_JSON: item 1: queue must be at most 128 characters, got 129"}},
		{desc: "duplicate queue", value: `[{"queue":"a","concurrency":1},{"queue":"b","concurrency":1},{"queue":"a","concurrency":2}]`,
			wantErr: []string{`WORKERS_JSON: item 3: duplicate queue "a" (first defined in item 1)`}},
		{desc: "every bad item reported", value: `[{"queue":"","concurrency":0},{"queue":"a","concurrency":1,"x":1}]`,
			wantErr: []string{
				"WORKERS_JSON: item 1: queue must be a non-empty string",
				"WORKERS_JSON: item 1: concurrency must be between 1 and 1000, got 0",
				`WORKERS_JSON: item 2: unknown field "x"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cfg, err := Load(envOf(map[string]string{"WORKERS_JSON": tt.value}))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Load() error = %v, want nil", err)
				}
				if !reflect.DeepEqual(cfg.Workers, tt.want) {
					t.Errorf("Workers = %#v, want %#v", cfg.Workers, tt.want)
				}
				return
			}
			checkErrorLines(t, err, tt.wantErr)
		})
	}
}

func TestLoadReportsAllProblemsAtOnce(t *testing.T) {
	_, err := Load(envOf(map[string]string{
		"DL_LISTEN_ADDR":      "nope",
		"WORKERS_JSON":        `[{"queue":"a","concurrency":0}]`,
		"DL_HEARTBEAT_SEC":    "abc",
		"DL_POLL_INTERVAL_MS": "1",
		"DL_LOG_LEVEL":        "loud",
		"DL_LOG_FORMAT":       "yaml",
	}))
	checkErrorLines(t, err, []string{
		"DL_LISTEN_ADDR:",
		"WORKERS_JSON: item 1: concurrency",
		"DL_HEARTBEAT_SEC:",
		"DL_POLL_INTERVAL_MS:",
		"DL_LOG_LEVEL:",
		"DL_LOG_FORMAT:",
	})
}

// checkErrorLines checks that err has exactly one line per element of want,
// in order, each line starting with or containing that element.
func checkErrorLines(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load() error = nil, want %d problems: %q", len(want), want)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Load() error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("error line %d = %q, want it to contain %q", i+1, lines[i], w)
		}
	}
}

// TestEnvExampleDocumentsEveryVariableWithItsDefault keeps .env.example in
// sync with the variables Load reads.
func TestEnvExampleDocumentsEveryVariableWithItsDefault(t *testing.T) {
	f, err := os.Open("../../.env.example")
	if err != nil {
		t.Fatalf("open .env.example: %v", err)
	}
	defer f.Close()

	documented := map[string]string{}
	var prevComment bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			prevComment = strings.HasPrefix(line, "#")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf(".env.example line %q: got no '=', want KEY=VALUE", line)
			continue
		}
		if !prevComment {
			t.Errorf(".env.example: %s has no explanation comment above it, want one", k)
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		documented[k] = v
		prevComment = false
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	// The documented values must be the defaults: loading them must give
	// the same Config as loading nothing.
	fromExample, err := Load(envOf(documented))
	if err != nil {
		t.Fatalf("Load(.env.example) error = %v, want nil", err)
	}
	defaults, _ := Load(envOf(nil))
	if !reflect.DeepEqual(fromExample, defaults) {
		t.Errorf("Load(.env.example) = %v,\nwant defaults %v", fromExample, defaults)
	}

	for _, name := range variables() {
		if _, ok := documented[name]; !ok {
			t.Errorf(".env.example: %s missing, want every variable documented", name)
		}
		delete(documented, name)
	}
	for name := range documented {
		t.Errorf(".env.example: %s documented, want only variables Load reads", name)
	}
}

func TestLoadRequiresAPasswordForTheAdminUser(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DL_ADMIN_USER": "root"}, "DL_ADMIN_PASSWORD: must be set when DL_ADMIN_USER is"},
		{map[string]string{"DL_ADMIN_USER": "root", "DL_ADMIN_PASSWORD": "short"}, "DL_ADMIN_PASSWORD: must be at least 8 characters"},
		{map[string]string{"DL_ADMIN_USER": strings.Repeat("u", 65), "DL_ADMIN_PASSWORD": "long enough"}, "DL_ADMIN_USER: must be at most 64 bytes"},
	}
	for _, tt := range tests {
		_, err := Load(envOf(tt.env))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%v) error = %v, want %q", tt.env, err, tt.want)
		}
	}
}

func TestLoadAcceptsTheAdminPasswordAloneForTheUserCommand(t *testing.T) {
	cfg, err := Load(envOf(map[string]string{"DL_ADMIN_PASSWORD": "long enough"}))
	if err != nil || cfg.AdminPassword != "long enough" || cfg.AdminUser != "" {
		t.Errorf("Load() = admin %q / password set %v, error %v; want no user, the password, nil", cfg.AdminUser, cfg.AdminPassword != "", err)
	}
}

func TestPipelineVariablesAreReadWithDefaultsAndNeverLogged(t *testing.T) {
	cfg, err := Load(envOf(map[string]string{"DL_ETL_TARGETS_JSON": `{"w":"postgres://u:hunter2@h/db"}`, "DL_RETENTION_HOURS": "24"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.PipelineVar("DL_RETENTION_HOURS"); got != "24" {
		t.Errorf("DL_RETENTION_HOURS: got %q, want 24", got)
	}
	if got := cfg.PipelineVar("DL_ALERT_QUEUE"); got != "alerts" {
		t.Errorf("DL_ALERT_QUEUE: got %q, want the default alerts", got)
	}
	if s := fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg); strings.Contains(s, "hunter2") {
		t.Errorf("a pipeline secret reached the printed config: %s", s)
	}
}
