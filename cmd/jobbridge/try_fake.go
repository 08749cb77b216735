package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"

	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/scripted"
)

// useExampleFake is `jobbridge try --fake` for a catalog that has its own
// scripted fake beside it (examples/NAME/fake.yaml, which answers as that
// job API's documentation says): it serves the script and points the
// catalog's rest backends at it, so that an example runs offline against
// the API it was written for. The fake accepts any credentials and the
// backends' ${file:PATH} secrets become placeholders, as the demo's ${NAME}
// ones do. Without a fake.yaml it does nothing (the demo's fakes serve).
func useExampleFake(cat *catalog.Catalog, configPath string, stderr io.Writer) (stop func(), err error) {
	path := filepath.Join(filepath.Dir(configPath), "fake.yaml")
	script, err := scripted.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--fake: %w", err)
	}
	script.Auth = nil // no real credentials are involved
	fake := scripted.New(script)
	base, err := fake.Start()
	if err != nil {
		return nil, fmt.Errorf("--fake: starting the scripted fake of %s: %w", path, err)
	}
	for _, be := range cat.Backends {
		b, ok := be.Config.(*rest.BackendConfig)
		if !ok {
			continue
		}
		b.BaseURL = rebase(b.BaseURL, base)
		b.AllowNetworks = []string{"127.0.0.1/32"}
		for k, v := range b.Headers {
			b.Headers[k] = fileRef.ReplaceAllString(v, "fake-secret")
		}
		if o := b.OAuth2; o != nil {
			o.TokenURL = rebase(o.TokenURL, base)
			o.ClientID = fileRef.ReplaceAllString(o.ClientID, "fake-client")
			o.ClientSecret = fileRef.ReplaceAllString(o.ClientSecret, "fake-secret")
		}
		if e := b.Events; e != nil {
			e.Secret = fileRef.ReplaceAllString(e.Secret, "fake-secret")
		}
	}
	fmt.Fprintf(stderr, "jobbridge try: rest backends point at the example's scripted fake (%s) at %s\n", path, base)
	return func() { fake.Close() }, nil
}

// fileRef matches a ${file:PATH} reference.
var fileRef = regexp.MustCompile(`\$\{file:[^}]*\}`)

// rebase replaces the scheme and host of an absolute URL with base's,
// keeping its path; other values stay.
func rebase(u, base string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	b, err := url.Parse(base)
	if err != nil {
		return u
	}
	p.Scheme, p.Host = b.Scheme, b.Host
	return p.String()
}
