package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactDSNMasksPasswords(t *testing.T) {
	tests := []struct {
		desc, dsn, want string
	}{
		{"empty", "", ""},
		{"URL with password", "postgres://app:s3cret@db:5432/app?sslmode=disable",
			"postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{"postgresql URL", "postgresql://app:s3cret@db/app", "postgresql://app:xxxxx@db/app"},
		{"URL password with @ / # ?", "postgres://app:p@s/s#w?d@db/app", "postgres://app:xxxxx@db/app"},
		{"URL without password", "postgres://app@db/app", "postgres://app@db/app"},
		{"URL without userinfo", "postgres://db:5432/app", "postgres://db:5432/app"},
		{"URL query password", "postgres://db/app?user=app&password=s3cret&sslmode=require",
			"postgres://db/app?user=app&password=xxxxx&sslmode=require"},
		{"URL query sslpassword", "postgres://app:a@db/app?sslpassword=k3y",
			"postgres://app:xxxxx@db/app?sslpassword=xxxxx"},
		{"keyword form", "host=db user=app password=s3cret dbname=app",
			"host=db user=app password=xxxxx dbname=app"},
		{"keyword form quoted", `host=db password='s3 cr\'et' dbname=app`,
			"host=db password=xxxxx dbname=app"},
		{"keyword form spaced", "password = s3cret host=db", "password = xxxxx host=db"},
		{"keyword form escaped space", `password=s3\ cret host=db`, "password=xxxxx host=db"},
		{"keyword form upper case", "PASSWORD=s3cret", "PASSWORD=xxxxx"},
		{"keyword form sslpassword", "sslpassword=k3y host=db", "sslpassword=xxxxx host=db"},
		{"keyword value containing ://", "host=db password=a://b:c@d", "host=db password=xxxxx"},
		{"keyword form without password", "host=db user=app", "host=db user=app"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := RedactDSN(tt.dsn); got != tt.want {
				t.Errorf("RedactDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
			}
		})
	}
}

func TestConfigNeverPrintsTheDSNPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://app:s3cret@db:5432/app",
		"host=db user=app password=s3cret",
	} {
		cfg, err := Load(envOf(map[string]string{"DL_DB_DSN": dsn}))
		if err != nil {
			t.Fatalf("Load() error = %v, want nil", err)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", cfg)
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", cfg)
		fmt.Fprintf(&buf, "%v %+v %#v %s", cfg, cfg, cfg, cfg)
		out := buf.String()
		if strings.Contains(out, "s3cret") {
			t.Errorf("output contains the password, want it redacted:\n%s", out)
		}
		if !strings.Contains(out, "xxxxx") || !strings.Contains(out, "db") {
			t.Errorf("output = %s, want the redacted DSN", out)
		}
		if !strings.Contains(out, "config.workers=default:10,demo:4") {
			t.Errorf("output = %s, want the other settings logged", out)
		}
	}
}

func TestConfigNeverPrintsSessionKeysOrTheAdminPassword(t *testing.T) {
	const keyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	cfg, err := Load(envOf(map[string]string{"DL_SESSION_KEYS": keyHex, "DL_ADMIN_USER": "root",
		"DL_ADMIN_PASSWORD": "hunter2-hunter2"}))
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", cfg)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", cfg)
	fmt.Fprintf(&buf, "%v %+v %#v %s", cfg, cfg, cfg, cfg)
	out := buf.String()
	for _, secret := range []string{"hunter2", keyHex[:16], "\x00\x11\x22"} {
		if strings.Contains(out, secret) {
			t.Errorf("output contains a secret (%q), want it left out:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "config.session_keys=1") || !strings.Contains(out, "config.admin_user=root") {
		t.Errorf("output = %s, want the key count and the admin user", out)
	}
}
