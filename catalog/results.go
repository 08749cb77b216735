package catalog

// What a tool's result looks like and what a call without tasks gets when
// its job outlives the sync budget: the `output_schema` and
// `after_sync_budget` keys.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"
)

// AfterSyncBudget says what a call without tasks gets when its job is still
// running at the tool's sync_budget.
type AfterSyncBudget string

const (
	// AfterBudgetCancel: the job is cancelled downstream and the call
	// answers a tool error saying so (nobody could follow the job). The
	// default, also when the catalog leaves the key out (the zero value).
	AfterBudgetCancel AfterSyncBudget = "cancel"
	// AfterBudgetHandle: every call without tasks is backed by a durable
	// task; at the budget the call answers a normal tool result saying the
	// job is still running, with the task's ID and what to call next, and
	// the job goes on. The server then lists the companion tools
	// task_status, task_cancel and task_answer ([CompanionTools]).
	AfterBudgetHandle AfterSyncBudget = "return_handle"
)

// CompanionTools are the tools the server lists when some tool returns a
// handle; no catalog tool may take their names.
var CompanionTools = []string{"task_status", "task_cancel", "task_answer"}

// ReturnsHandle reports whether a call without tasks gets the task's handle
// at the sync budget instead of having its job cancelled.
func (t *Tool) ReturnsHandle() bool {
	return t.AfterSyncBudget == AfterBudgetHandle && t.Task == TaskOptional
}

// UsesHandles reports whether some tool returns a handle, which makes the
// server list the companion tools.
func (c *Catalog) UsesHandles() bool {
	for _, t := range c.Tools {
		if t.ReturnsHandle() {
			return true
		}
	}
	return false
}

// afterSyncBudget applies an `after_sync_budget` value of the settings block
// at path.
func (l *loader) afterSyncBudget(path string, v *string, e *effective) {
	if v == nil {
		return
	}
	p := path + ".after_sync_budget"
	switch m := AfterSyncBudget(*v); m {
	case AfterBudgetCancel, AfterBudgetHandle:
		e.afterBudget, e.afterBudgetAt = m, p
	default:
		l.invalid(p, fmt.Errorf("unknown value %q (known: cancel, return_handle)", *v))
	}
}

// toolAfterSyncBudget is a tool's after_sync_budget. Only a tool with task:
// optional has calls without tasks that may outlive the budget: one with
// task: never cannot run as a task, one with task: required refuses calls
// without tasks. Asked for by such a tool, return_handle is an error;
// inherited from `defaults:`, it does not apply to the tool.
func (l *loader) toolAfterSyncBudget(path string, te *toolEntry, e effective) AfterSyncBudget {
	if e.afterBudget == AfterBudgetHandle && e.task != TaskOptional {
		if e.afterBudgetAt == path+".after_sync_budget" {
			why := "this one has task: never (it cannot run as a task)"
			if e.task == TaskRequired {
				why = "this one has task: required (calls without tasks are refused)"
			}
			l.invalid(e.afterBudgetAt, fmt.Errorf("return_handle applies to tools with task: optional; %s", why))
		}
		return ""
	}
	return e.afterBudget
}

// outputSchema checks a tool's `output_schema`: the JSON Schema of the
// job's data (the `data` of the tool's structured result), a schema of type
// object, since a job's data is an object. It returns the schema as JSON,
// or nil when absent or invalid.
func (l *loader) outputSchema(path string, n *yaml.Node) json.RawMessage {
	if n == nil {
		return nil
	}
	val, ok := l.generic(n, path)
	if !ok {
		return nil
	}
	m, isMap := val.(map[string]any)
	if !isMap {
		l.errorf(resolved(n), path, "expected a mapping (a JSON Schema of the job's data), got %s", describe(resolved(n)))
		return nil
	}
	before := len(l.errs)
	newSchemaChecker(l, m).schema(path, m, schemaScope{})
	switch typ, set := m["type"]; {
	case !set:
		l.invalid(path+".type", errors.New(`required: the output schema describes the job's data, which is an object: type "object"`))
	case typ != "object" && !l.decodeFailed(path+".type"):
		l.invalid(path+".type", errors.New(`must be "object": the output schema describes the job's data, which is an object`))
	}
	if len(l.errs) > before {
		return nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil
	}
	if _, err := s.Resolve(nil); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil
	}
	return raw
}

// companionNames reports a tool that takes the name of a companion tool
// while some tool returns a handle.
func (l *loader) companionNames(c *Catalog) {
	if !c.UsesHandles() {
		return
	}
	for i, t := range c.Tools {
		for _, name := range CompanionTools {
			if t.Name == name {
				l.invalid(fmt.Sprintf("tools[%d].name", i), fmt.Errorf("%q is the name of a companion tool the server lists when a tool uses after_sync_budget: return_handle; rename this tool", name))
			}
		}
	}
}
