// Package configs embeds the catalogs a binary needs without a checkout:
// the demo catalog `jobbridge demo` serves by default and the conformance
// catalog the conformance run serves. The other files here are examples
// read from the repository.
package configs

import _ "embed"

// Demo is configs/demo.yaml, the catalog `jobbridge demo` serves when no
// --config is given.
//
//go:embed demo.yaml
var Demo []byte

// DemoName names the embedded demo catalog in positions and messages.
const DemoName = "configs/demo.yaml (embedded)"

// Conformance is configs/conformance.yaml, the catalog the conformance
// suite runs against.
//
//go:embed conformance.yaml
var Conformance []byte
