package rest

import (
	"fmt"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/spelling"
)

// knownPlaceholders are the placeholder names other than {args.NAME}, for
// "did you mean" suggestions.
var knownPlaceholders = []string{phCorrelationID, phJobID, phJobLocation, phAnswers, phBaseURL}

// unknownPlaceholder is the error for a placeholder name that is none of the
// known ones, with the likely intended one when the name is close to it.
func unknownPlaceholder(name string) error {
	if s := suggestPlaceholder(name); s != "" {
		return fmt.Errorf("unknown placeholder {%s} (did you mean {%s}?)", name, s)
	}
	return fmt.Errorf("unknown placeholder {%s} (known: {args.NAME}, {%s})", name, strings.Join(knownPlaceholders, "}, {"))
}

// suggestPlaceholder returns the known placeholder name closest to name: an
// argument when name's first part looks like "args" ({arg.x}, {argument.x},
// {input.x}), else a fixed name within two edits ({correlationid}, {job_id}).
func suggestPlaceholder(name string) string {
	if first, rest, ok := strings.Cut(name, "."); ok && rest != "" && validArgName(rest) {
		switch first = strings.ToLower(first); {
		case first == "args":
		case spelling.Distance(first, "args") <= 2, first == "argument", first == "arguments", first == "input", first == "inputs", first == "params":
			return argsPrefix + rest
		}
	}
	best, bestDist := "", 3
	for _, k := range knownPlaceholders {
		if d := spelling.Distance(strings.ToLower(name), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// checkJSONPaths reports a placeholder written in one of the job block's
// JSON paths: paths are applied to the backend's answer as written, nothing
// is filled in.
func (c *JobConfig) checkJSONPaths() []error {
	type jsonPath struct{ name, value string }
	paths := []jsonPath{
		{"job_id.field", c.JobID.Field},
		{"status.field", c.Status.Field},
		{"status.message", c.Status.Message},
		{"status.finished_at", c.Status.FinishedAt},
		{"status.input_requests", c.Status.InputRequests},
	}
	if p := c.Status.Progress; p != nil {
		paths = append(paths, jsonPath{"status.progress.done", p.Done}, jsonPath{"status.progress.total", p.Total})
	}
	if r := c.Status.Result; r != nil {
		paths = append(paths, jsonPath{"status.result.text", r.Text}, jsonPath{"status.result.structured", r.Structured})
	}
	if e := c.Status.Error; e != nil {
		paths = append(paths, jsonPath{"status.error.code", e.Code}, jsonPath{"status.error.message", e.Message})
	}
	if c.Find != nil {
		paths = append(paths, jsonPath{"find.field", c.Find.Field})
	}
	var errs []error
	for _, p := range paths {
		if ph := parseTemplate(p.value, false).placeholders(); len(ph) > 0 {
			errs = append(errs, adapters.Fieldf(p.name, "a JSON path takes no placeholders: {%s} would not be filled in (the path is applied to the answer as written)", ph[0]))
		}
	}
	return errs
}
