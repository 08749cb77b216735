// Package docgen writes the parts of jobbridge's documentation that restate
// code, and checks the pages that do not.
//
// Two pages are generated, so that they cannot drift from what they
// describe: the command reference (docs/commands.md) from each command's own
// -h output ([ParseHelp], [RenderCommands]), and the catalog reference
// (docs/catalog-reference.md) from the doc comments of the Go types the
// catalog's YAML is decoded into, field by field with the yaml key, the
// type and the comment ([Loader], [RenderReference]). The tests that
// compare them with the checked-in files live beside the commands, in
// cmd/jobbridge, because only the binary knows its commands and its backend
// types.
//
// Two checks keep the hand-written pages honest: every relative link in the
// Markdown pages points at a file (and heading) that exists ([CheckLinks]),
// and the design page names every direct dependency of go.mod
// ([DirectDependencies]).
package docgen
