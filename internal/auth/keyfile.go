package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeyLen is the length of a generated session key.
const KeyLen = 32

// LoadOrCreateKeyFile returns the session key kept in path (hex), creating
// the file (mode 0600, directory 0700) with a random key when it does not
// exist. Two processes racing to create it agree on one key: the file is
// created exclusively and the loser reads the winner's.
func LoadOrCreateKeyFile(path string) (key []byte, created bool, err error) {
	if key, err := readKeyFile(path); err == nil {
		return key, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("session key: %w", err)
	}
	key = make([]byte, KeyLen)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it panics instead)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process won the race; give it a moment to write.
		for range 20 {
			if key, err = readKeyFile(path); err == nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		return key, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("session key: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("session key: write %s: %w", path, err)
	}
	return key, true, nil
}

func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < KeyLen {
		return nil, fmt.Errorf("session key: %s must hold at least %d hex-encoded bytes; delete it to generate a new one", path, KeyLen)
	}
	return key, nil
}
