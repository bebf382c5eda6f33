package web

import (
	"strconv"
	"testing"
	"time"
)

func TestThrottleLocksOutExponentiallyAndForgets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	th := newThrottle()
	th.now = func() time.Time { return now }
	pair, addr := throttleKey("u", "192.0.2.1", "alice"), throttleKey("a", "192.0.2.1", "")

	for i := range 4 {
		th.fail(pair, addr)
		if w := th.wait(pair, addr); w != 0 {
			t.Fatalf("after %d failures: wait %v, want none", i+1, w)
		}
	}
	// The 5th failure locks for 1 s, then each one doubles, up to 5 min.
	for i, want := range []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300} {
		th.fail(pair, addr)
		if w := th.wait(pair, addr); w != want*time.Second {
			t.Fatalf("failure %d: wait %v, want %v", i+5, w, want*time.Second)
		}
	}
	now = now.Add(5 * time.Minute)
	if w := th.wait(pair); w != 0 {
		t.Errorf("after the lock-out: wait %v, want none", w)
	}
	// The address alone has failed 15 times; 5 more lock it for any name.
	other := throttleKey("u", "192.0.2.1", "bob")
	for range 5 {
		th.fail(other, addr)
	}
	if w := th.wait(throttleKey("u", "192.0.2.1", "carol"), addr); w == 0 {
		t.Error("20 failures from one address: want the address locked for every name")
	}
	// A success clears the pair, not the address.
	th.succeed(pair)
	if w := th.wait(pair); w != 0 {
		t.Errorf("after success: wait %v, want none", w)
	}
	// Failures are forgotten after the window.
	now = now.Add(th.window + th.max + time.Second)
	th.fail(other)
	if f := th.keys[other]; f.count != 1 {
		t.Errorf("after the window: count %d, want 1 (old failures forgotten)", f.count)
	}
}

func TestThrottleStaysBounded(t *testing.T) {
	t.Parallel()
	th := newThrottle()
	th.maxKeys = 100
	for i := range 1000 {
		th.fail(throttleKey("a", "198.51.100."+strconv.Itoa(i), ""))
	}
	if n := len(th.keys); n > 100 {
		t.Errorf("%d keys kept, want at most 100", n)
	}
}

func TestLocalPathAcceptsOnlyPathsOnThisSite(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/": true, "/jobs?status=failed": true, "/jobs/0190/x#top": true,
		"": false, "jobs": false, "//evil.example/x": false, "/\\evil.example": false, "https://evil.example": false,
		"/\x00": false, "/a\nb": false, "javascript:alert(1)": false,
	} {
		if got := localPath(p); got != want {
			t.Errorf("localPath(%q) = %v, want %v", p, got, want)
		}
	}
}
