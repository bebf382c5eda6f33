package pgcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestSocketDirFor(t *testing.T) {
	short := "/srv/app/.dataloader/pgdata"
	if dir, in, err := socketDirFor(short, 5432); err != nil || !in || dir != short {
		t.Errorf("short path: got %q, %v, %v", dir, in, err)
	}
	long := "/srv/" + strings.Repeat("x", 100) + "/pgdata"
	dir, in, err := socketDirFor(long, 5432)
	if err != nil || in {
		t.Fatalf("long path: got %q, %v, %v", dir, in, err)
	}
	if len(filepath.Join(dir, socketName(5432))) > maxSocketPath {
		t.Errorf("fallback socket path %q too long", dir)
	}
	again, _, _ := socketDirFor(long, 5432)
	other, _, _ := socketDirFor(long+"2", 5432)
	if again != dir || other == dir {
		t.Errorf("fallback must be stable per data dir and differ between them: %q %q %q", dir, again, other)
	}
}

func TestServerOptions(t *testing.T) {
	got, err := serverOptions(map[string]string{"fsync": "off", "listen_addresses": "*", "search_path": "a, 'b'"}, "/tmp/it's dir", 5433)
	if err != nil {
		t.Fatal(err)
	}
	want := `-c 'fsync=off' -c 'listen_addresses=' -c 'port=5433' -c 'search_path=a, '\''b'\''' -c 'unix_socket_directories="/tmp/it'\''s dir"'`
	if got != want {
		t.Errorf("serverOptions =\n%s\nwant\n%s", got, want)
	}
	if _, err := serverOptions(map[string]string{"bad name; rm -rf /": "x"}, "/tmp", 5432); err == nil {
		t.Error("invalid setting name accepted")
	}
	if _, err := portFrom(map[string]string{"port": "nope"}); err == nil {
		t.Error("bad port accepted")
	}
}

func TestKeywordDSNParses(t *testing.T) {
	dsn := keywordDSN(`/tmp/a dir/it's\x`, 5433, "dataloader", "db name")
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %q: %v", dsn, err)
	}
	if cfg.Host != `/tmp/a dir/it's\x` || cfg.Port != 5433 || cfg.User != "dataloader" || cfg.Database != "db name" {
		t.Errorf("parsed %q as host=%q port=%d user=%q db=%q", dsn, cfg.Host, cfg.Port, cfg.User, cfg.Database)
	}
}

func TestCheckTraversable(t *testing.T) {
	base := tempDir(t) // 0755
	closed := filepath.Join(base, "closed")
	inner := filepath.Join(closed, "inner")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	// A user that owns nothing here and is in no group of these dirs.
	stranger := &osUser{name: "stranger", uid: 4242424, gid: 4242424, switchTo: true}
	if err := stranger.checkTraversable(base); err != nil {
		t.Errorf("open dir: %v", err)
	}
	err := stranger.checkTraversable(inner)
	if err == nil || !strings.Contains(err.Error(), "cannot traverse "+closed) {
		t.Errorf("closed dir: got %v, want a 'cannot traverse %s' error", err, closed)
	}
}

func TestFindBinDirOverride(t *testing.T) {
	t.Setenv(envBinDir, t.TempDir())
	if _, err := FindBinDir(); err == nil || !strings.Contains(err.Error(), envBinDir) {
		t.Errorf("FindBinDir with an empty override dir: %v", err)
	}
}
