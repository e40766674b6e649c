package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// EnvBootstrapToken overrides [auth] bootstrap_token.
const EnvBootstrapToken = "BALLET_BOOTSTRAP_TOKEN"

// Bootstrap returns the platform-admin bootstrap token: the environment
// variable, else the configured value, else the one stored in file, else a
// new one written to file (mode 0600). generated tells the caller to log
// where it is (never the token itself).
func Bootstrap(configured, file string) (token string, generated bool, err error) {
	if t := strings.TrimSpace(os.Getenv(EnvBootstrapToken)); t != "" {
		if len(t) < 16 {
			return "", false, fmt.Errorf("%s must be at least 16 characters", EnvBootstrapToken)
		}
		return t, false, nil
	}
	if configured != "" {
		return configured, false, nil
	}
	if t, err := readBootstrap(file); !errors.Is(err, fs.ErrNotExist) {
		return t, false, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return "", false, fmt.Errorf("create folder for %s: %w", file, err)
	}
	secret, _ := NewSecret()
	// Written whole to a temporary file, then linked into place: the link
	// fails if the file exists, so concurrent starts agree on one token and
	// none ever reads a half-written file.
	tmp, err := createTemp(filepath.Dir(file), ".bootstrap-token-*")
	if err != nil {
		return "", false, fmt.Errorf("write bootstrap token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("write bootstrap token: %w", err)
	}
	_, err = tmp.WriteString(secret + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, fmt.Errorf("write bootstrap token: %w", err)
	}
	if err := os.Link(tmp.Name(), file); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another instance wrote it meanwhile: read it, once (a link
			// to nothing exists and cannot be read, so trying again would
			// never end).
			t, err := readBootstrap(file)
			if errors.Is(err, fs.ErrNotExist) {
				return "", false, fmt.Errorf("bootstrap token file %s exists but cannot be read (a link to nothing?): %w", file, err)
			}
			return t, false, err
		}
		return "", false, fmt.Errorf("write bootstrap token %s: %w", file, err)
	}
	return secret, true, nil
}

// tokenFile is the part of *os.File that Bootstrap writes the new token
// with.
type tokenFile interface {
	Name() string
	Chmod(fs.FileMode) error
	WriteString(string) (int, error)
	Sync() error
	Close() error
}

// createTemp makes the temporary token file (a test makes one that fails).
var createTemp = func(dir, pattern string) (tokenFile, error) { return os.CreateTemp(dir, pattern) }

// readBootstrap reads the token stored in file: an error wrapping
// fs.ErrNotExist when there is none.
func readBootstrap(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read bootstrap token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return "", fmt.Errorf("bootstrap token file %s holds no usable token (delete it to generate a new one)", file)
	}
	return t, nil
}
