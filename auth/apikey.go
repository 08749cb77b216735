package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// apiKeyPrefix starts every key NewAPIKey makes, so that secret scanners
// and people can recognise one.
const apiKeyPrefix = "jbk_"

// NewAPIKey returns a fresh random API key (256 bits, base64url, prefixed
// "jbk_") and the hex SHA-256 to put in the configuration. Hand the key to
// the client; store only the hash.
func NewAPIKey() (key, sha256Hex string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generating API key: %w", err)
	}
	key = apiKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, HashAPIKey(key), nil
}

// HashAPIKey returns the hex SHA-256 of key, the form in which the
// configuration stores it.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// apiKey is a configured key ready for comparison.
type apiKey struct {
	hash      []byte
	principal Principal
	name      string
}

// keyFile is the format of api_keys.file.
type keyFile struct {
	Keys []APIKey `yaml:"keys"`
}

// loadKeys reads the key file (if any) and compiles every key.
func loadKeys(c *APIKeysConfig) ([]apiKey, error) {
	keys := c.Keys
	if c.File != "" {
		b, err := os.ReadFile(c.File)
		if err != nil {
			return nil, fielderr.Errorf("api_keys.file", "reading the key file: %v", err)
		}
		var f keyFile
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			return nil, fielderr.Errorf("api_keys.file", "%s: %v", c.File, err)
		}
		var errs []error
		for _, e := range validateKeys("keys", f.Keys) {
			errs = append(errs, fielderr.Errorf("api_keys.file", "%s: %v", c.File, e))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		keys = append(keys[:len(keys):len(keys)], f.Keys...)
	}
	seen := map[string]string{}
	var out []apiKey
	for _, k := range keys {
		h := strings.ToLower(k.SHA256)
		if other, dup := seen[h]; dup {
			return nil, fielderr.Errorf("api_keys", "keys %q and %q are the same key", other, k.Name)
		}
		if _, dup := seen["name:"+k.Name]; dup {
			return nil, fielderr.Errorf("api_keys", "two keys are named %q", k.Name)
		}
		seen[h], seen["name:"+k.Name] = k.Name, k.Name
		principal := k.Principal
		if principal == "" {
			principal = k.Name
		}
		out = append(out, apiKey{
			hash: normalizeHash(h),
			name: k.Name,
			principal: Principal{
				ID:     "key:" + principal,
				Tenant: k.Tenant,
				Scopes: dedupe(k.Scopes),
				Groups: dedupe(k.Groups),
			},
		})
	}
	return out, nil
}

// matchKey compares the credential's hash with every configured key in
// constant time, visiting them all whatever matches.
func matchKey(keys []apiKey, credential string) (*apiKey, bool) {
	sum := sha256.Sum256([]byte(credential))
	found := -1
	for i := range keys {
		found = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(sum[:], keys[i].hash), i, found)
	}
	if found < 0 {
		return nil, false
	}
	return &keys[found], true
}
