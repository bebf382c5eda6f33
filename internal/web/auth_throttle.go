package web

import (
	"sync"
	"time"
)

// throttle slows down password guessing. Each key (a client address, or an
// address and a user name) may fail a few times; the failure that reaches
// the limit locks the key for base, and every further one for twice as long
// as the last, up to max. A success clears the key's failures. Keys forget their failures after
// window without one.
//
// It is in memory and per process: with N replicas a guesser gets N times the
// attempts, which is still a handful per lock-out period and keeps the
// database out of the sign-in hot path. The map is bounded: when full, stale
// keys are swept and, if none is stale, the key idle the longest is dropped.
type throttle struct {
	mu      sync.Mutex
	keys    map[string]*failures
	limit   map[string]int // failures that lock, per key kind (see throttleKey)
	base    time.Duration
	max     time.Duration
	window  time.Duration
	maxKeys int
	now     func() time.Time
}

type failures struct {
	count  int
	last   time.Time
	locked time.Time // locked until
}

// newThrottle returns the sign-in throttle: 5 failures per (address, user)
// or 20 per address lock the key, for 1 s doubling up to 5 min.
func newThrottle() *throttle {
	return &throttle{
		keys:    map[string]*failures{},
		limit:   map[string]int{"u": 5, "a": 20},
		base:    time.Second,
		max:     5 * time.Minute,
		window:  15 * time.Minute,
		maxKeys: 100_000,
		now:     time.Now,
	}
}

// throttleKey builds a key: kind "a" for an address, "u" for an address and
// a user name.
func throttleKey(kind, ip, user string) string {
	if kind == "a" {
		return "a\x00" + ip
	}
	return "u\x00" + ip + "\x00" + user
}

// wait returns how long the caller must wait before trying keys again (zero
// when none is locked).
func (t *throttle) wait(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var longest time.Duration
	for _, k := range keys {
		if f, ok := t.keys[k]; ok && f.locked.After(now) {
			longest = max(longest, f.locked.Sub(now))
		}
	}
	return longest
}

// fail records a failed attempt on each key.
func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		f, ok := t.keys[k]
		if ok && now.Sub(f.last) > t.window && !f.locked.After(now) {
			f.count = 0
		}
		if !ok {
			t.makeRoom(now)
			f = &failures{}
			t.keys[k] = f
		}
		f.count++
		f.last = now
		if over := f.count - t.limit[k[:1]]; over >= 0 {
			d := t.max
			if over < 20 { // base·2^20 is beyond any sane max
				d = min(t.base<<over, t.max)
			}
			f.locked = now.Add(d)
		}
	}
}

// succeed clears the failures of keys.
func (t *throttle) succeed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.keys, k)
	}
}

// makeRoom keeps the map under maxKeys. Called with mu held.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.keys) < t.maxKeys {
		return
	}
	var oldestKey string
	var oldest time.Time
	for k, f := range t.keys {
		if now.Sub(f.last) > t.window && !f.locked.After(now) {
			delete(t.keys, k)
			continue
		}
		if oldestKey == "" || f.last.Before(oldest) {
			oldestKey, oldest = k, f.last
		}
	}
	if len(t.keys) >= t.maxKeys {
		delete(t.keys, oldestKey)
	}
}
