package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// TokenPrefix starts every API token secret, so that leaked secrets are easy
// to recognise (and to scan for) and a malformed header fails fast.
const TokenPrefix = "dl_"

// NewTokenSecret returns a new random API token secret ("dl_" and 43
// base64url characters, 256 bits) and the hash to store for it.
func NewTokenSecret() (secret string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken is what the database stores for a token secret: its SHA-256. A
// fast hash is right here: secrets are 256 random bits, so there is nothing
// for a slow KDF to protect, and every API request looks a token up.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// WellFormedToken reports whether s looks like a token secret.
func WellFormedToken(s string) bool {
	if !strings.HasPrefix(s, TokenPrefix) || len(s) != len(TokenPrefix)+43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(TokenPrefix):])
	return err == nil
}
