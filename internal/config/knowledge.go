package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// KnowledgeDefault is the Knowledge service's defaults: Default with its
// own database (data/knowledge.db) and address (127.0.0.1:8090).
func KnowledgeDefault() Config {
	c := Default()
	c.Storage.Path = "data/knowledge.db"
	c.Storage.URL = "http://127.0.0.1:4011"
	c.HTTP.Addr = "127.0.0.1:8090"
	return c
}

// LoadKnowledge reads the Knowledge service's file over KnowledgeDefault
// ("": the defaults alone), then BALLET_KNOWLEDGE_TOKEN over
// [knowledge] service_token.
func LoadKnowledge(path string) (Config, error) {
	cfg := KnowledgeDefault()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if cfg, err = parseOver(cfg, string(b), path); err != nil {
			return cfg, err
		}
	}
	t, err := cfg.KnowledgeToken(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	cfg.Knowledge.ServiceToken = t
	if err := cfg.Validate(); err != nil {
		if path == "" {
			return cfg, err
		}
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// KnowledgeEnvToken overrides [knowledge] service_token.
const KnowledgeEnvToken = "BALLET_KNOWLEDGE_TOKEN"

// MinServiceToken is the shortest service credential accepted.
const MinServiceToken = 32

// KnowledgeToken returns the service credential: BALLET_KNOWLEDGE_TOKEN
// from lookup (os.LookupEnv) when set, else [knowledge] service_token. An
// environment value is checked like the key.
func (c Config) KnowledgeToken(lookup func(string) (string, bool)) (string, error) {
	if v, ok := lookup(KnowledgeEnvToken); ok && v != "" {
		if err := checkServiceToken(v); err != nil {
			return "", fmt.Errorf("%s: %w", KnowledgeEnvToken, err)
		}
		if v == c.Auth.BootstrapToken {
			return "", fmt.Errorf("%s: must differ from auth.bootstrap_token", KnowledgeEnvToken)
		}
		return v, nil
	}
	return c.Knowledge.ServiceToken, nil
}

// checkServiceToken accepts a service credential of at least
// MinServiceToken printable characters without spaces.
func checkServiceToken(t string) error {
	if len(t) < MinServiceToken {
		return fmt.Errorf("must be at least %d characters", MinServiceToken)
	}
	if strings.ContainsFunc(t, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return errors.New("holds spaces or control characters")
	}
	return nil
}
