// Package conf is a fixture for the reference generator: a config with
// the shapes the catalog uses.
package conf

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Root is the top of the file. See [Backend].
type Root struct {
	// Name names the thing. Required.
	Name string `yaml:"name"`
	// Every is how often, a duration.
	Every time.Duration `yaml:"every"`
	// Backends by name.
	Backends map[string]*Backend `yaml:"backends"`
	// Steps run in order.
	Steps []Step `yaml:"steps"`
	// Later is decoded later.
	Later *yaml.Node `yaml:"later"`
	Codes Codes      `yaml:"codes"`
	// Hidden is never read from YAML.
	Hidden string `yaml:"-"`
	hidden string
	// Plain has no tag; its key is its lower-cased name.
	Plain bool
}

// Backend is one backend.
//
//	backends:
//	  a: {url: https://example.com}
type Backend struct {
	// URL is where it lives.
	URL string `yaml:"url"`
}

// Step is one step; it shares [Call]'s keys.
type Step struct {
	Call `yaml:",inline"`
	// Retries is how often the step is retried.
	Retries *int `yaml:"retries"`
}

// Call is a request.
type Call struct {
	// Path is the request's path.
	Path string `yaml:"path"`
}

// Codes are HTTP statuses, one or a list.
type Codes []int
