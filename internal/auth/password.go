package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters for new hashes: OWASP's recommended minimum
// (19 MiB, 2 passes, 1 lane), about 20–40 ms per check on a server core —
// slow for an offline guesser, cheap enough that a burst of sign-ins does not
// starve the process. Stored hashes carry their own parameters, so raising
// these later keeps old hashes verifiable.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// MaxPasswordLen bounds passwords so that hashing cost stays bounded.
const MaxPasswordLen = 1024

// MinPasswordLen is the shortest password accepted for a new user.
const MinPasswordLen = 8

// CheckNewPassword checks the length of a password being set: at least
// MinPasswordLen characters, at most MaxPasswordLen bytes.
func CheckNewPassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLen || len(pw) > MaxPasswordLen {
		return fmt.Errorf("the password must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// ErrMismatch is returned by VerifyPassword when the password is wrong.
var ErrMismatch = errors.New("password does not match")

var b64 = base64.RawStdEncoding

// HashPassword hashes pw with argon2id and a random salt, encoded in the PHC
// string format: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashPassword(pw string) (string, error) {
	if len(pw) > MaxPasswordLen {
		return "", fmt.Errorf("password longer than %d bytes", MaxPasswordLen)
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// VerifyPassword checks pw against an encoded hash from HashPassword in
// constant time. It returns nil on a match, ErrMismatch on a wrong password
// and another error when the encoded hash is malformed.
func VerifyPassword(encoded, pw string) error {
	p, salt, want, err := decodeHash(encoded)
	if err != nil {
		return err
	}
	if len(pw) > MaxPasswordLen {
		pw = "" // still spend the time, never match
		want = nil
	}
	got := argon2.IDKey([]byte(pw), salt, p.time, p.memory, p.threads, uint32(max(len(want), argonKeyLen)))
	if len(want) == 0 || subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMismatch
	}
	return nil
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

func decodeHash(encoded string) (argonParams, []byte, []byte, error) {
	var p argonParams
	bad := func(what string) (argonParams, []byte, []byte, error) {
		return p, nil, nil, fmt.Errorf("malformed password hash: %s", what)
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return bad("not an argon2id PHC string")
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return bad("version")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads); err != nil {
		return bad("parameters")
	}
	// Refuse parameters that would let a corrupt row exhaust memory or CPU.
	if p.memory < 1024 || p.memory > 1<<20 || p.time < 1 || p.time > 16 || p.threads < 1 || p.threads > 16 {
		return bad("parameters out of range")
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return bad("salt")
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return bad("key")
	}
	return p, salt, key, nil
}

// dummyHash is verified against when a user does not exist, so that an
// unknown name takes as long as a wrong password.
// It is computed on first use, not at init, so importing the package costs
// nothing.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("dataloader-dummy-password")
	if err != nil {
		panic(err) // only when the system's random source fails
	}
	return h
})

// VerifyDummy spends the time of one password check and always fails. Call it
// when a user is unknown (or disabled) so that response times do not reveal
// which names exist.
func VerifyDummy(pw string) error {
	_ = VerifyPassword(dummyHash(), pw)
	return ErrMismatch
}
