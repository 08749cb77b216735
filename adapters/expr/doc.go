// Package expr is the one template and expression language of the backend
// configurations: how a catalog author computes a request value from a tool
// call, and reads a value out of a backend's answer.
//
// # Expressions
//
// Expressions are Google's Common Expression Language (CEL, the language of
// Kubernetes validation rules and admission policies). CEL was chosen for
// safety: an expression is parsed and type-checked when the catalog loads,
// so a mistake is an error at its line and column; it cannot loop, call out,
// read files or the environment, or change anything; and every evaluation is
// bounded by a cost limit ([MaxCost]) and by its context.
//
// The variables an expression may use depend on where it is written (see
// [Scope]): args (the tool's arguments), correlation_id, job (id and
// location), answers, base_url, and in the reading of an answer body (the
// answer's JSON), status (its HTTP status) and headers (lower-case names).
// JSON numbers without a fraction or exponent are integers, so that
// int(body.status) / 256 and body.count + 1 work as written.
//
// Besides CEL's standard library and its strings, lists, math and encoders
// extensions (json.encode, base64), three functions quote values:
// shell_quote(v) makes v one word for a POSIX shell (in single quotes, so
// "$(id)" stays text), json_quote(v) makes it a JSON string literal
// ("say \"hi\""), for JSON written inside a string, and text(v) formats any
// value as a template does.
//
// # Values
//
// A field that reads an answer ([Value]) is a JSON path in gjson syntax
// ("status", "job.state", "items.0.id") or, when it starts with "=", an
// expression: `= body.building ? "BUILDING" : body.result`.
//
// # Templates
//
// A [Template] is text with placeholders in braces: {args.NAME},
// {correlation_id}, {job.id} and the like (a dotted name looked up in the
// variables), and {= EXPR}, an expression. In header values (with
// [Scope.Secrets]) ${NAME} names an environment variable and ${file:PATH} a
// file whose content is a secret. Braces that enclose neither are literal
// text, so "${{ github.ref }}" and JSON-looking text pass through.
package expr
